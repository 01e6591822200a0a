"""The verify scenario of ``bench.peers``: ``setl verify`` of the copy scenario's table
(``--copy-rows``, a sysbench table copied by mydumper|myloader) next to
``pt-table-checksum`` on the same table in the same run, then the same findings as
``pt-table-sync --print`` after the target is corrupted, and ``--repair`` ending equal.

- **speed**: each tool twice, alternately (the better run counts, so neither pays alone
  for a cold buffer pool). pt-table-checksum checksums the source only (its replicas
  repeat its queries through replication, here there are none: ``--recursion-method
  none``), while setl verify reads and hashes both servers, so pt-table-checksum is also
  run on source and target at once (two processes: the same work as setl's, on the same
  cores). Rows/s from each tool's own time (pt's TIME column, setl's report), and the
  command's wall time beside it.
- **findings**: ``--corrupt`` random target rows, a third each deleted, changed, and added
  (keys past the source's); setl verify's differences must be exactly the rows
  ``pt-table-sync --print`` would mend, and both exactly what was corrupted.
- **repair**: ``setl verify --repair``, then pt-table-sync finds nothing.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import time
from typing import Any

from tests.devcluster import BIN, Database

DB, TABLE = "sbcopy", "sbtest1"


def verify_scenario(peers: Any, rows: int, corrupt: int, seed: int = 7) -> dict[str, Any]:
    cluster = peers.cluster
    cluster.apply([{"name": "check", "pipelines": [{
        "name": "forward", "source": "source", "target": "target",
        "pairs": [{"source": f"{DB}.{TABLE}", "target": f"{DB}.{TABLE}"}]}]}])
    cluster.set_status("check", "START")
    cluster.wait_running("check")
    setl_runs, pt_runs, both_runs = [], [], []
    for _ in range(2):
        setl_runs.append(setl_verify(cluster.manager_address))
        pt_runs.append(pt_table_checksum(peers))
        both_runs.append(pt_table_checksum_both(peers))
    setl_best = min(setl_runs, key=lambda run: run["seconds"])
    pt_best = min(pt_runs, key=lambda run: run["seconds"])
    both_best = min(both_runs, key=lambda run: run["seconds"])
    corrupted = corrupt_target(peers, rows, corrupt, seed)
    after = setl_verify(cluster.manager_address)
    synced = pt_table_sync(peers)
    repaired = setl_verify(cluster.manager_address, "--repair")
    left = pt_table_sync(peers)
    cluster.set_status("check", "STOP")
    same = after["found"] == synced == corrupted
    equal = setl_best["code"] == 0 and after["code"] == 1 and same and repaired["code"] == 0 \
        and not any(left.values())
    setl_rate = rows / setl_best["seconds"]
    pt_rate = rows / pt_best["seconds"]
    return {"scenario": f"verify {rows:,} rows (sysbench table of the copy)",
            "setl_verify_rows_per_s": round(setl_rate), "setl_verify_s": setl_best["seconds"],
            "setl_verify_wall_s": setl_best["wall_s"], "setl_method": setl_best["method"],
            "pt_table_checksum_rows_per_s": round(pt_rate),
            "pt_table_checksum_s": pt_best["seconds"], "pt_table_checksum_wall_s":
                pt_best["wall_s"], "ratio_setl_pt": round(setl_rate / pt_rate, 2),
            "pt_table_checksum_both_servers_rows_per_s": round(rows / both_best["seconds"]),
            "pt_table_checksum_both_servers_s": both_best["seconds"],
            "ratio_setl_pt_both_servers": round(both_best["seconds"] / setl_best["seconds"], 2),
            "runs_s": {"setl": [r["seconds"] for r in setl_runs],
                       "pt_table_checksum": [r["seconds"] for r in pt_runs],
                       "pt_table_checksum_both_servers": [r["seconds"] for r in both_runs]},
            "corrupted": {kind: len(keys) for kind, keys in corrupted.items()},
            "setl_found": {kind: len(keys) for kind, keys in after["found"].items()},
            "pt_table_sync_found": {kind: len(keys) for kind, keys in synced.items()},
            "same_findings": same, "repair_requests": repaired["repaired"],
            "after_repair_pt_table_sync": {kind: len(keys) for kind, keys in left.items()},
            "equal": equal, "differences": [] if equal else [
                f"setl {sorted_found(after['found'])} pt-table-sync {sorted_found(synced)} "
                f"corrupted {sorted_found(corrupted)} after repair {sorted_found(left)}"]}


def sorted_found(found: dict[str, set[int]]) -> dict[str, list[int]]:
    return {kind: sorted(keys)[:10] for kind, keys in found.items()}


def setl_verify(manager: str, *args: str) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run([str(BIN / "setl"), "--manager", manager, "-o", "json", "verify",
                           "check", "--table", f"{DB}.{TABLE}", *args],
                          capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"setl verify {' '.join(args)}: {done.stderr.strip()[-500:]}")
    [table] = json.loads(done.stdout)["reports"][0]["tables"]
    found: dict[str, set[int]] = {"missing": set(), "extra": set(), "different": set()}
    for difference in table.get("differences", []):
        found[difference["kind"]].add(json.loads(difference["key"])[0])
    return {"code": done.returncode, "seconds": float(table["seconds"]),
            "wall_s": round(wall, 2), "method": table["method"], "found": found,
            "repaired": int(table.get("repaired", 0))}


def _pt_command(peers: Any, server: str) -> list[str]:
    return ["pt-table-checksum", f"h=127.0.0.1,P={peers.port(server)},u=setl,"
            f"p={peers.password}", "--databases", DB, "--tables", TABLE,
            "--no-check-binlog-format", "--recursion-method=none",
            "--no-check-replication-filters", "--no-version-check",
            "--set-vars", "sql_log_bin=0"]  # no checksum query replicates anywhere


def _pt_time(stdout: str, stderr: str) -> tuple[float, int]:
    line = next((line for line in stdout.splitlines() if line.endswith(f"{DB}.{TABLE}")), None)
    if line is None:
        raise RuntimeError(f"pt-table-checksum: {(stderr or stdout).strip()[-500:]}")
    fields = line.split()  # TS ERRORS DIFFS ROWS DIFF_ROWS CHUNKS SKIPPED TIME TABLE
    return float(fields[7]), int(fields[3])


def pt_table_checksum(peers: Any) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run(_pt_command(peers, "source"), capture_output=True, text=True,
                          check=False)
    wall = time.monotonic() - started
    seconds, rows = _pt_time(done.stdout, done.stderr)
    return {"seconds": seconds, "rows": rows, "wall_s": round(wall, 2)}


def pt_table_checksum_both(peers: Any) -> dict[str, Any]:
    """pt-table-checksum on source and target at once: the longer of the two times."""
    started = time.monotonic()
    running = [subprocess.Popen(_pt_command(peers, server), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
               for server in ("source", "target")]
    times = [_pt_time(*process.communicate())[0] for process in running]
    return {"seconds": max(times), "wall_s": round(time.monotonic() - started, 2)}


def corrupt_target(peers: Any, rows: int, count: int, seed: int) -> dict[str, set[int]]:
    rng = random.Random(seed)
    third = max(1, count // 3)
    chosen = rng.sample(range(1, rows + 1), 2 * third)
    deleted, changed = set(chosen[:third]), set(chosen[third:])
    extra = {rows + 1 + rng.randrange(rows) for _ in range(third)}
    target = Database(peers.box, "target")
    try:
        name = f"`{DB}`.`{TABLE}`"
        target.execute(f"DELETE FROM {name} WHERE id IN ({', '.join(map(str, deleted))})")
        target.execute(f"UPDATE {name} SET c = CONCAT('corrupt-', LEFT(c, 100)) WHERE id IN "
                       f"({', '.join(map(str, changed))})")
        target.execute(f"INSERT INTO {name} (id, k, c, pad) VALUES " + ", ".join(
            f"({key}, 1, 'stray', 'stray')" for key in extra))
    finally:
        target.close()
    return {"missing": deleted, "extra": extra, "different": changed}


_STATEMENT = re.compile(r"^(DELETE|UPDATE|INSERT|REPLACE)\b")
_WHERE_ID = re.compile(r"WHERE `id`='(\d+)'")
_VALUES_ID = re.compile(r"VALUES\s*\('(\d+)'")


def pt_table_sync(peers: Any) -> dict[str, set[int]]:
    """What ``pt-table-sync --print`` would change on the target, by kind."""
    dsn = f"h=127.0.0.1,u=setl,p={peers.password}"
    done = subprocess.run(["pt-table-sync", "--print", "--no-check-slave", "--no-version-check",
                           f"{dsn},P={peers.port('source')},D={DB},t={TABLE}",
                           f"{dsn},P={peers.port('target')}"],
                          capture_output=True, text=True, check=False)
    if done.returncode not in (0, 2):
        raise RuntimeError(f"pt-table-sync: {done.stderr.strip()[-500:]}")
    found: dict[str, set[int]] = {"missing": set(), "extra": set(), "different": set()}
    kinds = {"DELETE": "extra", "UPDATE": "different", "INSERT": "missing",
             "REPLACE": "different"}
    for line in done.stdout.splitlines():
        statement = _STATEMENT.match(line)
        if statement is None:
            continue
        key = _WHERE_ID.search(line) or _VALUES_ID.search(line)
        if key is not None:
            found[kinds[statement.group(1)]].add(int(key.group(1)))
    return found
