"""What one Extract/Transform Spark job costs, by Spark setting.

    python -m bench.sparkjob [--jobs 40] [--rows 20000] [--smoke]

For each candidate set of Spark options (the node's defaults first, then each candidate on
top of them; ``--bare`` leaves out ``node.spark.MICRO_BATCH_DEFAULTS``) a fresh SparkSession
(``local[2]``) starts (wall and CPU), runs 20 near-empty and 10 ``--rows`` jobs while the
JVM is cold, then ``--jobs`` near-empty jobs (one change: the latency a caught-up pipeline
pays per batch) and 10 jobs of ``--rows`` inserts (the per-row cost of a catch-up), and the
same batch in the node (``local``). Reports wall p50 per job and the CPU of the whole process
tree (driver, JVM, Python workers) per job and per 100k rows, and the JVM's alone per job
(``bytes through spark``: a local master's rows events and results through Spark, as on a
cluster, instead of ``node.handoff.Handoff``'s files).
The job is the node's own (``SparkRunner.run_job``: rows events as bytes in, decoded,
transformed, merged and rendered as SQL text in the workers) on a compiled one-pair
pipeline and rows events made by ``bench.rowsevents``; results go to
``bench/results/sparkjob-*.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from array import array
from pathlib import Path
from typing import Any

from bench import rowsevents
from bench.measure import RESULTS, tree_cpu_by_process, tree_cpu_s, write_report
from node.extract.etl import CompiledPipeline
from node.extract.job import Part
from node.jobs import JobSpec, PartResult
from node.spark import MICRO_BATCH_DEFAULTS, SparkRunner
from shared.model import DataMedia, MediaPair, Pipeline
from shared.patterns import NamePattern
from shared.settings import SparkSettings

SPARK_DEFAULTS = {"spark.python.unix.domain.socket.enabled": "false",
                  "spark.locality.wait": "3s"}
CANDIDATES: dict[str, dict[str, str]] = {
    "defaults": {},  # SparkRunner's, which include node.spark.MICRO_BATCH_DEFAULTS
    "unix socket": {"spark.python.unix.domain.socket.enabled": "true"},
    "no locality wait": {"spark.locality.wait": "0s"},
    "kryo": {"spark.serializer": "org.apache.spark.serializer.KryoSerializer"},
    "no reference tracking": {"spark.cleaner.referenceTracking": "false"},
}
CANDIDATES["all of them"] = {k: v for options in CANDIDATES.values() for k, v in options.items()}
# the JVM as it comes (C2 compiler, parallel GC) instead of node.spark.JVM_OPTIONS
CANDIDATES["jvm as it comes"] = {"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile="
                                 f"file:{Path(__file__).resolve().parent.parent}/node/"
                                 "log4j2.properties"}
# the node's defaults with a local master's bytes sent through Spark (node.handoff.Handoff off:
# what a cluster does, and what a local master did before it)
THROUGH_SPARK = "bytes through spark"
CANDIDATES[THROUGH_SPARK] = {}


def _pipeline() -> CompiledPipeline:
    media = DataMedia("source", NamePattern.parse("bench"), NamePattern.parse("items"))
    pair = MediaPair(source=media, target=dataclasses.replace(media, datasource="target"))
    return CompiledPipeline.compile("bench.forward", 1, Pipeline(
        "forward", "source", "target", (pair,)))


LAYOUT = rowsevents.schema("items", [("id", rowsevents.INT), ("name", rowsevents.VARCHAR),
                                     ("qty", rowsevents.INT), ("note", rowsevents.VARCHAR)])


def _job(rows: int, partitions: int) -> tuple[JobSpec, list[Part]]:
    """A batch of ``rows`` inserts cut as the node's Planner cuts one table (one part per
    table: the rest of the partitions have nothing)."""
    events = rowsevents.insert_events(LAYOUT, 7, [(i, f"item {i}", i * 2, "x" * 40)
                                                  for i in range(rows)])
    part = Part({1: LAYOUT}, b"".join(events), array("I", map(len, events)),
                array("I", [1] * len(events)), array("I", range(len(events))))
    return JobSpec(1, True, load_batch_size=1000), [part][:max(partitions, 1)]


def _rows(results: list[PartResult]) -> int:
    return sum(unit.rows for result in results for unit in result.units)


def measure(name: str, options: dict[str, str], jobs: int, rows: int,
            bare: bool = False) -> dict[str, Any]:
    if bare:  # Spark's own defaults under the candidate
        options = {**{k: SPARK_DEFAULTS[k] for k, _ in MICRO_BATCH_DEFAULTS}, **options}
    pid = os.getpid()
    cpu_before, started = tree_cpu_s(pid), time.perf_counter()
    runner = SparkRunner(SparkSettings("local[2]", "512m", tuple(options.items()),
                                       local_max_rows=0))  # every job on Spark
    compiled = _pipeline()
    (one_spec, one), (many_spec, many) = _job(1, 1), _job(rows, 1)
    result: dict[str, Any] = {}

    def run(label: str, spec: JobSpec, parts: list[Part], count: int, local: bool = False,
            expect: int = 0) -> list[float]:
        walls, cpu, split = [], tree_cpu_s(pid), tree_cpu_by_process(pid)
        for _ in range(count):
            began = time.perf_counter()
            out = runner.run_job(compiled, spec, parts, local=local)
            walls.append(time.perf_counter() - began)
            assert not expect or _rows(out) == expect, f"{name}: {_rows(out)} rows for {expect}"
        result[f"{label}_cpu_ms"] = round((tree_cpu_s(pid) - cpu) / count * 1000, 1)
        result[f"{label}_jvm_cpu_ms"] = round(
            (tree_cpu_by_process(pid)["jvm"] - split["jvm"]) / count * 1000, 1)
        result[f"{label}_p50_ms"] = round(statistics.median(walls) * 1000, 1)
        return sorted(walls)

    try:
        runner.context  # noqa: B018 - starts Spark
        if name == THROUGH_SPARK:
            runner._handoff = None
        result["start_s"] = round(time.perf_counter() - started, 1)
        result["start_cpu_s"] = round(tree_cpu_s(pid) - cpu_before, 1)
        run("cold_empty_job", one_spec, one, 20)  # the JVM's compiler still at work
        run(f"cold_job_{rows}_rows", many_spec, many, 10, expect=rows)
        walls = run("empty_job", one_spec, one, jobs)
        result["empty_job_p95_ms"] = round(walls[int(len(walls) * 0.95) - 1] * 1000, 1)
        run(f"job_{rows}_rows", many_spec, many, 10, expect=rows)
        run(f"node_job_{rows}_rows", many_spec, many, 3, local=True, expect=rows)
    finally:
        runner.stop()
    for where in ("", "node_"):
        cpu_ms = result[f"{where}job_{rows}_rows_cpu_ms"]
        result[f"{where}cpu_s_per_100k_rows"] = round(cpu_ms / 1000 / rows * 100_000, 2)
    return {"scenario": name, "options": options, **result, "equal": True}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.sparkjob", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--only", default=",".join(CANDIDATES))
    parser.add_argument("--bare", action="store_true",
                        help="measure without node.spark.MICRO_BATCH_DEFAULTS")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for the test suite")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child's candidate: JSON out
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.rows, args.only = 5, 500, "defaults"
    if args.one:
        print(json.dumps(measure(args.one, CANDIDATES[args.one], args.jobs, args.rows,
                                 args.bare)))
        return 0
    # each candidate in a process of its own: a JVM's options are fixed when it starts, and
    # a second session in one process would reuse the first one's JVM
    results = [_child(name, args) for name in args.only.split(",")]  # twice: the drift
    write_report(args.results, "sparkjob", args.smoke, vars(args), results,
                 {"node_peak_rss_mb": 0, "per_batch_ms": {}})
    return 0


def _child(name: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.sparkjob", "--one", name, "--jobs",
               str(args.jobs), "--rows", str(args.rows), *(["--bare"] if args.bare else [])]
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parent.parent)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise RuntimeError(f"bench.sparkjob {name} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(lines[-1]))


if __name__ == "__main__":
    raise SystemExit(main())
