"""The lake benchmark: the same sysbench backlog caught up into MariaDB, into Delta tables
mirrored and into Delta change logs (one target at a time, each alone on the machine), and
the physical limit — ``deltalake.write_deltalake`` of the same rows from Arrow in one
process, in commits of the same size. Then streams at ``--rate`` tx/s into a mirrored lake
(``oltp_write_only``'s random updates with and without compaction, then ``oltp_insert``'s new
rows): delay p50/p99 (a beat row's commit on the source to its Delta commit), each large
table's delay (``table_delay_*``: per Delta commit, the age of the oldest transaction it
holds), and the files a table has after the stream. Every figure counts only when the copy
equals the source at the end. ``--streams-only``: the streams alone, on the prepared rows
(no OLTP backlog, no catch-ups).

    python -m bench.lake [--tables 4 --table-size 100000 --seconds 30 --stream-seconds 120]
                         [--streams-only]
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import os
import shutil
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.catchup import STAGES
from bench.measure import (
    Profile,
    RssSampler,
    backlog_arguments,
    sysbench,
    tree_cpu_by_process,
    tree_cpu_s,
    write_report,
)
from shared import gtid
from shared.lakes import Stamp, writer_properties
from shared.model import BinlogPosition
from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, wait_for

DB = "sbtest"
COLUMNS = ["id", "k", "c", "pad"]
BEAT = f"CREATE TABLE {DB}.beat (id BIGINT PRIMARY KEY, created BIGINT NOT NULL)"


class Lake:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.box = Sandbox(work / "sandbox")
        self.box.down(purge=True)
        for left in ("lake", "lake-mirror", "limit", "cluster"):  # an earlier run's
            shutil.rmtree(work / left, ignore_errors=True)
        self.servers = self.box.up(owner_pid=os.getpid())
        self.cluster = Cluster(self.box, work / "cluster", "lake", spark_start="boot")
        self.source, self.target = Database(self.box, "source"), Database(self.box, "target")
        self.password = self.box.password()
        self.location = work / "lake"

    def sources(self) -> list[dict[str, Any]]:
        secret = f"file:{self.box.secret_file}"
        return [*({"name": name, "host": "127.0.0.1", "port": self.servers[name].port,
                   "user": "setl", "password": secret} for name in ("source", "target")),
                {"name": "lake", "type": "delta", "location": str(self.location)}]

    def channel(self, name: str, target: str, tables: int, start: BinlogPosition,
                mode: str = "", **params: Any) -> dict[str, Any]:
        names = [f"sbtest{i}" for i in range(1, tables + 1)] + ["beat"]
        pairs = [{"source": f"{DB}.{t}", "target": f"{DB}.{t}", **({"mode": mode} if mode
                                                                   else {})} for t in names]
        return {"name": name, "pipelines": [{
            "name": "forward", "source": "source", "target": target, "batch_size": 10000,
            "load_batch_size": 2000, "start": {"file": start.file, "pos": start.pos},
            **params, "pairs": pairs}]}

    def sysbench(self, *args: str, script: str = "oltp_write_only") -> str:
        return sysbench(self.servers["source"].port, self.password, DB, *args, script=script)

    def end(self) -> BinlogPosition:
        file, pos = self.source.rows("SHOW MASTER STATUS")[0][:2]
        return BinlogPosition(str(file), int(pos))

    def close(self) -> None:
        self.cluster.stop()
        self.source.close()
        self.target.close()
        self.box.down(purge=True)


class RustCpu(threading.Thread):
    """CPU seconds of the node's delta-rs threads (tokio's: ``tokio-*`` by name), sampled
    every 0.2 s until ``done``, each thread's last figure kept after it ends: the Delta
    commits' share of the node's own CPU (the rest is its Python: the binlog read, framing,
    batching, E/T planning, the Spark driver). A thread's CPU after its last sample and
    before its end is missed."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.done = pid, threading.Event()
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()
        self._tick = os.sysconf("SC_CLK_TCK")

    def run(self) -> None:
        while not self.done.wait(0.2):
            self.total()

    def total(self) -> float:
        with self._lock:
            try:
                tasks = list(Path(f"/proc/{self.pid}/task").iterdir())
            except OSError:
                tasks = []
            for task in tasks:
                try:
                    stat = (task / "stat").read_text()
                except OSError:
                    continue  # (ended)
                if stat[stat.index("(") + 1:stat.rindex(")")].startswith("tokio"):
                    fields = stat.rsplit(")", 1)[1].split()
                    self._seen[task.name] = sum(int(value) for value in fields[11:13]) / \
                        self._tick
            return sum(self._seen.values())


def at_least(state: Any, end: BinlogPosition) -> bool:
    where = state.position
    return bool(where.file) and gtid.compare(BinlogPosition(where.file, where.pos), end) >= 0


# a lake's load by step (py-spy samples only Python holding the GIL: delta-rs's own work in
# Rust is in the CPU split by process, not here), then the stages every catch-up has
LAKE_STAGES = (("lake: type check (conformed)", "conformed"),
               ("lake: Arrow batches joined", "joined"),
               ("lake: MERGE / append commit", "_write"),
               ("lake: rows to Arrow (in the Spark workers)", "node/target/delta/units.py"),
               ("lake: other load work", "node/target/delta"), *STAGES)


def catchup(lake: Lake, name: str, node_pid: int, end: BinlogPosition, rows: int,
            profile: Path | None = None, rust: RustCpu | None = None) -> dict[str, Any]:
    """One channel started alone on the backlog: seconds to its end, rows/s, node CPU (and
    its split: the node's process, Spark's JVM, its Python workers; of the node's, what
    delta-rs' threads spent), and the most batches its window held (of how many it may);
    with ``profile``, µs of Python per row by stage."""
    spy = Profile(node_pid, profile / f"{name}.raw") if profile is not None else None
    cpu, started = tree_cpu_s(node_pid), time.monotonic()
    split = tree_cpu_by_process(node_pid)
    delta = rust.total() if rust is not None else 0.0
    lake.cluster.set_status(name, "START")
    wait_for(lambda: at_least(lake.cluster.pipeline_state(name), end), 3600, f"{name} caught up")
    seconds = time.monotonic() - started
    cpu = tree_cpu_s(node_pid) - cpu
    split = {kind: used - split[kind] for kind, used in tree_cpu_by_process(node_pid).items()}
    if rust is not None:
        split["node_delta_rs"] = rust.total() - delta
    state = lake.cluster.pipeline_state(name)
    lake.cluster.set_status(name, "STOP")
    found: dict[str, Any] = {
        "seconds": round(seconds, 1), "rows_per_s": round(rows / seconds),
        "cpu_s_per_100k_rows": round(cpu / rows * 100_000, 2),
        "cpu_s_per_100k_rows_by_process": {
            kind: round(used / rows * 100_000, 2) for kind, used in split.items()},
        "window_peak_batches": f"{state.window_peak} of {state.window_size}"}
    if spy is not None:
        spy.stop()
        found["python_us_per_row_by_stage"] = spy.stages(LAKE_STAGES, rows)
    return found


def source_rows(lake: Lake, table: str) -> Counter:
    return Counter(lake.source.rows(f"SELECT {', '.join(COLUMNS)} FROM {DB}.{table}"))


def mirror_equal(lake: Lake, tables: list[str]) -> list[str]:
    from deltalake import DeltaTable

    bad = []
    for table in tables:
        found = DeltaTable(str(lake.location / DB / table)).to_pyarrow_table(columns=COLUMNS)
        if Counter(tuple(row[c] for c in COLUMNS) for row in found.to_pylist()) != \
                source_rows(lake, table):
            bad.append(f"lake mirror {table}")
    return bad


def changelog_equal(lake: Lake, schema_dir: Path, tables: list[str]) -> list[str]:
    """Each key's last change in the log, applied: the source's rows."""
    from deltalake import DeltaTable

    bad = []
    for table in tables:
        log = DeltaTable(str(schema_dir / table)).to_pyarrow_table().to_pylist()

        def order(change: dict[str, Any]) -> tuple[int, int, int]:
            file, _, pos = change["_setl_position"].rpartition(":")
            return int(file.rpartition(".")[2]), int(pos), change["_setl_seq"]
        state: dict[Any, tuple[Any, ...] | None] = {}
        for change in sorted(log, key=order):
            if change["_setl_op"] in ("U", "D"):
                state[change["_setl_before"]["id"]] = None
            if change["_setl_op"] in ("I", "U"):
                state[change["id"]] = tuple(change[c] for c in COLUMNS)
        if Counter(row for row in state.values() if row is not None) != source_rows(lake, table):
            bad.append(f"lake changelog {table}")
    return bad


def write_limit(lake: Lake, tables: list[str], batch_rows: int) -> dict[str, Any]:
    """The rows setl's change log holds (every change, as Arrow) written again by
    ``write_deltalake`` in one process, in commits of ``batch_rows`` (setl's batch size),
    with setl's writer properties (:func:`shared.lakes.writer_properties`):
    the rate no lake writer of these rows on this machine beats."""
    from deltalake import DeltaTable, write_deltalake

    arrays = {table: DeltaTable(str(lake.location / DB / table)).to_pyarrow_table()
              for table in tables}
    rows = sum(t.num_rows for t in arrays.values())
    out = lake.work / "limit"
    shutil.rmtree(out, ignore_errors=True)
    started = time.monotonic()
    for table, data in arrays.items():
        for offset in range(0, data.num_rows, batch_rows):
            write_deltalake(str(out / table), data.slice(offset, batch_rows), mode="append",
                            writer_properties=writer_properties())
    seconds = time.monotonic() - started
    return {"rows": rows, "seconds": round(seconds, 1), "rows_per_s": round(rows / seconds)}


def stream(lake: Lake, name: str, seconds: float, rate: int, tables: int,
           script: str = "oltp_write_only") -> dict[str, Any]:
    """``rate`` tx/s of sysbench ``script`` for ``seconds`` into a running mirrored lake,
    with a beat row every 100 ms: each beat's delay from its source commit to the Delta
    commit holding it, and the files of each table at the end."""
    from deltalake import DeltaTable

    caught_up = lake.end()  # the backlog first: the stream's delay is measured caught up
    lake.cluster.set_status(name, "START")
    wait_for(lambda: at_least(lake.cluster.pipeline_state(name), caught_up), 3600,
             f"{name} caught up before the stream")
    delays: list[float] = []
    done = threading.Event()
    beats: dict[int, float] = {}
    ends: list[tuple[float, tuple[int, int]]] = []  # (when, the source's binlog end then)

    def beat() -> None:
        n = int(time.time() * 1000) * 10
        while not done.wait(0.1):
            n += 1
            lake.source.execute(f"INSERT INTO {DB}.beat VALUES ({n}, 0)")
            beats[n] = time.time()

    def sample() -> None:  # the source's binlog end every 20 ms (its own connection)
        source = Database(lake.box, "source")
        try:
            while not done.wait(0.02):
                file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
                ends.append((time.time(), binlog_order(str(file), int(pos))))
        finally:
            source.close()

    def watch() -> None:
        path, seen = lake.location / DB / "beat", set()
        while not done.is_set() or len(seen) < len(beats):
            try:
                if (path / "_delta_log").exists():
                    ids = DeltaTable(str(path)).to_pyarrow_table(columns=["id"])
                    now = time.time()
                    for n in ids.column("id").to_pylist():
                        if n not in seen and n in beats:
                            seen.add(n)
                            delays.append((now - beats[n]) * 1000)
            except OSError:  # a file a vacuum removed between listing and reading it
                pass
            if done.is_set() and time.time() > deadline:
                return
            time.sleep(0.01)

    threads = [threading.Thread(target=beat, daemon=True),
               threading.Thread(target=watch, daemon=True),
               threading.Thread(target=sample, daemon=True)]
    deadline = time.time() + seconds + 60
    for thread in threads:
        thread.start()
    lake.sysbench(f"--tables={tables}", f"--time={seconds:.0f}", f"--rate={rate}",
                  "--threads=4", "run", script=script)
    done.set()
    for thread in threads:
        thread.join(90)
    end = lake.end()
    wait_for(lambda: at_least(lake.cluster.pipeline_state(name), end), 600,
             f"{name} loaded the stream")
    lake.cluster.set_status(name, "STOP")
    delays.sort()
    files = {t: len(DeltaTable(str(lake.location / DB / t)).file_uris())
             for t in (f"sbtest{i}" for i in range(1, tables + 1))}
    pick = (lambda q: round(delays[min(len(delays) - 1, int(len(delays) * q))], 1)) \
        if delays else (lambda q: None)
    tables_delays = sorted(d for t in files for d in commit_delays(
        lake.location / DB / t, name, ends))
    pick_t = (lambda q: round(tables_delays[min(len(tables_delays) - 1,
                                                int(len(tables_delays) * q))], 1)) \
        if tables_delays else (lambda q: None)
    return {"beats": len(delays), "delay_p50_ms": pick(0.5), "delay_p99_ms": pick(0.99),
            "table_commits": len(tables_delays), "table_delay_p50_ms": pick_t(0.5),
            "table_delay_p99_ms": pick_t(0.99), "table_delay_max_ms": pick_t(1.0),
            "files_per_table": max(files.values())}


def binlog_order(file: str, pos: int) -> tuple[int, int]:
    return int(file.rpartition(".")[2]), pos


def commit_delays(path: Path, channel: str, ends: list[tuple[float, tuple[int, int]]]
                  ) -> list[float]:
    """The delay of each Delta commit of a table during the stream, in ms: from the source
    commit of the oldest transaction it holds (the first after the position of the table's
    commit before it: when the source's binlog end was first sampled past that position,
    ±20 ms) to the commit's own timestamp. The tables' rows, not only the beat's."""
    from deltalake import DeltaTable

    if not ends:
        return []
    whens, positions = [when for when, _ in ends], [where for _, where in ends]
    stamped = []
    for commit in DeltaTable(str(path)).history():
        stamp = Stamp.of(commit)
        if stamp is not None and stamp.pipeline == f"{channel}.forward" and stamp.position.file:
            stamped.append((int(commit["version"]), commit["timestamp"] / 1000,
                            binlog_order(stamp.position.file, stamp.position.pos)))
    stamped.sort()
    found = []
    for (_, _, before), (_, committed, where) in itertools.pairwise(stamped):
        if where <= before or before < positions[0]:
            continue  # no rows (a fence), or rows from before the stream's first sample
        first = bisect.bisect_right(positions, before)  # the first sample past it
        if first < len(whens) and whens[first] <= committed:
            found.append((committed - whens[first]) * 1000)
    return found


def catchups(lake: Lake, args: Any, node_pid: int, rust: RustCpu, start: BinlogPosition,
             tables: list[str]) -> dict[str, Any]:
    """The backlog's OLTP part run, then caught up by MariaDB, a lake mirror and a lake
    change log, each alone; beside the write limit."""
    out = lake.sysbench(f"--tables={args.tables}", f"--table-size={args.table_size}",
                        f"--time={args.seconds:.0f}", "--rate=0", "--threads=4", "run")
    end = lake.end()
    oltp = int(out.split("write:")[1].split()[0]) if "write:" in out else 0
    rows = args.tables * args.table_size + oltp
    channels = {"maria": ("target", ""), "mirror": ("lake", "mirror"),
                "changelog": ("lake", "changelog")}
    lake.cluster.apply([lake.channel(name, target, args.tables, start, mode,
                                     lake_compact_every=0)
                        for name, (target, mode) in channels.items() if name != "changelog"],
                       lake.sources())
    figures: dict[str, Any] = {}
    figures["maria"] = catchup(lake, "maria", node_pid, end, rows, args.profile,
                               rust)
    figures["mirror"] = catchup(lake, "mirror", node_pid, end, rows, args.profile,
                                rust)
    bad = mirror_equal(lake, tables)
    # the change log into a lake of its own (a pipeline's tables are its own)
    shutil.move(str(lake.location), str(args.work / "lake-mirror"))
    lake.cluster.apply([lake.channel("changelog", "lake", args.tables, start, "changelog",
                                     lake_compact_every=0)], lake.sources())
    figures["changelog"] = catchup(lake, "changelog", node_pid, end, rows, args.profile,
                                   rust)
    bad += changelog_equal(lake, lake.location / DB, tables)
    limit = write_limit(lake, tables, 10_000)
    result = {"scenario": f"lake catch-up: {args.tables * args.table_size:,} rows of "
              f"sysbench prepare then {args.seconds:.0f}s of oltp_write_only ({oltp:,} "
              "rows), each target alone", "rows": rows, "write_deltalake_limit": limit}
    for name, found in figures.items():
        result.update({f"{name}_{key}": value for key, value in found.items()})
    result["changelog_of_limit"] = round(figures["changelog"]["rows_per_s"] /
                                         limit["rows_per_s"], 2)
    return {**result, "equal": not bad, "differences": bad}


def main(argv: list[str] | None = None) -> int:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--streams-only", action="store_true")
    known, rest = own.parse_known_args(argv)
    args = backlog_arguments("bench.lake", __doc__, "lake", 120, rest)
    args.streams_only = known.streams_only
    lake = Lake(args.work)
    sampler: RssSampler | None = None
    rust: RustCpu | None = None
    tables = [f"sbtest{i}" for i in range(1, args.tables + 1)]
    results: list[dict[str, Any]] = []
    try:
        lake.cluster.start_manager()
        node = lake.cluster.start_node(1)
        sampler = RssSampler(node.pid)
        sampler.start()
        rust = RustCpu(node.pid)
        rust.start()
        lake.source.execute(f"CREATE DATABASE IF NOT EXISTS {DB}")
        lake.target.execute(f"CREATE DATABASE IF NOT EXISTS {DB}")
        start = lake.end()
        lake.source.execute(BEAT)
        lake.target.execute(BEAT)
        lake.sysbench(f"--tables={args.tables}", f"--table-size={args.table_size}", "prepare")
        for i in range(1, args.tables + 1):  # the MariaDB target gets the tables' DDL
            lake.target.execute(lake.source.rows(f"SHOW CREATE TABLE {DB}.sbtest{i}")[0][1]
                                .replace("CREATE TABLE `", f"CREATE TABLE `{DB}`.`", 1))
        if not args.streams_only:  # (--streams-only: the streams alone, on the prepared rows)
            results.append(catchups(lake, args, node.pid, rust, start, tables))
        # random updates (oltp_write_only), with and without compaction; then new rows only
        # (oltp_insert: auto-increment keys, as an order or event table takes them)
        for script, compact in (("oltp_write_only", 0), ("oltp_write_only", 100),
                                ("oltp_insert", 0)):
            shutil.rmtree(lake.location, ignore_errors=True)
            name = f"stream{compact}{'' if script == 'oltp_write_only' else 'insert'}"
            lake.cluster.apply([lake.channel(name, "lake", args.tables, start, "mirror",
                                             lake_compact_every=compact,
                                             lake_retain_hours=0)], lake.sources())
            found = stream(lake, name, args.stream_seconds, args.rate, args.tables, script)
            bad = mirror_equal(lake, tables)
            what = "" if script == "oltp_write_only" else f" of {script}"
            results.append({"scenario": f"lake stream: {args.rate} tx/s{what} for "
                            f"{args.stream_seconds:.0f}s, compaction every {compact or 'never'}"
                            " commits", **found, "equal": not bad, "differences": bad})
    finally:
        if sampler is not None:
            sampler.done.set()
        if rust is not None:
            rust.done.set()
        lake.close()
    write_report(args.results, "lake", args.smoke, vars(args), results,
                 {"node_peak_rss_mb": round(sampler.peak_kb / 1024) if sampler else None})
    return 0 if all(result["equal"] for result in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
