"""setl side by side with what a user would pick instead, in one run on one machine.

    python -m bench.peers [--tables 4] [--table-size 100000] [--seconds 60] [--rate 1000]
                          [--copy-rows 2000000] [--corrupt 30] [--scenarios copy,bulk,delay]
                          [--smoke]

A fresh sandbox: source, setl's target, and two native MariaDB replicas of the same source
(GTID replication, started in the same run): a serial one, as installed, and a parallel one
as a DBA sets it for catch-up (``slave_parallel_threads`` = 4, ``slave_parallel_mode`` =
optimistic: ``shared.sandbox.PARALLEL_REPLICA``); both are measured beside setl in every
scenario that streams (bulk, delay, noisy, catchup), and the report says how each was tuned,
as the servers report it. Scenarios:

- **copy**: a ``--copy-rows`` table copied by setl's ``start: snapshot`` (alone, then with
  sysbench writing 200 tx/s to the same table while it copies) and by ``mydumper | myloader``;
- **bulk**: ``sysbench oltp_write_only prepare`` writes ``--tables`` × ``--table-size`` rows;
  the time until every row is on setl's target and on each replica;
- **delay**: ``sysbench oltp_write_only run`` for ``--seconds``, at ``--rate`` tx/s and at
  full rate, with a heartbeat row every 50 ms: delay p50/p95/p99 on each, and the drain
  time after the load stops.
- **catchup**: setl and the replicas stopped while a backlog is written (``prepare`` of
  ``--tables`` × ``--table-size`` rows, then ``--seconds`` of ``oltp_write_only`` at full rate),
  then started: rows/s of each part, node CPU per 100k rows; with ``--profile`` µs per row by
  stage (py-spy on the node's process tree; ``make bench-profile``).
- **verify**: ``setl verify`` of the copy's table next to ``pt-table-checksum``, then the
  same findings as ``pt-table-sync --print`` on ``--corrupt`` corrupted rows, and
  ``--repair`` (``bench/verify.py``; it runs the copy first);
- **noisy**: a noisy neighbour: ``oltp_write_only`` at full rate on another schema of the
  same source (prepared first, not replicated by setl) while 100 tx/s go to a paired table:
  that table's delay on setl and on the replicas (which replicate everything).

After every scenario ``pt-table-sync --print`` compares each table on source and copy; a
copy that differs is reported as failed, not as a number. Prints a table, writes JSON and a
PNG chart to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pymysql

from bench.catchup import catchup_scenario
from bench.copy import copy_scenario
from bench.measure import (
    RESULTS,
    Profile,
    RssSampler,
    percentile_ms,
    pt_table_sync_differences,
    sysbench,
    time_split,
    tree_cpu_s,
    write_report,
)
from bench.verify import verify_scenario
from shared.model import PipelineParams
from shared.sandbox import PARALLEL_REPLICA, Sandbox
from tests.devcluster import Cluster, Database, wait_for

DB = "sbtest"
NOISY = "sbnoisy"  # the noisy neighbour's schema: on the source, not in setl's channel
BEAT = f"CREATE TABLE {DB}.beat (id BIGINT PRIMARY KEY, created DATETIME(6) NOT NULL)"
# the native replicas measured beside setl: the name their figures carry -> sandbox server
NATIVES = {"native": "replica", "native_parallel": "replica_parallel"}
COPIES = {"setl": "target", **NATIVES}  # every copy measured, setl's first
DEFAULTS = PipelineParams()  # the pipeline as a user gets it, but where a scenario says
LABELS = {"setl": "setl", "native": "native replica (serial)",
          "native_parallel": "native parallel ({slave_parallel_threads} threads, "
                             "{slave_parallel_mode})".format(**PARALLEL_REPLICA)}
COLORS = {"setl": "#3b7dd8", "native": "#999999", "native_parallel": "#555555"}


class Peers:
    """The sandbox, setl (manager + node) and the native replicas of one run."""

    def __init__(self, work: Path, pure: bool = False) -> None:
        """``pure``: setl's node on its pure-Python path (a profile's stages: py-spy cannot
        see into the compiled modules)."""
        self.work = work
        self.box = Sandbox(work / "sandbox")
        self.box.down(purge=True)  # a fresh start: nothing left from an interrupted run
        shutil.rmtree(work / "cluster", ignore_errors=True)  # nor the last run's daemon logs
        self.servers = self.box.up(owner_pid=os.getpid(), replica=True)
        # a node as deployed: Spark started as the node starts, not by the first copy
        self.cluster = Cluster(self.box, work / "cluster", "peers", log_level="debug",
                               spark_start="boot",
                               env={"SETL_PURE_PYTHON": "1"} if pure else None)
        self.source, self.target = (Database(self.box, name) for name in ("source", "target"))
        self.natives = {name: Database(self.box, server) for name, server in NATIVES.items()}
        self.password = self.box.password()

    def port(self, name: str) -> int:
        return self.servers[name].port

    def start_replicas(self) -> None:
        """Every native replica from the source's binlog end now, by GTID."""
        gtid = self.source.rows("SELECT @@gtid_binlog_pos")[0][0]
        for replica in self.natives.values():
            replica.script("STOP SLAVE", "RESET SLAVE ALL", f"SET GLOBAL gtid_slave_pos = '{gtid}'")
            replica.execute(
                "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %s, MASTER_USER = "
                "'setl', MASTER_PASSWORD = %s, MASTER_USE_GTID = slave_pos",
                (self.port("source"), self.password))
            replica.execute("START SLAVE")
        # figures labelled parallel from a replica that is not would be worse than none
        if (found := self.tuning()[LABELS["native_parallel"]]) != PARALLEL_REPLICA:
            raise RuntimeError(f"the parallel replica runs with {found}, not {PARALLEL_REPLICA}")

    def tuning(self) -> dict[str, dict[str, Any]]:
        """How each native replica applies what it receives, as the server says."""
        query = "SELECT " + ", ".join(f"@@{setting}" for setting in PARALLEL_REPLICA)
        return {LABELS[name]: dict(zip(PARALLEL_REPLICA, db.rows(query)[0], strict=True))
                for name, db in self.natives.items()}

    def slave_status(self, name: str = "native") -> dict[str, Any]:
        """SHOW SLAVE STATUS of a native replica (empty: it is not replicating). On that
        replica's own connection: call it for one replica from one thread only."""
        cursor = self.natives[name].conn.cursor()
        cursor.execute("SHOW SLAVE STATUS")
        row = cursor.fetchone()
        return {} if row is None else \
            dict(zip([column[0] for column in cursor.description], row, strict=True))

    def replica_error(self, name: str = "native") -> str:
        """A native replica's replication error, if it stopped on one (not one it retries:
        an I/O thread reconnecting shows its last error while it runs on)."""
        status = self.slave_status(name)
        if not status:
            return f"the {LABELS[name]} is not replicating"
        if "No" not in (status.get("Slave_SQL_Running"), status.get("Slave_IO_Running")):
            return ""
        return str(status.get("Last_SQL_Error") or status.get("Last_IO_Error") or "")

    def start_setl(self, tables: int, batch_size: int = DEFAULTS.batch_size,
                   **params: object) -> None:
        pairs = [{"source": f"{DB}.sbtest[1-{tables}]", "target": f"{DB}.sbtest[1-{tables}]"},
                 {"source": f"{DB}.beat", "target": f"{DB}.beat"}]
        self.cluster.apply([{"name": "bench", "pipelines": [{
            "name": "forward", "source": "source", "target": "target", "ddl_sync": True,
            "batch_size": batch_size, "load_batch_size": 2000, **params, "pairs": pairs}]}])
        self.cluster.set_status("bench", "START")
        self.cluster.wait_running("bench")

    def sysbench(self, *args: str, port: str = "source") -> str:
        return sysbench(self.port(port), self.password, DB, *args)

    def differs(self, copy: str, schema: str, tables: list[str]) -> list[str]:
        """pt-table-sync --print from the source to a copy: the tables that differ."""
        return pt_table_sync_differences(self.password, self.port("source"), self.port(copy),
                                         schema, tables)

    def copies_differ(self, schema: str, tables: list[str], setl: bool = True) -> list[str]:
        """:meth:`differs` on every native replica, and on setl's target with ``setl``."""
        copies = [server for name, server in COPIES.items() if setl or name != "setl"]
        return [f"{copy}: {line}" for copy in copies for line in self.differs(copy, schema,
                                                                                tables)]

    def close(self) -> None:
        self.cluster.stop()
        for db in (self.source, self.target, *self.natives.values()):
            db.close()
        self.box.down(purge=True)


def count(db: Database, tables: list[str]) -> int:
    try:
        return sum(db.rows(f"SELECT COUNT(*) FROM {DB}.{t}")[0][0] for t in tables)
    except pymysql.MySQLError:  # the table is not there yet
        return -1


def bulk_scenario(peers: Peers, tables: int, size: int, node_pid: int) -> dict[str, Any]:
    names = [f"sbtest{i}" for i in range(1, tables + 1)]
    done: dict[str, float] = {}
    failures: list[str] = []
    rows = tables * size

    def watch(name: str, server: str) -> None:
        db, deadline = Database(peers.box, server), time.monotonic() + 1800
        try:
            while count(db, names) != rows:
                error = peers.replica_error(name) if name in NATIVES else ""
                if error or time.monotonic() > deadline:
                    failures.append(f"{name}: {error or f'no {rows} rows after 30 min'}")
                    return
                time.sleep(0.05)
            done[name] = time.monotonic()
        finally:
            db.close()

    cpu_before, started = tree_cpu_s(node_pid), time.monotonic()
    watchers = [threading.Thread(target=watch, args=item) for item in COPIES.items()]
    for watcher in watchers:
        watcher.start()
    peers.sysbench(f"--tables={tables}", f"--table-size={size}", "prepare")
    written = time.monotonic()
    for watcher in watchers:
        watcher.join()
    cpu = tree_cpu_s(node_pid) - cpu_before
    if failures:
        raise RuntimeError(f"bulk scenario: {'; '.join(failures)}")
    bad = peers.copies_differ(DB, names)
    rates = {name: rows / (done[name] - started) for name in COPIES}
    result: dict[str, Any] = {"scenario": f"bulk insert {rows:,} rows ({tables} sysbench tables)",
                              "source_rows_per_s": round(rows / (written - started))}
    for name, rate in rates.items():
        result[f"{name}_rows_per_s"] = None if bad else round(rate)
    for name in NATIVES:
        result[f"ratio_setl_{name}"] = None if bad else round(rates["setl"] / rates[name], 3)
    return {**result, "setl_cpu_s_per_100k_rows": round(cpu / rows * 100_000, 2),
            "equal": not bad, "differences": bad}


def delay_scenario(peers: Peers, tables: int, size: int, seconds: float, rate: int,
                   node_pid: int, db: str = DB, beat_s: float = 0.05,
                   profile: Path | None = None) -> dict[str, Any]:
    """sysbench on schema ``db`` with a heartbeat row every ``beat_s`` in setl's channel
    (``profile``: py-spy on the node meanwhile, its raw stacks written there)."""
    names = [f"sbtest{i}" for i in range(1, tables + 1)]
    delays: dict[str, list[float]] = {name: [] for name in COPIES}
    beats: dict[str, list[tuple[int, float, float]]] = {name: [] for name in COPIES}
    seen_at: dict[str, float] = {}  # when each saw the last heartbeat
    stop = threading.Event()

    def watch(name: str, server: str) -> None:
        reader = Database(peers.box, server)
        while not stop.is_set():
            now = time.time()
            for beat_id, created in reader.rows(f"SELECT id, created FROM {DB}.beat WHERE "
                                                "id > %s ORDER BY id", (last_seen[name],)):
                delays[name].append(now - created.timestamp())
                beats[name].append((beat_id, created.timestamp(), now))
                last_seen[name] = beat_id
                if beat_id >= final:
                    seen_at[name] = time.monotonic()
            time.sleep(0.01)
        reader.close()

    def beat() -> None:
        writer, n = Database(peers.box, "source"), beat_base
        while not stop.is_set():
            n += 1
            writer.execute(f"INSERT INTO {DB}.beat VALUES ({n}, NOW(6))")
            stop.wait(beat_s)
        writer.close()

    beat_base = peers.source.rows(f"SELECT COALESCE(MAX(id), 0) FROM {DB}.beat")[0][0]
    last_seen = dict.fromkeys(COPIES, beat_base)
    final = beat_base + 10**9  # the last heartbeat, after the load stops
    threads = [*(threading.Thread(target=watch, args=item) for item in COPIES.items()),
               threading.Thread(target=beat)]
    for thread in threads:
        thread.start()
    cpu_before, started = tree_cpu_s(node_pid), time.monotonic()
    spy = Profile(node_pid, profile) if profile is not None else None
    out = peers.sysbench(f"--tables={tables}", f"--table-size={size}", f"--time={seconds:.0f}",
                         f"--rate={rate}", f"--threads={2 if rate else 4}", f"--mysql-db={db}",
                         "run")
    peers.source.execute(f"INSERT INTO {DB}.beat VALUES ({final}, NOW(6))")
    ended = time.monotonic()
    if spy is not None:
        spy.stop()
    node_cpu = (tree_cpu_s(node_pid) - cpu_before) / (ended - started)
    wait_for(lambda: len(seen_at) == len(COPIES), 300, "setl and the replicas to drain",
             interval_s=0.01)
    drains = {name: round(at - ended, 2) for name, at in seen_at.items()}
    stop.set()
    for thread in threads:
        thread.join()
    copied = [*names, "beat"] if db == DB else ["beat"]  # setl's target has its channel only
    bad = peers.copies_differ(DB, copied)
    if db != DB:  # the busy schema: on the replicas only
        bad += peers.copies_differ(db, names, setl=False)
    tps = re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", out)
    load = f"{f'{rate} tx/s' if rate else 'full rate'}"
    # each heartbeat's (id, written, seen) on each copy, beside the node's log, to find a tail
    (peers.work / f"beats-{db}-{rate or 'full'}.json").write_text(json.dumps(beats))
    scenario = f"oltp_write_only {seconds:.0f}s at {load}" if db == DB else \
        f"noisy neighbour: oltp_write_only {seconds:.0f}s at {load} on another schema, " \
        f"{1 / beat_s:.0f} tx/s on a paired table"
    result: dict[str, Any] = {"scenario": scenario,
                              "achieved_tx_per_s": float(tps.group(1)) if tps else None,
                              "setl_node_cpu_cores": round(node_cpu, 2)}
    for name, values in delays.items():
        for p in (50, 95, 99):
            result[f"{name}_delay_p{p}_ms"] = None if bad else percentile_ms(values, p)
        result[f"{name}_drain_s"] = drains[name]
    return {**result, "equal": not bad, "differences": bad}


def noisy_scenario(peers: Peers, tables: int, size: int, seconds: float,
                   node_pid: int) -> dict[str, Any]:
    """A busy schema setl does not replicate beside a quiet one it does."""
    for server in (peers.source, *peers.natives.values()):
        server.execute(f"CREATE DATABASE IF NOT EXISTS {NOISY}")
    peers.sysbench(f"--tables={tables}", f"--table-size={size}", f"--mysql-db={NOISY}",
                   "prepare")
    return delay_scenario(peers, tables, size, seconds, 0, node_pid, db=NOISY, beat_s=0.01)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.peers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--table-size", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--copy-rows", type=int, default=2_000_000)
    parser.add_argument("--batch-size", type=int, default=DEFAULTS.batch_size,
                        help="the pipeline's batch_size: the rows of a catch-up's batches "
                        f"(setl's default, {DEFAULTS.batch_size}; runs before 2026-11-28 16:10 "
                        "used 10000)")
    parser.add_argument("--batch-timeout-ms", type=int, default=0,
                        help="the stream scenarios' pipeline's batch_timeout_ms (0: setl's "
                             "default)")
    parser.add_argument("--corrupt", type=int, default=30, help="target rows the verify "
                        "scenario corrupts")
    parser.add_argument("--scenarios", default="copy,verify,bulk,delay,noisy,catchup")
    parser.add_argument("--catchup-alone", action="store_true",
                        help="the catch-up's copies cross the backlog one after the other, "
                             "each with the machine to itself (default: all at once)")
    parser.add_argument("--profile", action="store_true",
                        help="catch-up and delay under py-spy: CPU µs per row by stage, raw stacks "
                        "beside the run's sandbox (the node runs its pure-Python path: py-spy "
                        "cannot see into the compiled modules)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for the test suite")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where reports go")
    parser.add_argument("--work", type=Path, default=RESULTS.parent / ".work" / "peers",
                        help="the run's sandbox and daemons (deleted at the end)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.tables, args.table_size, args.seconds, args.rate, args.copy_rows = 2, 500, 2, 50, 2000
        args.corrupt = 6
    scenarios = args.scenarios.split(",")
    peers = Peers(args.work, pure=args.profile)
    results: list[dict[str, Any]] = []
    try:
        peers.cluster.start_manager()
        node = peers.cluster.start_node(1)
        sampler = RssSampler(node.pid)
        sampler.start()
        if "copy" in scenarios or "verify" in scenarios:
            results += copy_scenario(peers, args.copy_rows, node.pid, setl="copy" in scenarios,
                                     profile=args.work / "copy-profile.txt" if args.profile
                                     else None)
        if "verify" in scenarios:  # on the copy mydumper|myloader made
            results.append(verify_scenario(peers, args.copy_rows, args.corrupt))
        for db in (peers.source, *peers.natives.values()):  # the replicas start from here on
            db.execute(f"CREATE DATABASE IF NOT EXISTS {DB}")
        peers.start_replicas()
        peers.start_setl(args.tables, batch_size=args.batch_size,
                         **({"batch_timeout_ms": args.batch_timeout_ms}
                            if args.batch_timeout_ms else {}))
        peers.source.execute(BEAT)
        if "bulk" in scenarios or "delay" in scenarios:
            results.append(bulk_scenario(peers, args.tables, args.table_size, node.pid))
        if "delay" in scenarios:
            for rate in (args.rate, 0):
                results.append(delay_scenario(
                    peers, args.tables, args.table_size, args.seconds, rate, node.pid,
                    profile=args.work / f"delay-{rate or 'full'}-profile.txt" if args.profile
                    else None))
        if "noisy" in scenarios:
            results.append(noisy_scenario(peers, args.tables, args.table_size, args.seconds,
                                          node.pid))
        if "catchup" in scenarios:
            results.append(catchup_scenario(
                peers, args.tables, args.table_size, args.seconds, node.pid,
                args.work / "catchup-profile.txt" if args.profile else None,
                alone=args.catchup_alone, batch_size=args.batch_size))
        sampler.done.set()
        # how each native peer was tuned, as its server says (the serial one has MariaDB's
        # defaults: 0 threads, which leaves the mode unused)
        tuning = peers.tuning()
        summary = {"node_peak_rss_mb": round(sampler.peak_kb / 1024),
                   "per_batch_ms": time_split(node.output()), "native_tuning": tuning}
    finally:
        peers.close()
    for label, settings in tuning.items():
        print(f"{label}: {', '.join(f'{key} = {value}' for key, value in settings.items())}")
    report, path = write_report(args.results, "peers", args.smoke, vars(args), results, summary)
    from bench.peerschart import chart  # (it reads this module's names)

    chart(report, path.with_suffix(".png"))
    return 0 if all(result["equal"] for result in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
