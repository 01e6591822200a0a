"""The copy scenario of ``bench.peers``: a sysbench table copied by setl's ``start:
snapshot`` (alone, then racing sysbench writes to the same table) and by
``mydumper | myloader``, each copy checked by pt-table-sync."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.measure import Profile, tree_cpu_s
from tests.devcluster import wait_for

# the frame that names a sample's stage (``--profile``), looked for in this order
STAGES = (("read: SELECT, rows parsed and pickled (Spark task)", "snapshot/tasks.py"),
          ("join: reads into the stream as row changes", "extract/reads.py"),
          ("transform: the pairs' E/T", "extract/etl.py"),
          ("render: LOAD DATA text", "extract/loaddata.py"),
          ("E/T Spark workers, other Python", "pyspark.daemon"),
          ("select: binlog framing", "BinlogReader._run"),
          ("select: batching", "RunnerSelect._select_loop"),
          ("E/T driver: planning, to and from Spark", "etjob.py"),
          ("load: statements to the target", "load/loop.py"),
          ("snapshot driver: windows, watermarks", "node/snapshot/"),
          ("coordination (ZooKeeper, stats, cursor)", "kazoo"))

def copy_scenario(peers: Any, rows: int, node_pid: int, setl: bool = True,
                  profile: Path | None = None) -> list[dict[str, Any]]:
    """A ``rows`` sysbench table copied by setl's snapshot and by ``mydumper | myloader``,
    like with like: with the target's binlog written (setl's default, myloader
    ``--enable-binlog``) and without (``snapshot_skip_binlog``, myloader's default); then
    setl's copy racing sysbench writes to the same table. Each copy checked by pt-table-sync.
    The target ends equal to the source (the verify scenario starts from it)."""
    peers.source.execute("CREATE DATABASE sbcopy")
    peers.sysbench("--tables=1", f"--table-size={rows}", "--mysql-db=sbcopy", "prepare")
    results = []
    for binlog in (True, False):
        mine = setl_copy(peers, rows, "copy" if binlog else "copynobinlog", node_pid, rate=0,
                         profile=profile if binlog else None, binlog=binlog) if setl else \
            {"equal": True, "differences": []}
        theirs = mydumper_myloader(peers, rows, binlog)
        peer = theirs.pop("rows_per_s")
        mine["scenario"] = f"full copy {rows:,} rows, target binlog {'on' if binlog else 'off'}"
        mine.update(mydumper_myloader_rows_per_s=peer, mydumper_myloader_s=theirs["s"],
                    ratio_setl_mydumper=round(mine["setl_rows_per_s"] / peer, 3)
                    if peer and mine.get("setl_rows_per_s") else None,
                    equal=mine["equal"] and theirs["equal"],
                    differences=mine["differences"] + theirs["differences"])
        results.append(mine)
    if setl:  # (it changes the source: the copies above were of the table as prepared)
        results.append(setl_copy(peers, rows, "copywrites", node_pid, rate=200))
    return results


def mydumper_myloader(peers: Any, rows: int, binlog: bool) -> dict[str, Any]:
    """``mydumper | myloader`` of sbcopy into an empty target database (myloader writes
    the target's binlog with ``--enable-binlog`` only)."""
    peers.target.execute("DROP DATABASE IF EXISTS sbcopy")
    dump = Path(tempfile.mkdtemp(prefix="setl-mydumper-"))
    login = ["-h", "127.0.0.1", "-u", "setl", "-p", peers.password, "-t", "2"]
    started = time.monotonic()
    subprocess.run(["mydumper", *login, "-P", str(peers.port("source")), "-B", "sbcopy",
                    "-o", str(dump)], check=True, capture_output=True)
    subprocess.run(["myloader", *login, "-P", str(peers.port("target")), "-B", "sbcopy",
                    "-d", str(dump), "-o", *(["--enable-binlog"] if binlog else [])],
                   check=True, capture_output=True)
    took = time.monotonic() - started
    shutil.rmtree(dump, ignore_errors=True)
    bad = peers.differs("target", "sbcopy", ["sbtest1"])
    return {"rows_per_s": None if bad else round(rows / took), "s": round(took, 2),
            "equal": not bad, "differences": bad}


def setl_copy(peers: Any, rows: int, channel: str, node_pid: int, rate: int,
              profile: Path | None = None, binlog: bool = True) -> dict[str, Any]:
    """setl's ``start: snapshot`` of sbcopy.sbtest1 into an empty table on the target, with
    sysbench writing ``rate`` tx/s to the same table while it copies (0: none)."""
    create = peers.source.rows("SHOW CREATE TABLE sbcopy.sbtest1")[0][1]
    peers.target.script("DROP DATABASE IF EXISTS sbcopy", "CREATE DATABASE sbcopy",
                        create.replace("CREATE TABLE `sbtest1`", "CREATE TABLE sbcopy.sbtest1"))
    pair = {"source": "sbcopy.sbtest1", "target": "sbcopy.sbtest1"}
    peers.cluster.apply([{"name": channel, "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "start": "snapshot",
        "snapshot_skip_binlog": not binlog, "pairs": [pair]}]}])
    writer = None
    if rate:
        writer = subprocess.Popen(
            ["sysbench", "oltp_write_only", "--db-driver=mysql", "--mysql-host=127.0.0.1",
             f"--mysql-port={peers.port('source')}", "--mysql-user=setl",
             f"--mysql-password={peers.password}", "--mysql-db=sbcopy", "--tables=1",
             f"--table-size={rows}", "--time=3600", f"--rate={rate}", "--threads=2", "run"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    spy = Profile(node_pid, profile) if profile is not None else None
    servers = {name: peers.servers[name].pid for name in ("source", "target")}
    servers_before = {name: tree_cpu_s(pid) for name, pid in servers.items()}
    cpu_before, started = tree_cpu_s(node_pid), time.monotonic()
    peers.cluster.set_status(channel, "START")

    first: list[float] = []  # when the first copied rows showed (Spark and the pipeline up)

    def copied() -> bool:
        copies = list(peers.cluster.pipeline_state(channel).snapshots)
        if not first and any(copy.rows for copy in copies):
            first.append(time.monotonic())
        return bool(copies) and all(copy.state == "done" for copy in copies)

    try:
        # four polls a second: each asks the manager, which reads ZooKeeper, on the cores the
        # copy runs on (at 20 a second they took ~10% of the machine); ±0.13 s of ~20 s
        wait_for(copied, 3600, f"{channel}: the snapshot", interval_s=0.25)
        took = time.monotonic() - started
        cpu = tree_cpu_s(node_pid) - cpu_before
        servers_cpu = {name: tree_cpu_s(pid) - servers_before[name]
                       for name, pid in servers.items()}
    finally:
        if spy is not None:
            spy.stop()
        if writer is not None:
            writer.terminate()
            writer.wait(30)
    checksum = "CHECKSUM TABLE sbcopy.sbtest1"
    wait_for(lambda: peers.source.rows(checksum) == peers.target.rows(checksum), 300,
             f"{channel}: the stream caught up", interval_s=0.2)
    bad = peers.differs("target", "sbcopy", ["sbtest1"])
    peers.cluster.set_status(channel, "STOP")
    wait_for(lambda: peers.cluster.pipeline_state(channel).state == "not running", 60,
             f"{channel}: stopped")
    label = f"setl snapshot of {rows:,} rows" + (f" racing sysbench at {rate} tx/s on the "
                                                  "same table" if rate else "")
    result = {"scenario": label, "setl_rows_per_s": None if bad else round(rows / took),
              "setl_s": round(took, 2), "setl_cpu_s_per_100k_rows": round(cpu / rows * 1e5, 2),
              "setl_start_s": round(first[0] - started, 2) if first else None,
              # the databases' share: what the copy costs the source and the target
              **{f"{name}_cpu_s_per_100k_rows": round(used / rows * 1e5, 2)
                 for name, used in servers_cpu.items()},
              "equal": not bad, "differences": bad}
    if spy is not None and spy.path.exists():
        stages = result["setl_cpu_us_per_row_by_stage"] = spy.stages(STAGES, rows)
        result["setl_profiled_us_per_row"] = round(sum(stages.values()), 1)
        result["setl_cpu_us_per_row"] = round(cpu / rows * 1e6, 1)
    return result
