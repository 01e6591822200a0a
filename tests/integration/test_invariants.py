"""The README's guarantees watched on the target while everything races: a transfer workload
keeps the sum of the balances constant in every committed source state; backfills (per
instance and central) and ad-hoc snapshots of the same rows run against it. A reader of the
target must never see another sum (that would be a mix of source states), never see a row
go back to an older version, and the end must be equal."""

from __future__ import annotations

import json
import random
import threading

import pymysql

from shared.retl import encode_key
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for

ACCOUNTS = ("CREATE TABLE `{schema}`.accounts (id INT PRIMARY KEY, balance INT NOT NULL, "
            "version INT NOT NULL)")
ROWS, TOTAL = 200, 200 * 1000
BUFFER = "INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA, CHANNEL_ID, PIPELINE_ID) "


def transfers(cluster: Cluster, schema: str, stop: threading.Event, done: list[int],
              accounts: range = range(1, ROWS + 1)) -> None:
    """Move money between two ``accounts``, one transaction a move; every row's version
    grows."""
    db = Database(cluster.sandbox, "source")
    rng = random.Random(5)
    t = f"`{schema}`.accounts"
    try:
        while not stop.is_set():
            a, b = rng.sample(accounts, 2)
            amount = rng.randint(1, 50)
            try:
                db.execute("BEGIN")
                db.execute(f"UPDATE {t} SET balance = balance - {amount}, version = version + 1 "
                           f"WHERE id = {a}")
                db.execute(f"UPDATE {t} SET balance = balance + {amount}, version = version + 1 "
                           f"WHERE id = {b}")
                db.execute("COMMIT")
                done.append(1)
            except pymysql.err.OperationalError:  # a deadlock between the movers: again
                db.execute("ROLLBACK")
    finally:
        db.close()


def watch(cluster: Cluster, schema: str, stop: threading.Event, seen: list[str],
          reads: list[int]) -> None:
    """Read the target as a user would, as often as it can; note every broken guarantee."""
    db = Database(cluster.sandbox, "target")
    versions: dict[int, int] = {}
    try:
        while not stop.is_set():
            rows = db.rows(f"SELECT id, balance, version FROM `{schema}`.accounts")
            reads.append(1)
            total = sum(balance for _, balance, _ in rows)
            if len(rows) != ROWS or total != TOTAL:
                seen.append(f"{len(rows)} rows summing to {total} (source: {ROWS}, {TOTAL})")
            for row_id, _, version in rows:
                last = versions.get(row_id)
                if last is not None and version < last:
                    seen.append(f"account {row_id} went back from version {last} to "
                                f"{version}")
                versions[row_id] = version if last is None else max(version, last)
    finally:
        db.close()


def damage(target: Database, statement: str) -> None:
    """Run ``statement`` on the target outside its binlog, again after a deadlock with the
    pipeline's Load (InnoDB rolled it back whole)."""
    target.execute("SET SESSION sql_log_bin = 0")
    try:
        for attempt in range(20):
            try:
                target.execute(statement)
                return
            except pymysql.err.OperationalError as exc:
                if exc.args[0] != 1213 or attempt == 19:
                    raise
    finally:
        target.execute("SET SESSION sql_log_bin = 1")


def running(cluster: Cluster, source: Database, target: Database, channel: str,
            **params: object) -> str:
    """The accounts, equal on both sides, and a running channel copying them; the schema."""
    schema = make_schema(source, target, ACCOUNTS)
    rows = ", ".join(f"({i}, 1000, 1)" for i in range(1, ROWS + 1))
    for db in (source, target):  # equal before the channel starts, outside the binlog
        db.execute("SET SESSION sql_log_bin = 0")
        db.execute(f"INSERT INTO `{schema}`.accounts VALUES {rows}")
        db.execute("SET SESSION sql_log_bin = 1")
    cluster.apply([one_way(channel, schema, ["accounts"], **params)])
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)
    return schema


def test_backfills_and_snapshots_racing_transfers_never_show_a_mixed_state(
        cluster: Cluster, source: Database, target: Database) -> None:
    channel = "invariant"
    schema = running(cluster, source, target, channel, snapshot_chunk_size=50,
                     free_door={"source": "target", "slice": 100})
    from manager import cli
    manager = ["--manager", cluster.manager_address]

    stop, moved, broken, reads = threading.Event(), [], [], []
    threads = [threading.Thread(target=transfers, args=(cluster, schema, stop, moved),
                                daemon=True) for _ in range(2)]
    threads.append(threading.Thread(target=watch, args=(cluster, schema, stop, broken, reads),
                                    daemon=True))
    for thread in threads:
        thread.start()
    keys = [(i,) for i in range(1, ROWS + 1)]
    try:
        wait_for(lambda: len(moved) > 50, 30, "the transfers")
        for round_ in range(3):
            # per instance (through the source's binlog) and central (on the target), the
            # same keys, and an ad-hoc snapshot of the whole table, all at once
            source.conn.cursor().executemany(BUFFER + "VALUES (%s, 'U', %s, NULL, NULL)", [
                (f"{schema}.accounts", encode_key(key)) for key in keys])
            target.conn.cursor().executemany(BUFFER + "VALUES (%s, 'I', %s, %s, 'forward')", [
                (f"{schema}.accounts", encode_key(key), channel) for key in keys])
            assert cli.main([*manager, "snapshot", channel, "--table",
                             f"{schema}.accounts"]) == 0
            wanted = 2 * ROWS * (round_ + 1)
            wait_for(lambda wanted=wanted: cluster.pipeline_state(channel).free_door.loaded
                     >= wanted, 120, f"backfill round {round_ + 1} served")
        wait_for(lambda: len(cluster.pipeline_state(channel).snapshots) == 3 and all(
            copy.state == "done" for copy in cluster.pipeline_state(channel).snapshots),
            120, "the snapshots done")
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert len(moved) > 200 and len(reads) > 50  # the race happened, and was watched
    assert broken == [], f"{len(broken)} broken reads, first: {broken[:5]}"
    wait_equal(source, target, schema, ["accounts"], 120)
    assert source.rows(f"SELECT SUM(balance) FROM `{schema}`.accounts") == [(TOTAL,)]
    wait_for(lambda: source.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE FULL_NAME = %s",
                                 (f"{schema}.accounts",)) == [(0,)] and
             target.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE CHANNEL_ID = %s",
                         (channel,)) == [(0,)], 30, "the buffers emptied")
    cluster.set_status(channel, "STOP")


def test_a_repair_racing_transfers_never_shows_a_mixed_state(
        cluster: Cluster, source: Database, target: Database, capsys) -> None:
    """``setl verify --repair`` mends target rows (through the central free door) while
    transfers change the same rows: the watcher sees the sum kept and no row go back, then
    verify finds the two sides equal."""
    channel = "mend"
    schema = running(cluster, source, target, channel, free_door={"source": "target"})
    from manager import cli
    manager = ["--manager", cluster.manager_address, "-o", "json"]
    stop, moved, broken, reads = threading.Event(), [], [], []
    movers = [threading.Thread(target=transfers, daemon=True, args=(  # not the last 20 rows
        cluster, schema, stop, moved, range(1, ROWS - 19))) for _ in range(2)]
    for thread in movers:
        thread.start()
    watcher = threading.Thread(target=watch, args=(cluster, schema, stop, broken, reads),
                               daemon=True)
    try:
        wait_for(lambda: len(moved) > 50, 30, "the transfers")
        # damage the target without touching the sum: a tenth of the rows with an old
        # version (a row a transfer then moves is mended by the stream, racing the repair;
        # the two the transfers leave alone only by the repair)
        damage(target, f"UPDATE `{schema}`.accounts SET version = version - 1000000 "
                       "WHERE id % 10 = 0")
        watcher.start()  # from the damaged state on: only forward
        capsys.readouterr()
        code = cli.main([*manager, "verify", channel, "--repair", "--chunk-size", "40"])
        report = json.loads(capsys.readouterr().out)
        wait_for(lambda: len(reads) > 20, 30, "the watcher's reads")
    finally:
        stop.set()
        for thread in [*movers, watcher]:
            if thread.is_alive():
                thread.join(60)
    [verdict] = report["reports"][0]["tables"]
    assert code == 0 and verdict.get("remaining", 0) == 0, json.dumps(report)
    assert int(verdict["repaired"]) >= 2 and len(moved) > 100
    assert broken == [], f"{len(broken)} broken reads, first: {broken[:5]}"
    wait_equal(source, target, schema, ["accounts"], 120)
    capsys.readouterr()
    assert cli.main([*manager, "verify", channel]) == 0, capsys.readouterr().out
    cluster.set_status(channel, "STOP")
