"""The subscription benchmark: a sysbench backlog (prepare, then oltp_write_only) delivered
through a subscription to ``setl subscribe -o json`` (into a file) and to the Python client
(``manager.subscriber``, each change's values decoded), each alone; the anchor on this
machine is python-mysql-replication's ``BinLogStreamReader`` reading the same binlog
stretch with its rows decoded (what a user would script instead). Then a stream at
``--rate`` tx/s read by the Python client: delay p50/p99 from a beat row's commit on the
source to the client holding it. A figure counts only when the reader's copy (every change
applied to the tables' rows) equals the source at the end.

    python -m bench.subscribe [--tables 4 --table-size 100000 --seconds 30 --stream-seconds 60]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.lake import BEAT, DB
from bench.measure import backlog_arguments, sysbench, tree_cpu_s, write_report
from manager.subscribecli import row
from manager.subscriber import Subscriber
from shared import gtid
from shared.model import BinlogPosition
from shared.rpc import manager_pb2
from shared.sandbox import Sandbox
from tests.devcluster import BIN, Cluster, Database, wait_for

COLUMNS = ("id", "k", "c", "pad")
State = dict[tuple[str, int], tuple[Any, ...]]


class Bench:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.box = Sandbox(work / "sandbox")
        self.box.down(purge=True)
        self.servers = self.box.up(owner_pid=os.getpid())
        self.cluster = Cluster(self.box, work / "cluster", "subscribe", spark_start="boot")
        self.source = Database(self.box, "source")
        self.password = self.box.password()

    def sources(self, feeds: list[str]) -> list[dict[str, Any]]:
        return [{"name": "source", "host": "127.0.0.1", "port": self.servers["source"].port,
                 "user": "setl", "password": f"file:{self.box.secret_file}"},
                *({"name": f"feed-{name}", "type": "subscription"} for name in feeds)]

    def channel(self, name: str, tables: int, start: BinlogPosition | None) -> dict[str, Any]:
        names = [f"sbtest{i}" for i in range(1, tables + 1)] + ["beat"]
        return {"name": name, "pipelines": [{
            "name": "forward", "source": "source", "target": f"feed-{name}",
            "batch_size": 10000, "parallelism": 5,
            **({"start": {"file": start.file, "pos": start.pos}} if start else {}),
            "pairs": [{"source": f"{DB}.{t}", "target": f"{DB}.{t}"} for t in names]}]}

    def end(self) -> BinlogPosition:
        file, pos = self.source.rows("SHOW MASTER STATUS")[0][:2]
        return BinlogPosition(str(file), int(pos))

    def acked(self, name: str) -> BinlogPosition:
        answer = self.cluster.call("Positions", manager_pb2.PositionsRequest(channel=name))
        found = answer.pipelines[0].targets[0].position
        return BinlogPosition(found.file, found.pos)

    def rows(self, tables: int) -> State:
        state: State = {}
        for i in range(1, tables + 1):
            for found in self.source.rows(f"SELECT {', '.join(COLUMNS)} FROM {DB}.sbtest{i}"):
                state[(f"sbtest{i}", found[0])] = tuple(found)
        return state

    def close(self) -> None:
        self.cluster.stop()
        self.source.close()
        self.box.down(purge=True)


def apply(state: State, txn: dict[str, Any]) -> int:
    """A transaction (as ``setl subscribe -o json`` prints it) applied; its changes."""
    changes = txn.get("changes", [])
    for change in changes:
        if not change["table"].startswith("sbtest"):
            continue
        if change["op"] in ("U", "D"):
            state.pop((change["table"], change["before"]["id"]), None)
        if change["op"] in ("I", "U"):
            after = change["after"]
            state[(change["table"], after["id"])] = tuple(after[c] for c in COLUMNS)
    return len(changes)


def equal(bench: Bench, state: State, tables: int) -> list[str]:
    return [] if state == bench.rows(tables) else ["the reader's copy differs from the source"]


def cli(bench: Bench, name: str, end: BinlogPosition, tables: int,
        manager_pid: int, node_pid: int) -> dict[str, Any]:
    """``setl subscribe -o json`` into a file until the subscription acknowledged ``end``."""
    out = bench.work / f"{name}.jsonl"
    cpu = tree_cpu_s(node_pid) + tree_cpu_s(manager_pid)
    started = time.monotonic()
    bench.cluster.set_status(name, "START")
    with out.open("w") as sink:
        reader = subprocess.Popen([str(BIN / "setl"), "--manager", bench.cluster.manager_address,
                                   "subscribe", name, "-o", "json"], stdout=sink,
                                  stderr=subprocess.DEVNULL)
        wait_for(lambda: gtid.compare(bench.acked(name), end) >= 0, 3600,
                 f"{name} read to the end")
        seconds = time.monotonic() - started
        reader_cpu = tree_cpu_s(reader.pid)
        reader.terminate()
        reader.wait(30)
    cpu = tree_cpu_s(node_pid) + tree_cpu_s(manager_pid) - cpu
    bench.cluster.set_status(name, "STOP")
    state: State = {}
    changes = 0
    with out.open() as lines:
        for line in lines:
            changes += apply(state, json.loads(line))
    return {"changes": changes, "seconds": round(seconds, 1),
            "changes_per_s": round(changes / seconds), "reader_cpu_s": round(reader_cpu, 1),
            "setl_cpu_s_per_100k": round(cpu / changes * 100_000, 2),
            "_state": state}


def client(bench: Bench, name: str, end: BinlogPosition, manager_pid: int,
           node_pid: int) -> dict[str, Any]:
    """The Python client reading (each value decoded) until it holds ``end``."""
    state: State = {}
    changes = 0
    cpu = tree_cpu_s(node_pid) + tree_cpu_s(manager_pid)
    own = time.process_time()
    started = time.monotonic()
    bench.cluster.set_status(name, "START")
    with Subscriber(name, managers=bench.cluster.manager_address) as feed:
        for batch in feed:
            for txn in batch.transactions:
                for change in txn.changes:
                    changes += 1
                    if not change.table.startswith("sbtest"):
                        continue
                    if change.op in ("U", "D"):
                        state.pop((change.table, row(change.before)["id"]), None)
                    if change.op in ("I", "U"):
                        after = row(change.after)
                        state[(change.table, after["id"])] = tuple(after[c] for c in COLUMNS)
            feed.ack(batch)
            if gtid.compare(BinlogPosition(batch.end.file, batch.end.pos), end) >= 0:
                break
    seconds = time.monotonic() - started
    own = time.process_time() - own
    cpu = tree_cpu_s(node_pid) + tree_cpu_s(manager_pid) - cpu
    bench.cluster.set_status(name, "STOP")
    return {"changes": changes, "seconds": round(seconds, 1),
            "changes_per_s": round(changes / seconds), "reader_cpu_s": round(own, 1),
            "setl_cpu_s_per_100k": round(cpu / changes * 100_000, 2), "_state": state}


def anchor(bench: Bench, start: BinlogPosition, end: BinlogPosition) -> dict[str, Any]:
    """python-mysql-replication's BinLogStreamReader over the same stretch, rows decoded."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    settings = {"host": "127.0.0.1", "port": bench.servers["source"].port, "user": "setl",
                "passwd": bench.password}
    stream = BinLogStreamReader(connection_settings=settings, server_id=990_001,
                                log_file=start.file, log_pos=start.pos, resume_stream=True,
                                blocking=False, only_schemas=[DB],
                                only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
    rows = 0
    own = time.process_time()
    started = time.monotonic()
    try:
        for event in stream:
            for found in event.rows:  # decoded, as a consumer would use them
                rows += 1 if found else 0
            if gtid.compare(BinlogPosition(stream.log_file, stream.log_pos), end) >= 0:
                break
    finally:
        stream.close()
    seconds = time.monotonic() - started
    return {"changes": rows, "seconds": round(seconds, 1), "changes_per_s": round(rows / seconds),
            "reader_cpu_s": round(time.process_time() - own, 1)}


def delay(bench: Bench, name: str, seconds: float, rate: int, tables: int) -> dict[str, Any]:
    """``rate`` tx/s for ``seconds`` read by the Python client from a subscription started
    caught up, a beat row every 100 ms: each beat's delay from its commit to the client."""
    state = bench.rows(tables)
    bench.cluster.set_status(name, "START")
    bench.cluster.wait_running(name)
    beats: dict[int, float] = {}
    delays: list[float] = []
    done = threading.Event()
    last = [BinlogPosition()]
    feed = Subscriber(name, managers=bench.cluster.manager_address)

    def read() -> None:
        for batch in feed:
            now = time.time()
            for txn in batch.transactions:
                apply(state, {"changes": [{"op": c.op, "table": c.table, "before": row(c.before),
                                           "after": row(c.after)} for c in txn.changes]})
                for change in txn.changes:
                    if change.table == "beat":
                        n = row(change.after)["id"]
                        if n in beats:
                            delays.append((now - beats[n]) * 1000)
            last[0] = BinlogPosition(batch.end.file, batch.end.pos)
            feed.ack(batch)

    def beat() -> None:
        n = int(time.time() * 1000) * 10
        while not done.wait(0.1):
            n += 1
            beats[n] = time.time()
            bench.source.execute(f"INSERT INTO {DB}.beat VALUES ({n}, 0)")

    reader = threading.Thread(target=read, daemon=True)
    beater = threading.Thread(target=beat, daemon=True)
    reader.start()
    beater.start()
    sysbench(bench.servers["source"].port, bench.password, DB, f"--tables={tables}",
             f"--time={seconds:.0f}", f"--rate={rate}", "--threads=4", "run")
    done.set()
    beater.join(10)
    end = bench.end()
    wait_for(lambda: gtid.compare(last[0], end) >= 0, 600, f"{name} read the stream")
    feed.close()
    reader.join(10)
    bench.cluster.set_status(name, "STOP")
    delays.sort()
    pick = (lambda q: round(delays[min(len(delays) - 1, int(len(delays) * q))], 1)) \
        if delays else (lambda q: None)
    bad = equal(bench, state, tables)
    return {"beats": len(delays), "beats_written": len(beats), "delay_p50_ms": pick(0.5),
            "delay_p99_ms": pick(0.99),
            "equal": not bad and len(delays) == len(beats), "differences": bad}


def main(argv: list[str] | None = None) -> int:
    args = backlog_arguments("bench.subscribe", __doc__, "subscribe", 60, argv)
    bench = Bench(args.work)
    results: list[dict[str, Any]] = []
    try:
        bench.cluster.start_manager()
        manager_pid = bench.cluster.manager.pid if bench.cluster.manager else 0
        node = bench.cluster.start_node(1)
        bench.source.execute(f"CREATE DATABASE IF NOT EXISTS {DB}")
        start = bench.end()
        bench.source.execute(BEAT)
        sysbench(bench.servers["source"].port, bench.password, DB, f"--tables={args.tables}",
                 f"--table-size={args.table_size}", "prepare")
        sysbench(bench.servers["source"].port, bench.password, DB, f"--tables={args.tables}",
                 f"--table-size={args.table_size}", f"--time={args.seconds:.0f}", "--rate=0",
                 "--threads=4", "run")
        end = bench.end()
        bench.cluster.apply([bench.channel("cli", args.tables, start),
                             bench.channel("client", args.tables, start),
                             bench.channel("live", args.tables, None)],
                            bench.sources(["cli", "client", "live"]))
        figures = {"cli": cli(bench, "cli", end, args.tables, manager_pid, node.pid),
                   "client": client(bench, "client", end, manager_pid, node.pid),
                   "anchor": anchor(bench, start, end)}
        bad = []
        for name in ("cli", "client"):
            bad += [f"{name}: {d}" for d in equal(bench, figures[name].pop("_state"),
                                                  args.tables)]
        result: dict[str, Any] = {"scenario": f"subscription catch-up: "
                                  f"{args.tables * args.table_size:,} rows of sysbench prepare "
                                  f"then {args.seconds:.0f}s of oltp_write_only, each reader "
                                  "alone"}
        for name, found in figures.items():
            result.update({f"{name}_{key}": value for key, value in found.items()})
        result["client_of_anchor"] = round(figures["client"]["changes_per_s"] /
                                           figures["anchor"]["changes_per_s"], 2)
        result["cli_of_anchor"] = round(figures["cli"]["changes_per_s"] /
                                        figures["anchor"]["changes_per_s"], 2)
        results.append({**result, "equal": not bad, "differences": bad})
        found = delay(bench, "live", args.stream_seconds, args.rate, args.tables)
        results.append({"scenario": f"subscription stream: {args.rate} tx/s for "
                        f"{args.stream_seconds:.0f}s read by the Python client", **found})
    finally:
        bench.close()
    write_report(args.results, "subscribe", args.smoke, vars(args), results, {})
    return 0 if all(result["equal"] for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
