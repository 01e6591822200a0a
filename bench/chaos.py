"""Chaos soak: a channel under load on two candidate nodes while faults hit every part.

``python -m bench.chaos [--minutes M] [--every S] [--seed N] [--faults kind,kind]``
(``make chaos``) starts its own sandbox (source, target, ZooKeeper), a manager and two nodes
(both candidates for the pipeline), and two workloads on the source:

- **bank**: transfers between 100 accounts, each one source transaction over two tables
  (both accounts' balance and version, and a journal row);
- **shapes**: a keyless table with duplicate rows (``kl``: two equal rows an insert, one of
  several equal rows changed or deleted, a savepoint rolled back after the insert) and a
  unique key whose values are swapped through a free value in one transaction (``sl``): a
  replayed insert there is a duplicate row, a replayed swap a conflict;
- **sysbench** ``oltp_write_only`` on two tables at a modest rate.

A fault of a random kind comes every ``--every`` seconds, once the previous one has healed:

- ``kill_owner``: kill -9 of the node that runs the pipeline (the other takes over; the
  killed one is started again afterwards);
- ``stop_owner``: SIGSTOP of that node for twice the ZooKeeper session, then SIGCONT (the
  other takes over; fencing must keep the stale owner from writing);
- ``restart_target``: kill -9 of the target MariaDB, started again on its port;
- ``restart_zookeeper``: kill -9 of ZooKeeper, started again with its data;
- ``kill_binlog``: ``KILL`` of the binlog dump connection on the source;
- ``kill_target_connections``: ``KILL`` of every setl connection on the target.

While it runs, a watcher reads the target many times a second, each time in one consistent
snapshot, and checks the promises a reader relies on: the balances always sum to the
total and the versions to twice the journal's rows (a reader never sees part of a source
transaction), the swapped slots are always a permutation of 1..N, and no account's version
ever goes down (a row never goes back). A fault has
healed when every journal row written on the source before it is on the target (and the
manager, through ZooKeeper, then says which node runs the pipeline); that time is
reported (for the node faults it is the takeover time). At the end the workloads stop,
source and target are compared table by table as multisets (rows on each side, per table)
and the keyed tables with ``pt-table-sync --print``, and a report (faults by kind, heal
times p50/max, snapshots checked, violations, divergences, tables) is
printed and written to ``bench/results/chaos-<time>.json``. Exit code 0 only when there is
no violation and no divergence and every fault healed.

With ``--copies`` (bench/chaoscopies.py) copies race the faults too: every ``--copy-every``
seconds or so a ``setl snapshot`` of one of the tables (the keyless ``kl`` included: its copy
must be refused, failed with the reason) or a free-door backfill (``I``/``U``/``D`` requests
for random keys of a keyed table in the source's ``retl.retl_buffer``), waited for by no
one. The pipeline copies in chunks of 10 rows, two a window (``snapshot_chunk_size``,
``snapshot_parallelism``), so that a copy is many windows and faults come while it runs.
The watcher checks the same promises, and only those: the README ("whole transactions ... in
every phase — ... backfill, snapshot", "a row never goes back") and
docs/free-door-and-snapshots.md promise, during a copy too, whole source transactions (the
sums and the permutation of the slots; a ``D`` request deletes and writes the row again in
one transaction) and that no row goes back (the versions). They promise nothing of a row not
copied yet (it is "simply not there yet"), so the watcher counts no rows. At the end every
copy asked must have ended (each keyed table's ``done``) and the source's buffer and pending
requests be empty, under the load and the watcher, before the multiset comparison; the
report adds the copies by table and state and the requests written. Without ``--copies``
the soak is the one it was (comparable with older runs). The nodes' and the manager's logs
are copied to ``<results>/chaos-<time>-logs/`` unless the run is a smoke.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pymysql

from bench.chaoscopies import CHUNK_ROWS, PARALLEL, Copies
from bench.chaosload import ACCOUNTS, DB, OPENING, SLOTS, Load
from bench.measure import RESULTS, pt_table_sync_differences, write_json
from shared.sandbox import Sandbox, pid_alive
from tests.devcluster import SESSION_TIMEOUT_S, Cluster, Database, wait_for

CHANNEL = "chaos"
TABLES = ["accounts", "journal", "kl", "sl", "sbtest1", "sbtest2"]
KEYLESS = ["kl"]  # pt-table-sync needs a key: compared as multisets only
FAULTS = ("kill_owner", "stop_owner", "restart_target", "restart_zookeeper", "kill_binlog",
          "kill_target_connections")
HEAL_LIMIT_S = 180.0  # a fault not healed by then fails the soak


class Soak:
    def __init__(self, work: Path, seed: int, log: Any = print,
                 spark_start: str = "boot", copy_every_s: float = 0.0) -> None:
        self.work, self.rng, self.log = work, random.Random(seed), log
        self.box = Sandbox(work / "sandbox")
        self.servers = self.box.up(owner_pid=os.getpid())
        self.box.trust_secret()
        self.password = self.box.password()
        # nodes as in production (Spark warm from boot): on_demand made every takeover's
        # first big batch wait for Spark to start, which the heal figures then measured
        self.spark_start = spark_start
        self.cluster = Cluster(self.box, work / "cluster", "chaos", spark_start=spark_start)
        self.stop = threading.Event()
        self.load = Load(self.box, self.stop, self.rng)
        self.threads: list[threading.Thread] = []
        self.sysbench: subprocess.Popen[bytes] | None = None
        self.copies = (Copies(self.box, self.cluster, CHANNEL, threading.Event(), self.rng,
                              copy_every_s) if copy_every_s else None)
        self.copied: dict[str, Any] = {}

    # -- set-up -------------------------------------------------------------------------
    def prepare(self) -> None:
        for server in ("source", "target"):
            db = Database(self.box, server)
            db.script(f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}",
                      f"CREATE TABLE {DB}.accounts (id INT PRIMARY KEY, balance BIGINT NOT "
                      "NULL, version BIGINT NOT NULL)",
                      f"CREATE TABLE {DB}.journal (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
                      "debit INT NOT NULL, credit INT NOT NULL, amount INT NOT NULL)",
                      f"CREATE TABLE {DB}.kl (a INT, b VARCHAR(20))",
                      f"CREATE TABLE {DB}.sl (id INT PRIMARY KEY, slot INT NOT NULL, "
                      "UNIQUE KEY u (slot))")
            db.execute(f"INSERT INTO {DB}.accounts VALUES "
                       + ", ".join(f"({i}, {OPENING}, 0)" for i in range(ACCOUNTS)))
            db.execute(f"INSERT INTO {DB}.sl VALUES "
                       + ", ".join(f"({i}, {i})" for i in range(1, SLOTS + 1)))
            db.close()
        self.cluster.start_manager()
        self.cluster.start_node(1)
        self.cluster.start_node(2)
        self.cluster.apply([{"name": CHANNEL, "pipelines": [{
            "name": "forward", "source": "source", "target": "target", "batch_timeout_ms": 50,
            "ddl_sync": True,  # sysbench's tables are made on the source and replicated
            **({"snapshot_chunk_size": CHUNK_ROWS, "snapshot_parallelism": PARALLEL}
               if self.copies else {}),
            "pairs": [{"source": f"{DB}.{t}", "target": f"{DB}.{t}"} for t in TABLES]}]}])
        self.cluster.set_status(CHANNEL, "START")
        self.cluster.wait_running(CHANNEL)
        self._sysbench("--tables=2", "--table-size=2000", "prepare", port="source")

    def _sysbench(self, *args: str, port: str) -> None:
        done = subprocess.run(self._sysbench_command(*args, port=port), capture_output=True,
                              text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"sysbench {' '.join(args)}: {done.stderr or done.stdout}")

    def _sysbench_command(self, *args: str, port: str) -> list[str]:
        return ["sysbench", "oltp_write_only", "--db-driver=mysql", "--mysql-host=127.0.0.1",
                f"--mysql-port={self.servers[port].port}", "--mysql-user=setl",
                f"--mysql-password={self.password}", f"--mysql-db={DB}", *args]

    # -- workloads and watcher ----------------------------------------------------------
    def start_workloads(self, seconds: float) -> None:
        self.sysbench = subprocess.Popen(
            self._sysbench_command("--tables=2", "--table-size=2000", "--threads=2",
                                   "--rate=40", f"--time={int(seconds) + 600}", "run",
                                   port="source"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for target in (self.load.bank, self.load.shapes, self.load.watcher):
            thread = threading.Thread(target=target, daemon=True, name=target.__name__)
            thread.start()
            self.threads.append(thread)
        if self.copies is not None:
            self.copier = threading.Thread(target=self.copies.copier, daemon=True,
                                           name="copier")
            self.copier.start()

    # -- faults -------------------------------------------------------------------------
    def owner(self) -> int:
        def found() -> int:
            state = self.cluster.pipeline_state(CHANNEL)
            return state.owner_node if state.state == "running" else 0
        return wait_for(found, HEAL_LIMIT_S, "a node running the pipeline")

    def inject(self, kind: str) -> str:
        if kind == "kill_owner":
            owner = self.owner()
            self.cluster.nodes[owner].kill()
            return f"node {owner}"
        if kind == "stop_owner":
            owner = self.owner()
            pid = self.cluster.nodes[owner].pid
            os.kill(pid, signal.SIGSTOP)
            time.sleep(2 * SESSION_TIMEOUT_S + 1)  # past the session: the other takes over
            os.kill(pid, signal.SIGCONT)
            return f"node {owner} for {2 * SESSION_TIMEOUT_S + 1} s"
        if kind in ("restart_target", "restart_zookeeper"):
            name = kind.removeprefix("restart_")
            pid = self.box.servers()[name].pid
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: not pid_alive(pid), 30, f"{name} to die")
            self.box.up()
            return name
        if kind == "kill_binlog":
            killed = self._kill("source", "command LIKE 'Binlog Dump%'")
            return f"{killed} dump connection(s)"
        if kind == "kill_target_connections":
            return f"{self._kill('target', 'user = ' + repr('setl'))} connection(s)"
        raise ValueError(f"unknown fault {kind}; choose from {', '.join(FAULTS)}")

    def _kill(self, server: str, where: str) -> int:
        db = Database(self.box, server)
        try:
            ids = [row[0] for row in db.rows(
                "SELECT id FROM information_schema.processlist WHERE " + where +
                " AND id <> CONNECTION_ID()")]
            for thread in ids:
                try:
                    db.execute(f"KILL {int(thread)}")
                except pymysql.MySQLError:
                    pass  # it ended by itself
            return len(ids)
        finally:
            db.close()

    def heal(self, started: float) -> float:
        """Seconds from ``started`` until every journal row the source had then (read now,
        right after the fault) is on the target."""
        source = Database(self.box, "source")
        try:
            wanted = int(source.rows(f"SELECT COALESCE(MAX(id), 0) FROM {DB}.journal")[0][0])
        finally:
            source.close()

        def arrived() -> bool:
            target = Database(self.box, "target")
            try:
                return int(target.rows(f"SELECT COALESCE(MAX(id), 0) FROM {DB}.journal")[0][0]
                           ) >= wanted
            finally:
                target.close()
        wait_for(arrived, HEAL_LIMIT_S, f"journal row {wanted} on the target", 0.05)
        healed = time.monotonic() - started
        # and ZooKeeper answers (through the manager): the stream loads without it, so the
        # journal alone passed a ZooKeeper that died after its restart (its copies stalled)
        self.owner()
        return healed

    def restart_dead_nodes(self) -> None:
        for node_id, daemon in list(self.cluster.nodes.items()):
            if not daemon.alive():
                self.cluster.start_node(node_id)

    # -- the end ------------------------------------------------------------------------
    def finish(self) -> tuple[list[str], int, dict[str, dict[str, Any]]]:
        """Stop the workloads; return the tables that differ, the rows compared and each
        table's rows on both sides (compared as multisets: duplicates count). The copies
        asked end first, under the load and the watcher."""
        if self.copies is not None:
            self.copies.stop.set()
            self.copier.join(120)
            self.copied = self.copies.settle(2 * HEAL_LIMIT_S)
        if self.sysbench is not None:
            self.sysbench.terminate()
            self.sysbench.wait(30)
        self.stop.set()
        for thread in self.threads:
            thread.join(60)
        source, target = Database(self.box, "source"), Database(self.box, "target")
        try:
            def equal() -> bool:
                return all(Counter(source.table(DB, t)) == Counter(target.table(DB, t))
                           for t in TABLES)
            try:
                wait_for(equal, HEAL_LIMIT_S, "source and target equal", 0.5)
            except AssertionError:
                pass  # reported below, table by table
            tables: dict[str, dict[str, Any]] = {}
            for t in TABLES:
                src, dst = Counter(source.table(DB, t)), Counter(target.table(DB, t))
                tables[t] = {"source_rows": src.total(), "target_rows": dst.total(),
                             "only_source": (src - dst).total(),
                             "only_target": (dst - src).total(), "equal": src == dst}
            rows = sum(table["source_rows"] for table in tables.values())
            differ = [t for t, table in tables.items() if not table["equal"]]
        finally:
            source.close()
            target.close()
        ports = {name: info.port for name, info in self.box.servers().items()}
        differ += pt_table_sync_differences(self.password, ports["source"], ports["target"],
                                            DB, [t for t in TABLES if t not in KEYLESS])
        return differ, rows, tables

    def keep_logs(self, results: Path, stamp: str) -> Path:
        """The nodes' and the manager's logs copied to ``results/chaos-<stamp>-logs``."""
        kept = results / f"chaos-{stamp}-logs"
        kept.mkdir(parents=True, exist_ok=True)
        for log in (self.work / "cluster").glob("*.log"):
            shutil.copy2(log, kept / log.name)
        return kept

    def close(self) -> None:
        self.stop.set()
        if self.copies is not None:
            self.copies.stop.set()
        if self.sysbench is not None and self.sysbench.poll() is None:
            self.sysbench.kill()
        self.cluster.stop()
        self.box.down(purge=True)


def soak(minutes: float, every_s: float, seed: int, faults: list[str], work: Path,
         results: Path = RESULTS, smoke: bool = False, rounds: int = 0,
         spark_start: str = "boot", copy_every_s: float = 0.0) -> dict[str, Any]:
    run = Soak(work, seed, spark_start=spark_start, copy_every_s=copy_every_s)
    began = time.monotonic()
    done: list[dict[str, Any]] = []
    failure = ""
    try:
        run.prepare()
        run.start_workloads(minutes * 60)
        if smoke and run.copies is not None:  # one copy of each kind at once, then faults
            run.copies.one("snapshot", "sbtest1")
            run.copies.one("snapshot", "kl")
            run.copies.one("backfill", "accounts")
        deadline = time.monotonic() + minutes * 60
        order = list(faults)
        while time.monotonic() < deadline or rounds:
            run.stop.wait(every_s * run.rng.uniform(0.5, 1.5))
            if not order:
                if rounds and len(done) >= rounds * len(faults):
                    break
                order = list(faults)
            kind = order.pop(run.rng.randrange(len(order)))  # every kind before a repeat
            started = time.monotonic()
            what = run.inject(kind)
            try:
                healed = run.heal(started)
            except AssertionError as exc:
                failure = f"{kind} ({what}) did not heal: {exc}"
                done.append({"kind": kind, "what": what, "healed_s": None})
                break
            run.restart_dead_nodes()
            done.append({"kind": kind, "what": what, "healed_s": round(healed, 2)})
            watch = run.load.watch
            print(f"fault {len(done)}: {kind} ({what}) healed in {healed:.1f} s; "
                  f"{watch.snapshots} snapshots, {len(watch.violations)} violations", flush=True)
        differ, rows, tables = run.finish()
    finally:
        if not smoke:
            print(f"logs kept in {run.keep_logs(results, time.strftime('%Y%m%d-%H%M%S'))}",
                  flush=True)
        run.close()
    return report(done, run, differ, rows, tables, failure, time.monotonic() - began, minutes,
                  seed, results, smoke, rounds)


def report(done: list[dict[str, Any]], run: Soak, differ: list[str], rows: int,
           tables: dict[str, dict[str, Any]], failure: str, elapsed_s: float,
           minutes: float, seed: int, results: Path, smoke: bool, rounds: int
           ) -> dict[str, Any]:
    watch = run.load.watch
    by_kind: dict[str, list[float]] = {}
    for fault in done:
        by_kind.setdefault(fault["kind"], []).append(fault["healed_s"])
    takeovers = [f["healed_s"] for f in done
                 if f["kind"] in ("kill_owner", "stop_owner") and f["healed_s"] is not None]
    result = {
        "minutes": minutes, "seed": seed, "rounds": rounds, "elapsed_s": round(elapsed_s, 1),
        "spark_start": run.spark_start,
        "faults": dict(Counter(f["kind"] for f in done)),
        "heal_s": {kind: {"p50": round(statistics.median(v), 2), "max": max(v)}
                   for kind, times in by_kind.items()
                   if (v := [t for t in times if t is not None])},
        "takeover_s": {"p50": round(statistics.median(takeovers), 2),
                       "max": max(takeovers)} if takeovers else {},
        "transfers": run.load.transfers, "snapshots_checked": watch.snapshots,
        "snapshot_read_errors": watch.errors, "rows_compared": rows,
        "violations": watch.violations[:20], "violation_count": len(watch.violations),
        "divergences": differ, "tables": tables, "failure": failure, "log": done,
        "watcher_stopped": watch.stopped,
        "ok": not failure and not differ and not watch.violations and not watch.stopped
        and not run.copied.get("failures"),
    }
    if run.copies is not None:
        result["copies"] = run.copied
    _, path = write_json(results, "chaos", smoke, result)
    print(f"faults {result['faults']}; heal p50/max by kind {result['heal_s']}; takeover "
          f"{result['takeover_s']}; {run.load.transfers} transfers, {watch.snapshots} "
          f"snapshots checked, {len(watch.violations)} violations, "
          f"{len(differ)} divergences over {rows} rows{'; ' + failure if failure else ''}")
    if run.copies is not None:
        copied = run.copied
        print(f"copies: snapshots {copied['copies_by_state']}, {copied['rows_copied']} rows "
              f"copied; {copied['backfills']} backfills {copied['requests']}; "
              f"{copied['ask_errors']} asks failed (asked again)")
        for line in copied["failures"]:
            print(f"  {line}")
    for name, table in tables.items():
        print(f"  {name}: source {table['source_rows']} rows, target {table['target_rows']}, "
              f"only source {table['only_source']}, only target {table['only_target']}")
    for line in [watch.stopped] * bool(watch.stopped) + watch.violations[:5] + differ:
        print(f"  {line}")
    print(f"written to {path}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--every", type=float, default=8.0, help="seconds between faults")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--faults", default=",".join(FAULTS),
                        help=f"kinds to inject, comma-separated (default all: {FAULTS})")
    parser.add_argument("--rounds", type=int, default=0,
                        help="inject every kind this many times, then stop (instead of "
                             "--minutes)")
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help="where the JSON report goes (default bench/results)")
    parser.add_argument("--smoke", action="store_true",
                        help="write the result as chaos-smoke.json (the test's short run)")
    parser.add_argument("--spark-start", choices=("boot", "on_demand"), default="boot",
                        help="the nodes' spark.start (default boot, the product's default)")
    parser.add_argument("--copies", action="store_true",
                        help="race copies against the faults: a snapshot or a free-door "
                             "backfill every --copy-every seconds or so")
    parser.add_argument("--copy-every", type=float, default=20.0,
                        help="seconds between copies with --copies (default 20)")
    args = parser.parse_args(argv)
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = [f for f in faults if f not in FAULTS]
    if unknown or not faults:
        parser.error(f"unknown fault kind(s) {unknown}; choose from {', '.join(FAULTS)}")
    with tempfile.TemporaryDirectory(prefix="setl-chaos-") as work:
        result = soak(args.minutes, args.every, args.seed, faults, Path(work), args.results,
                      args.smoke, args.rounds, args.spark_start,
                      args.copy_every if args.copies else 0.0)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
