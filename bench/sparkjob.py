"""What one Extract/Transform Spark job costs, by Spark setting.

    python -m bench.sparkjob [--jobs 40] [--rows 20000] [--smoke]

For each candidate set of Spark options (the node's defaults first, then each candidate on
top of them; ``--bare`` leaves out ``node.spark.MICRO_BATCH_DEFAULTS``) a fresh SparkSession
(``local[2]``) runs ``--jobs`` near-empty jobs (one change: the latency a caught-up pipeline
pays per batch) and a few jobs of ``--rows`` insert changes (the per-row cost of a
catch-up). Reports wall p50/p95 per job and the CPU seconds of the whole process tree
(driver, JVM, Python workers) per job and per 100k rows.
The job is the node's own (``SparkRunner.extract_transform`` on a compiled one-pair
pipeline); results go to ``bench/results/sparkjob-*.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench.measure import RESULTS, tree_cpu_s, write_report
from node.changes import ChangeType, RowChange
from node.extract.etl import CompiledPipeline
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


def _changes(n: int) -> list[RowChange]:
    return [RowChange("bench", "items", ChangeType.INSERT, ("id",), None,
                      {"id": i, "name": f"item {i}", "qty": i * 2, "note": "x" * 40})
            for i in range(n)]


def measure(name: str, options: dict[str, str], jobs: int, rows: int,
            bare: bool = False) -> dict[str, Any]:
    if bare:  # Spark's own defaults under the candidate
        options = {**{k: SPARK_DEFAULTS[k] for k, _ in MICRO_BATCH_DEFAULTS}, **options}
    runner = SparkRunner(SparkSettings("local[2]", "512m", tuple(options.items()),
                                       local_max_rows=0))  # every job on Spark
    compiled, one, many = _pipeline(), _changes(1), _changes(rows)
    try:
        for _ in range(10):  # warm: JVM, JIT, Python workers, broadcast
            runner.extract_transform(compiled, one)
        pid = os.getpid()
        walls, cpu_before = [], tree_cpu_s(pid)
        for _ in range(jobs):
            started = time.perf_counter()
            runner.extract_transform(compiled, one)
            walls.append(time.perf_counter() - started)
        empty_cpu = (tree_cpu_s(pid) - cpu_before) / jobs
        big_walls, cpu_before = [], tree_cpu_s(pid)
        for _ in range(3):
            started = time.perf_counter()
            out = runner.extract_transform(compiled, many)
            big_walls.append(time.perf_counter() - started)
            assert len(out) == rows, f"{name}: {len(out)} changes back for {rows}"
        big_cpu = (tree_cpu_s(pid) - cpu_before) / 3
    finally:
        runner.stop()
    walls.sort()
    return {"scenario": name, "options": options,
            "empty_job_p50_ms": round(statistics.median(walls) * 1000, 1),
            "empty_job_p95_ms": round(walls[int(len(walls) * 0.95) - 1] * 1000, 1),
            "empty_job_cpu_ms": round(empty_cpu * 1000, 1),
            f"job_{rows}_rows_ms": round(statistics.median(big_walls) * 1000),
            "cpu_s_per_100k_rows": round(big_cpu / rows * 100_000, 2), "equal": True}


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
