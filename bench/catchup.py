"""The catch-up scenario of ``bench.peers``: setl and the native replica both stopped while a
backlog is written (``sysbench prepare``, then ``oltp_write_only`` at full rate), then both
started: how long each takes to cross the bulk part and the OLTP part, in source rows/s, and
what setl's node spent per row, by stage (``--profile``: py-spy on the node's process tree).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pymysql

from bench.measure import Profile, tree_cpu_s

if TYPE_CHECKING:
    from bench.peers import Peers

# the frame that names a sample's stage, looked for in this order
STAGES = (("E/T Spark workers (Python)", "pyspark.daemon"),
          ("select: binlog framing", "BinlogReader._run"),
          ("select: batching", "PipelineRunner._select_loop"),
          ("E/T in the node (small batches)", "run_part"),
          ("E/T driver: planning, to and from Spark", "PipelineRunner._job"),
          ("load: statements to the targets", "PipelineRunner._load_loop"),
          ("coordination (ZooKeeper, stats, cursor)", "kazoo"))


def _position(db: Any, query: str) -> tuple[str, int]:
    file, pos = db.rows(query)[0][:2]
    return str(file), int(pos)


def _replica_position(peers: Peers) -> tuple[str, int]:
    cursor = peers.replica.conn.cursor()
    cursor.execute("SHOW SLAVE STATUS")
    row = cursor.fetchone()
    status = dict(zip([c[0] for c in cursor.description], row or (), strict=False))
    return str(status.get("Relay_Master_Log_File") or ""), int(status.get("Exec_Master_Log_Pos")
                                                                or 0)


def _setl_position(peers: Peers) -> tuple[str, int]:
    try:
        rows = peers.target.rows("SELECT binlog_file, binlog_pos FROM retl.retl_position "
                                 "WHERE pipeline_id = 'bench.forward'")
    except pymysql.MySQLError:  # no batch loaded yet: the table is made with the first
        return "", 0
    return (str(rows[0][0]), int(rows[0][1])) if rows else ("", 0)


def catchup_scenario(peers: Peers, tables: int, size: int, seconds: float, node_pid: int,
                     profile: Path | None = None) -> dict[str, Any]:
    from bench.peers import DB

    names = [f"sbtest{i}" for i in range(1, tables + 1)]
    peers.cluster.set_status("bench", "STOP")
    peers.replica.execute("STOP SLAVE")
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
    cpu_before, started = tree_cpu_s(node_pid), time.monotonic()
    peers.cluster.set_status("bench", "START")
    peers.replica.execute("START SLAVE")
    crossed: dict[str, dict[str, float]] = {"setl": {}, "native": {}}
    where = {"setl": lambda: _setl_position(peers), "native": lambda: _replica_position(peers)}
    deadline = started + 3600
    while any(len(marks) < 2 for marks in crossed.values()) and time.monotonic() < deadline:
        for name, position in where.items():
            at = position()
            for mark, end in (("bulk", bulk_end), ("oltp", oltp_end)):
                if mark not in crossed[name] and at >= end:
                    crossed[name][mark] = time.monotonic() - started
        if (error := peers.replica_error()) and "native" not in crossed:
            raise RuntimeError(f"catch-up: the native replica stopped: {error}")
        time.sleep(0.05)
    cpu = tree_cpu_s(node_pid) - cpu_before
    if spy is not None:
        spy.stop()
    bad = peers.differs("target", DB, names) + peers.differs("replica", DB, names)
    rows = tables * size + oltp_rows
    result: dict[str, Any] = {"scenario": f"catch-up: {tables * size:,} rows of sysbench "
                              f"prepare then {seconds:.0f}s of oltp_write_only at full rate "
                              f"({oltp_rows:,} rows)"}
    for name, marks in crossed.items():
        bulk_s, total_s = marks.get("bulk"), marks.get("oltp")
        result[f"{name}_bulk_rows_per_s"] = None if bad or not bulk_s else \
            round(tables * size / bulk_s)
        result[f"{name}_oltp_rows_per_s"] = None if bad or not total_s or not bulk_s else \
            round(oltp_rows / max(total_s - bulk_s, 1e-3))
        result[f"{name}_total_s"] = round(total_s, 1) if total_s else None
    result["setl_cpu_s_per_100k_rows"] = round(cpu / rows * 100_000, 2)
    if spy is not None and spy.path.exists():
        stages = result["setl_cpu_us_per_row_by_stage"] = spy.stages(STAGES, rows)
        # the stages should add up to about the CPU measured from /proc: a check on the table
        result["setl_profiled_us_per_row"] = round(sum(stages.values()), 1)
        result["setl_cpu_us_per_row"] = round(cpu / rows * 1e6, 1)
    return {**result, "equal": not bad, "differences": bad}
