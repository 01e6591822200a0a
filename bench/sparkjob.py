"""What one Extract/Transform Spark job costs, by Spark setting.

    python -m bench.sparkjob [--jobs 40] [--rows 20000] [--smoke]

For each candidate set of Spark options (the node's defaults first, then each candidate on
top of them; ``--bare`` leaves out ``node.spark.MICRO_BATCH_DEFAULTS``) a fresh SparkSession
(``local[2]``) runs ``--jobs`` near-empty jobs (one change: the latency a caught-up pipeline
pays per batch) and a few jobs of ``--rows`` inserts (the per-row cost of a catch-up), and
the same batches in the node (``local``: what a caught-up pipeline's small batches cost).
Reports wall p50/p95 per job and the CPU seconds of the whole process tree (driver, JVM,
Python workers) per job and per 100k rows.
The job is the node's own (``SparkRunner.run_job``: rows events as bytes in, decoded,
transformed, merged and rendered as SQL text in the workers) on a compiled one-pair
pipeline and rows events made by ``bench.rowsevents``; results go to
``bench/results/sparkjob-*.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from array import array
from pathlib import Path
from typing import Any

from bench import rowsevents
from bench.measure import RESULTS, tree_cpu_s, write_report
from node.extract.etl import CompiledPipeline
from node.extract.job import JobSpec, Part, PartResult
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
    runner = SparkRunner(SparkSettings("local[2]", "512m", tuple(options.items()),
                                       local_max_rows=0))  # every job on Spark
    compiled = _pipeline()
    (one_spec, one), (many_spec, many) = _job(1, 1), _job(rows, 1)
    try:
        for _ in range(10):  # warm: JVM, JIT, Python workers, broadcast
            runner.run_job(compiled, one_spec, one, local=False)
        pid = os.getpid()
        walls, cpu_before = [], tree_cpu_s(pid)
        for _ in range(jobs):
            started = time.perf_counter()
            runner.run_job(compiled, one_spec, one, local=False)
            walls.append(time.perf_counter() - started)
        empty_cpu = (tree_cpu_s(pid) - cpu_before) / jobs
        result: dict[str, Any] = {}
        for where, local in (("spark", False), ("node", True)):
            big_walls, cpu_before = [], tree_cpu_s(pid)
            for _ in range(3):
                started = time.perf_counter()
                out = runner.run_job(compiled, many_spec, many, local=local)
                big_walls.append(time.perf_counter() - started)
                assert _rows(out) == rows, f"{name}: {_rows(out)} rows rendered for {rows}"
            big_cpu = (tree_cpu_s(pid) - cpu_before) / 3
            result[f"{where}_job_{rows}_rows_ms"] = round(statistics.median(big_walls) * 1000)
            result[f"{where}_cpu_s_per_100k_rows"] = round(big_cpu / rows * 100_000, 2)
    finally:
        runner.stop()
    walls.sort()
    return {"scenario": name, "options": options,
            "empty_job_p50_ms": round(statistics.median(walls) * 1000, 1),
            "empty_job_p95_ms": round(walls[int(len(walls) * 0.95) - 1] * 1000, 1),
            "empty_job_cpu_ms": round(empty_cpu * 1000, 1), **result, "equal": True}


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
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.rows, args.only = 5, 500, "defaults"
    results = [measure(name, CANDIDATES[name], args.jobs, args.rows, args.bare)
               for name in args.only.split(",")]  # a name twice measures the drift
    write_report(args.results, "sparkjob", args.smoke, vars(args), results,
                 {"node_peak_rss_mb": 0, "per_batch_ms": {}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
