"""Streaming benchmarks on a fresh sandbox: bulk-insert throughput, delay under a steady
transaction rate, node peak RSS (Python + Spark JVM + workers) and where the time goes.

    python -m bench.stream [--rows 200000] [--rate 1000] [--seconds 30] [--scenarios bulk,steady]
                           [--smoke]

Prints a table, writes JSON to bench/results/. Correctness is checked after each scenario
(source and target compared row by row); a scenario whose copy differs is reported as
failed, not as a number.
"""

from __future__ import annotations

import argparse
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from bench.measure import RESULTS, RssSampler, percentile_ms, time_split, write_report
from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_for

BULK = ("CREATE TABLE `{schema}`.sbtest (id INT PRIMARY KEY, k INT NOT NULL, "
        "c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL)")
BEAT = ("CREATE TABLE `{schema}`.beat (id BIGINT PRIMARY KEY, created DATETIME(6) NOT NULL, "
        "payload VARCHAR(100))")


def equal(source: Database, target: Database, schema: str, table: str) -> bool:
    return source.rows(f"CHECKSUM TABLE `{schema}`.`{table}` EXTENDED") [0][1] == \
        target.rows(f"CHECKSUM TABLE `{schema}`.`{table}` EXTENDED")[0][1]


def bulk_insert(cluster: Cluster, source: Database, target: Database, rows: int,
                batch_size: int) -> dict[str, Any]:
    schema = make_schema(source, target, BULK)
    name = f"bulk{batch_size}"
    cluster.apply([one_way(name, schema, ["sbtest"], batch_size=batch_size,
                           load_batch_size=2000)])
    cluster.set_status(name, "START")
    cluster.wait_running(name)
    started = time.monotonic()
    chunk = 1000
    for first in range(0, rows, chunk):  # 1,000-row INSERT statements, one transaction each
        values = ",".join(f"({i},{i % 1000},'{'c' * 119}{i % 10}','{'p' * 59}')"
                          for i in range(first, min(first + chunk, rows)))
        source.execute(f"INSERT INTO `{schema}`.sbtest VALUES {values}")
    written = time.monotonic()
    wait_for(lambda: target.rows(f"SELECT COUNT(*) FROM `{schema}`.sbtest")[0][0] == rows,
             600, "all rows on the target", interval_s=0.05)
    loaded = time.monotonic()
    cluster.set_status(name, "STOP")
    ok = equal(source, target, schema, "sbtest")
    return {"scenario": f"bulk insert (batch_size {batch_size})", "rows": rows,
            "write_s": round(written - started, 2), "total_s": round(loaded - started, 2),
            "rows_per_s": round(rows / (loaded - started)) if ok else None,
            "source_rows_per_s": round(rows / (written - started)), "equal": ok}


def steady_delay(cluster: Cluster, source: Database, target: Database, rate: int,
                 seconds: float) -> dict[str, Any]:
    schema = make_schema(source, target, BEAT)
    cluster.apply([one_way("steady", schema, ["beat"])])
    cluster.set_status("steady", "START")
    cluster.wait_running("steady")
    delays: list[float] = []
    stop = threading.Event()

    def watch() -> None:
        reader, last = Database(cluster.sandbox, "target"), 0
        while not stop.is_set():
            now = time.time()
            for row_id, created in reader.rows(f"SELECT id, created FROM `{schema}`.beat "
                                               "WHERE id > %s ORDER BY id", (last,)):
                delays.append(now - created.timestamp())
                last = row_id
            time.sleep(0.02)  # adds at most 20 ms to a measured delay
        reader.close()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    interval, started, n = 1.0 / rate, time.monotonic(), 0
    while time.monotonic() - started < seconds:
        n += 1
        source.execute(f"INSERT INTO `{schema}`.beat VALUES ({n}, NOW(6), 'x')")
        lag = started + n * interval - time.monotonic()
        if lag > 0:
            time.sleep(lag)
    achieved = n / (time.monotonic() - started)
    drain_start = time.monotonic()
    wait_for(lambda: len(delays) >= n, 120, "the last heartbeat", interval_s=0.01)
    drain_s = time.monotonic() - drain_start
    stop.set()
    watcher.join()
    cluster.set_status("steady", "STOP")
    ok = equal(source, target, schema, "beat")
    return {"scenario": f"steady {rate} tx/s for {seconds:.0f}s", "transactions": n,
            "target_rows": len(delays), "achieved_tx_per_s": round(achieved),
            **{f"delay_p{p}_ms": percentile_ms(delays, p) if ok else None for p in (50, 95, 99)},
            "delay_max_ms": percentile_ms(delays, 100), "drain_s": round(drain_s, 2),
            "equal": ok}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.stream", description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--scenarios", default="bulk,steady", help="comma-separated subset")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for the test suite")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where reports go")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rows, args.rate, args.seconds = 5000, 100, 3
    work = RESULTS.parent / ".work"
    box = Sandbox(work / "sandbox")
    box.up(owner_pid=os.getpid())
    shutil.rmtree(work / "cluster", ignore_errors=True)  # the per-batch split reads its log
    cluster = Cluster(box, work / "cluster", "bench", log_level="debug")
    source, target = Database(box, "source"), Database(box, "target")
    results: list[dict[str, Any]] = []
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        sampler = RssSampler(node.pid)
        sampler.start()
        bulk_insert(cluster, source, target, 5000, 1000)  # warm-up: JVM, Python workers
        scenarios = args.scenarios.split(",")
        if "bulk" in scenarios:
            for batch_size in (2000, 10000):
                results.append(bulk_insert(cluster, source, target, args.rows, batch_size))
        if "steady" in scenarios:
            results.append(steady_delay(cluster, source, target, args.rate, args.seconds))
        sampler.done.set()
        summary = {"node_peak_rss_mb": round(sampler.peak_kb / 1024),
                   "per_batch_ms": time_split(node.output())}
    finally:
        cluster.stop()
        source.close()
        target.close()
        box.down(purge=True)
    write_report(args.results, "stream", args.smoke, vars(args), results, summary)
    return 0 if all(result["equal"] for result in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
