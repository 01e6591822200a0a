"""The catch-up scenario of ``bench.peers``: setl and the native replicas (serial and parallel)
all stopped while a backlog is written (``sysbench prepare``, then ``oltp_write_only`` at full
rate), then all started together: how long each takes to cross the bulk part and the OLTP
part, in source rows/s, and what setl's node spent per row, by stage (``--profile``: py-spy on
the node's process tree). ``--catchup-alone``: each copy crosses the same backlog by
itself, one after the other, with the machine to itself.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pymysql

from bench.measure import Profile, tree_cpu_by_process, tree_cpu_s
from bench.wall import bulk_wall

if TYPE_CHECKING:
    from bench.peers import Peers

# the frame that names a sample's stage, looked for in this order
STAGES = (("E/T Spark workers (Python)", "pyspark.daemon"),
          ("select: binlog framing", "BinlogReader._run"),
          ("select: batching", "RunnerSelect._select_loop"),
          ("E/T in the node (small batches)", "run_part"),
          ("E/T driver: planning, to and from Spark", "etjob.py"),
          ("load: statements to the targets", "load/loop.py"),
          ("coordination (ZooKeeper, stats, cursor)", "kazoo"))


def _position(db: Any, query: str) -> tuple[str, int]:
    file, pos = db.rows(query)[0][:2]
    return str(file), int(pos)


def _replica_position(peers: Peers, name: str) -> tuple[str, int]:
    """The source position a native replica has applied up to. A parallel replica in
    optimistic mode still commits in binlog order, so this is where everything before has
    committed, as for the serial replica and setl."""
    status = peers.slave_status(name)
    return str(status.get("Relay_Master_Log_File") or ""), int(status.get("Exec_Master_Log_Pos")
                                                                or 0)


def _setl_position(peers: Peers) -> tuple[str, int]:
    try:
        rows = peers.target.rows("SELECT binlog_file, binlog_pos FROM retl.retl_position "
                                 "WHERE pipeline_id = 'bench.forward'")
    except pymysql.MySQLError:  # no batch loaded yet: the table is made with the first
        return "", 0
    return (str(rows[0][0]), int(rows[0][1])) if rows else ("", 0)


def _position_of(peers: Peers, name: str) -> tuple[str, int]:
    return _setl_position(peers) if name == "setl" else _replica_position(peers, name)


def _start(peers: Peers, name: str) -> None:
    if name == "setl":
        peers.cluster.set_status("bench", "START")
    else:
        peers.natives[name].execute("START SLAVE")


def _cross(peers: Peers, crossed: dict[str, dict[str, float]], started: float,
           bulk_end: tuple[str, int], oltp_end: tuple[str, int]) -> None:
    """Wait until each copy of ``crossed`` has applied past both marks, noting when (seconds
    from ``started``)."""
    from bench.peers import LABELS, NATIVES

    deadline = started + 3600
    while any(len(marks) < 2 for marks in crossed.values()) and time.monotonic() < deadline:
        for name, marks in crossed.items():
            at = _position_of(peers, name)
            for mark, end in (("bulk", bulk_end), ("oltp", oltp_end)):
                if mark not in marks and at >= end:
                    marks[mark] = time.monotonic() - started
        for name in NATIVES:  # one that stopped on an error would never get there
            if name in crossed and len(crossed[name]) < 2 and \
                    (error := peers.replica_error(name)):
                raise RuntimeError(f"catch-up: the {LABELS[name]} stopped: {error}")
        time.sleep(0.05)


def catchup_scenario(peers: Peers, tables: int, size: int, seconds: float, node_pid: int,
                     profile: Path | None = None, alone: bool = False,
                     batch_size: int | None = None) -> dict[str, Any]:
    """``alone``: each copy crosses the backlog by itself, one after the other (setl first),
    the others stopped: what each does with the whole machine, instead of sharing it.
    ``batch_size`` (setl's): then the bulk part's rows are also replayed straight into the
    target as setl's batches, the target's wall (:mod:`bench.wall`)."""
    from bench.peers import COPIES, DB

    names = [f"sbtest{i}" for i in range(1, tables + 1)]
    peers.cluster.set_status("bench", "STOP")
    for replica in peers.natives.values():
        replica.execute("STOP SLAVE")
    for table in [*names]:
        peers.source.execute(f"DROP TABLE IF EXISTS {DB}.{table}")
    peers.sysbench(f"--tables={tables}", f"--table-size={size}", "prepare")
    bulk_end = _position(peers.source, "SHOW MASTER STATUS")
    out = peers.sysbench(f"--tables={tables}", f"--table-size={size}",
                         f"--time={seconds:.0f}", "--rate=0", "--threads=4", "run")
    oltp_end = _position(peers.source, "SHOW MASTER STATUS")
    writes = re.search(r"write:\s+(\d+)", out)
    oltp_rows = int(writes.group(1)) if writes else 0  # one row per write query in this test
    spy = Profile(node_pid, profile) if profile is not None else None
    crossed: dict[str, dict[str, float]] = {name: {} for name in COPIES}
    cpu_before, started = tree_cpu_s(node_pid), time.monotonic()
    split_before, split = tree_cpu_by_process(node_pid), {}
    if alone:
        cpu = 0.0
        for name in COPIES:
            started = time.monotonic()
            _start(peers, name)
            _cross(peers, {name: crossed[name]}, started, bulk_end, oltp_end)
            if name == "setl":
                cpu = tree_cpu_s(node_pid) - cpu_before
                split = tree_cpu_by_process(node_pid)
                if spy is not None:
                    spy.stop()
    else:
        # all three catch up at once, as they streamed in the other scenarios: on a small
        # machine they share its cores, so each figure is lower than it would be alone
        for name in COPIES:
            _start(peers, name)
        _cross(peers, crossed, started, bulk_end, oltp_end)
        cpu = tree_cpu_s(node_pid) - cpu_before
        split = tree_cpu_by_process(node_pid)
        if spy is not None:
            spy.stop()
    bad = peers.copies_differ(DB, names)
    rows = tables * size + oltp_rows
    result: dict[str, Any] = {"scenario": f"catch-up{' (each alone)' if alone else ''}: "
                              f"{tables * size:,} rows of sysbench prepare then "
                              f"{seconds:.0f}s of oltp_write_only at full rate "
                              f"({oltp_rows:,} rows)", "bulk_rows": tables * size}
    for name, marks in crossed.items():
        bulk_s, total_s = marks.get("bulk"), marks.get("oltp")
        result[f"{name}_bulk_rows_per_s"] = None if bad or not bulk_s else \
            round(tables * size / bulk_s)
        result[f"{name}_oltp_rows_per_s"] = None if bad or not total_s or not bulk_s else \
            round(oltp_rows / max(total_s - bulk_s, 1e-3))
        result[f"{name}_total_s"] = round(total_s, 1) if total_s else None
    result["setl_cpu_s_per_100k_rows"] = round(cpu / rows * 100_000, 2)
    # which of the node's processes spent it: its own Python, Spark's JVM, the Python workers
    result["setl_cpu_s_per_100k_rows_by_process"] = {
        kind: round((used - split_before[kind]) / rows * 100_000, 2)
        for kind, used in split.items()}
    if spy is not None and spy.path.exists():
        result["setl_build"] = "pure Python (profiled)"
        stages = result["setl_cpu_us_per_row_by_stage"] = spy.stages(STAGES, rows)
        # the stages should add up to about the CPU measured from /proc: a check on the table
        result["setl_profiled_us_per_row"] = round(sum(stages.values()), 1)
        result["setl_cpu_us_per_row"] = round(cpu / rows * 1e6, 1)
    if batch_size and not bad and result.get("setl_bulk_rows_per_s"):
        result.update(bulk_wall(peers, DB, names, size, batch_size))
        result["setl_bulk_of_target_wall"] = round(
            result["setl_bulk_rows_per_s"] / result["target_wall_bulk_rows_per_s"], 2)
    return {**result, "equal": not bad, "differences": bad}
