"""Two-way channels on two real MariaDB servers (both with binlogs): the loop mark stops
ping-pong, concurrent writes on both sides converge, and conflicting writes to one key are
reported and resolved by the rule (the channel's first pipeline wins)."""

from __future__ import annotations

import threading
import time
from typing import Any

import grpc
import pymysql
import pytest

from manager import cli
from node.target.mysql.ddlapply import INTENT_DDL
from shared.rpc import manager_pb2
from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, make_schema, wait_equal, wait_for

ITEMS = ("CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(30), "
         "qty INT NOT NULL DEFAULT 0)")


def two_way(name: str, schema: str) -> dict:
    pairs = [{"source": f"{schema}.items", "target": f"{schema}.items"}]
    return {"name": name, "pipelines": [
        {"name": "forward", "source": "source", "target": "target", "pairs": pairs,
         "batch_timeout_ms": 20},
        {"name": "backward", "source": "target", "target": "source", "pairs": pairs,
         "batch_timeout_ms": 20}]}


def set_and_wait(cluster: Cluster, name: str, status: str, state: str) -> None:
    cluster.set_status(name, status)

    def both() -> bool:
        info = cluster.call("GetChannel", manager_pb2.GetChannelRequest(name=name))
        return len(info.pipelines) == 2 and all(p.state == state for p in info.pipelines)
    wait_for(both, 90, f"both pipelines of {name} {state}")


def start(cluster: Cluster, name: str) -> None:
    set_and_wait(cluster, name, "START", "running")


def started_with_ddl(cluster: Cluster, name: str, schema: str) -> None:
    """Channel ``name`` two-way over ``schema``.items with ddl_sync both ways, running."""
    channel = two_way(name, schema)
    for pipeline in channel["pipelines"]:
        pipeline["ddl_sync"] = True
    cluster.apply([channel])
    start(cluster, name)


def master_position(db: Database) -> tuple:
    return tuple(db.rows("SHOW MASTER STATUS")[0][:2])


def test_concurrent_writes_on_both_sides_converge_without_ping_pong(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, ITEMS)
    cluster.apply([two_way("both-ways", schema)])
    start(cluster, "both-ways")
    t = f"`{schema}`.items"

    def writer(db: Database, first: int) -> None:
        for i in range(first, first + 150):
            db.execute(f"INSERT INTO {t} VALUES ({i}, 'born {i}', 0)")
            if i % 3 == 0:
                db.execute(f"UPDATE {t} SET qty = qty + 1 WHERE id = {i - 1}")
            if i % 10 == 0:
                db.execute(f"DELETE FROM {t} WHERE id = {i - 5}")

    threads = [threading.Thread(target=writer, args=(source, 1), daemon=True),
               threading.Thread(target=writer, args=(target, 1001), daemon=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads), "a writer did not finish"
    wait_equal(source, target, schema, ["items"])
    # rows that came over are changed again on the other side, and travel back once
    source.execute(f"UPDATE {t} SET name = 'edited on source' WHERE id BETWEEN 1001 AND 1010")
    target.execute(f"UPDATE {t} SET name = 'edited on target' WHERE id BETWEEN 1 AND 10")
    wait_equal(source, target, schema, ["items"])
    assert len(source.table(schema, "items")) == 2 * (150 - 15)
    # nothing travels any more: both binlogs stand still (a ping-pong would keep them moving)
    time.sleep(1.0)
    positions = master_position(source), master_position(target)
    time.sleep(2.0)
    assert (master_position(source), master_position(target)) == positions
    marks = target.rows("SELECT PIPELINE_ID FROM retl.retl_mark WHERE CHANNEL_ID = %s",
                        ("both-ways",))
    assert marks == [("both-ways.forward",)]
    cluster.set_status("both-ways", "STOP")


def test_a_key_written_on_both_sides_is_reported_and_the_first_pipeline_wins(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, ITEMS)
    cluster.apply([two_way("conflicts", schema)])
    start(cluster, "conflicts")
    t = f"`{schema}`.items"
    source.execute(f"INSERT INTO {t} VALUES (1, 'original', 1), (2, 'untouched', 2)")
    wait_equal(source, target, schema, ["items"])
    # both sides write while nothing replicates
    set_and_wait(cluster, "conflicts", "STOP", "not running")
    source.execute(f"UPDATE {t} SET name = 'from source', qty = 10 WHERE id = 1")
    target.execute(f"UPDATE {t} SET name = 'from target', qty = 20 WHERE id = 1")
    source.execute(f"INSERT INTO {t} VALUES (3, 'source insert', 3)")
    target.execute(f"INSERT INTO {t} VALUES (3, 'target insert', 30)")
    target.execute(f"UPDATE {t} SET qty = 22 WHERE id = 2")  # no conflict: only one side
    start(cluster, "conflicts")
    wait_equal(source, target, schema, ["items"])
    assert source.table(schema, "items") == [
        (1, "from source", 10), (2, "untouched", 22), (3, "source insert", 3)]
    log = cluster.nodes[1].output()
    conflicts = [line for line in log.splitlines() if "event=conflict" in line
                 and f"table={schema}.items" in line]
    assert any("resolution=source_wins" in line and "key=(1,)" in line and "from target" in line
               and "from source" in line for line in conflicts), conflicts
    assert any("resolution=target_kept" in line and "key=(3,)" in line for line in conflicts)
    assert not any("key=(2,)" in line for line in conflicts)
    cluster.set_status("conflicts", "STOP")


def test_a_key_moved_on_one_side_while_the_other_writes_a_key_converges(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The losing side (the target, B) moves a row to another key: each key is settled
    alone. Leaving the whole move out kept the old key on the source for good (A {1, 2},
    B {2}): the winner's change named only the new key."""
    schema = make_schema(source, target, ITEMS)
    cluster.apply([two_way("moves", schema)])
    start(cluster, "moves")
    t = f"`{schema}`.items"
    source.execute(f"INSERT INTO {t} VALUES (1, 'original', 1), (11, 'original', 11)")
    wait_equal(source, target, schema, ["items"])
    set_and_wait(cluster, "moves", "STOP", "not running")
    target.execute(f"UPDATE {t} SET id = 2 WHERE id = 1")  # B moves 1 → 2, A inserts 2
    source.execute(f"INSERT INTO {t} VALUES (2, 'source insert', 2)")
    target.execute(f"UPDATE {t} SET id = 12 WHERE id = 11")  # B moves 11 → 12, A updates 11
    source.execute(f"UPDATE {t} SET name = 'source update' WHERE id = 11")
    start(cluster, "moves")
    wait_equal(source, target, schema, ["items"])
    time.sleep(1.0)  # (equal on the way there would not be the end)
    wait_equal(source, target, schema, ["items"])
    assert source.table(schema, "items") == [
        (2, "source insert", 2), (11, "source update", 11), (12, "original", 11)]
    set_and_wait(cluster, "moves", "STOP", "not running")


def test_what_a_two_way_channel_cannot_keep_alike_is_refused_saying_why(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A pair writing part of a row and a keyless table are refused at apply; a MyISAM
    target table (its rows reach the binlog without the loop mark) when the channel
    starts, naming it."""
    schema = make_schema(source, target, ITEMS, "CREATE TABLE `{schema}`.logs (v INT)")
    channel = two_way("refused-both", schema)
    channel["pipelines"][0]["pairs"] = [{"source": f"{schema}.items",
                                         "target": f"{schema}.items",
                                         "column_groups": [["name", "qty"]]}]
    [error] = cluster.apply_errors([channel])
    assert "pipeline forward pair source:" in error and "has column_groups" in error, error
    channel = two_way("refused-both", schema)
    channel["pipelines"][1]["pairs"] = [{"source": f"{schema}.logs",
                                         "target": f"{schema}.logs"}]
    [error] = cluster.apply_errors([channel])
    assert f"table {schema}.logs (pair target:{schema}.logs) has no primary key" in error, error
    assert "the channel is two-way" in error
    target.execute(f"ALTER TABLE `{schema}`.items ENGINE=MyISAM")
    cluster.apply([two_way("refused-both", schema)])
    cluster.set_status("refused-both", "START")
    wait_for(lambda: "has engine MyISAM, which does not roll back" in
             cluster.pipeline_state("refused-both").last_error, 90, "the start refused")
    assert f"target table {schema}.items on target" in \
        cluster.pipeline_state("refused-both").last_error
    cluster.set_status("refused-both", "STOP")


def test_ddl_sync_on_a_two_way_channel_crosses_once(cluster: Cluster, source: Database,
                                                   target: Database) -> None:
    """A DDL commits on its own, so no loop mark can share its transaction: setl's DDL
    carries the channel's loop comment and the opposite pipeline drops it. An unnamed index
    that bounced would be added again on each crossing."""
    schema = make_schema(source, target, ITEMS)
    started_with_ddl(cluster, "ddl-both", schema)
    t = f"`{schema}`.items"

    def qty_indexes(db: Database) -> list[str]:
        return sorted({row[2] for row in db.rows(f"SHOW INDEX FROM {t}") if row[4] == "qty"})

    source.execute(f"ALTER TABLE {t} ADD INDEX (qty)")
    wait_for(lambda: qty_indexes(target) == ["qty"], 60, "the index on the target")
    target.execute(f"INSERT INTO {t} VALUES (1, 'after the DDL on the target', 0)")
    wait_for(lambda: source.rows(f"SELECT COUNT(*) FROM {t} WHERE id = 1")[0][0], 60,
             "the target's row after the DDL to cross back")  # the DDL's place passed too
    source.execute(f"INSERT INTO {t} VALUES (2, 'after that on the source', 0)")
    wait_for(lambda: target.rows(f"SELECT COUNT(*) FROM {t} WHERE id = 2")[0][0], 60,
             "the source's row to cross")
    assert qty_indexes(source) == ["qty"] and qty_indexes(target) == ["qty"]
    wait_equal(source, target, schema, ["items"])
    # the server writes a DROP TABLE as text of its own, without the loop comment: its echo
    # dropped the table made again meanwhile (and IF EXISTS went back and forth for ever)
    source.script(f"DROP TABLE IF EXISTS {t}", ITEMS.format(schema=schema),
                  f"INSERT INTO {t} VALUES (3, 'after the table came again', 0)")
    wait_for(lambda: target.rows(f"SELECT COUNT(*) FROM {t} WHERE id = 3")[0][0] if
             "items" in [r[0] for r in target.rows(f"SHOW TABLES FROM `{schema}`")] else 0,
             60, "the table made again, with its row, on the target")
    target.execute(f"INSERT INTO {t} VALUES (4, 'after that on the target', 0)")
    wait_for(lambda: source.rows(f"SELECT COUNT(*) FROM {t} WHERE id = 4")[0][0], 60,
             "the target's row after the DROP to cross back")
    wait_equal(source, target, schema, ["items"])
    assert [row[0] for row in source.table(schema, "items")] == [3, 4]
    set_and_wait(cluster, "ddl-both", "STOP", "not running")



def test_a_create_table_under_the_source_databases_defaults_leaves_both_databases_as_they_are(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A CREATE TABLE runs on the target between two ALTER DATABASE that give it the source
    database's defaults and put the target's back: without the loop mark the opposite
    pipeline replayed them on the source, whose database took the target's defaults."""
    schema = make_schema(source, target, ITEMS)
    source.execute(f"ALTER DATABASE `{schema}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    target.execute(f"ALTER DATABASE `{schema}` CHARACTER SET latin1 COLLATE latin1_swedish_ci")
    started_with_ddl(cluster, "defaults-both", schema)
    t = f"`{schema}`.items"
    source.script(f"DROP TABLE {t}", ITEMS.format(schema=schema))
    wait_for(lambda: "items" in [r[0] for r in target.rows(f"SHOW TABLES FROM `{schema}`")]
             and target.rows("SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE "
                             "TABLE_SCHEMA = %s AND TABLE_NAME = 'items'", (schema,))
             == [("utf8mb4_bin",)], 60, "the table made on the target")
    target.execute(f"INSERT INTO {t} VALUES (1, 'after the DDL on the target', 0)")
    wait_for(lambda: source.rows(f"SELECT COUNT(*) FROM {t} WHERE id = 1")[0][0], 60,
             "the target's row after the DDL to cross back")  # its ALTERs read by then

    def defaults(db: Database) -> list[tuple]:
        return db.rows("SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM "
                       "information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (schema,))
    assert defaults(source) == [("utf8mb4", "utf8mb4_bin")]
    assert defaults(target) == [("latin1", "latin1_swedish_ci")]
    set_and_wait(cluster, "defaults-both", "STOP", "not running")


def test_a_two_way_channel_copies_no_rows_and_says_why(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """A copy into one side cannot tell its rows from that side's newer writes not come
    over yet: start: snapshot, setl snapshot and a backfill request are refused, the last by
    pausing the channel before anything is written; the channel goes on once it is gone."""
    schema = make_schema(source, target, ITEMS)
    t = f"`{schema}`.items"
    copying = two_way("copy-both", schema)
    copying["pipelines"][0]["start"] = "snapshot"
    [error] = cluster.apply_errors([copying])
    assert "'start: snapshot' on a two-way channel" in error and "one-way channel" in error
    cluster.apply([two_way("copy-both", schema)])
    start(cluster, "copy-both")
    with pytest.raises(grpc.RpcError, match="cannot tell the rows it read"):
        cluster.call("Snapshot", manager_pb2.SnapshotRequest(
            channel="copy-both", pipeline="forward", table=f"{schema}.items"))
    capsys.readouterr()
    assert cli.main(["--manager", cluster.manager_address, "verify", "copy-both",
                     "--repair"]) != 0
    assert "a two-way channel takes no repair" in capsys.readouterr().err
    source.execute("SET SESSION sql_log_bin = 0")
    source.execute(f"INSERT INTO {t} VALUES (1, 'only on the source', 0)")
    source.execute("SET SESSION sql_log_bin = 1")
    source.execute("INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA) VALUES "
                   f"('{schema}.items', 'I', '[1]')")
    wait_for(lambda: "takes no snapshot, backfill or verify repair" in
             cluster.pipeline_state("copy-both").last_error, 90, "the request refused")
    assert target.table(schema, "items") == []
    source.execute(f"DELETE FROM retl.retl_buffer WHERE FULL_NAME = '{schema}.items'")
    cluster.set_status("copy-both", "STOP")
    start(cluster, "copy-both")
    target.execute(f"INSERT INTO {t} VALUES (2, 'from the target', 0)")
    wait_for(lambda: source.rows(f"SELECT name FROM {t} WHERE id = 2"), 60, "the stream")
    cluster.set_status("copy-both", "STOP")


@pytest.mark.parametrize("columns, rows, one", [
    ("k BINARY(4) PRIMARY KEY, v INT", "(X'61620000', 1), (X'00000000', 1)", "k = X'61620000'"),
    ("id INT PRIMARY KEY, f FLOAT, b BIT(3), d DOUBLE, v INT",
     "(1, 0.1, b'101', 0.1, 1), (2, 1234.567, b'000', 1e-7, 1), (3, NULL, NULL, NULL, 1)",
     "id = 1"),
], ids=["binary-keys-ending-in-zero-bytes", "float-and-bit-columns"])
def test_rows_a_select_gives_otherwise_than_the_binlog_cross_both_ways_without_a_conflict(
        cluster: Cluster, source: Database, target: Database, columns: str, rows: str,
        one: str) -> None:
    """The conflict check reads the target's rows and compares them with the binlog's
    images: BINARY keys the binlog gives without the zero bytes that pad them must still
    find their rows, and a FLOAT (six digits in a SELECT, its single-precision value in the
    binlog) or a BIT (bytes; a number) must compare equal — else the second pipeline took its
    own changes for conflicts and left them out (every update of a row holding a FLOAT)."""
    schema = make_schema(source, target, f"CREATE TABLE `{{schema}}`.t ({columns})")
    name = f"both-{columns.split()[0]}"
    channel = two_way(name, schema)
    for pipeline in channel["pipelines"]:
        pipeline["pairs"] = [{"source": f"{schema}.t", "target": f"{schema}.t"}]
    cluster.apply([channel])
    start(cluster, name)
    t = f"`{schema}`.t"
    source.execute(f"INSERT INTO {t} VALUES {rows}")
    wait_equal(source, target, schema, ["t"])
    target.execute(f"UPDATE {t} SET v = 2")  # the second pipeline's: it loses conflicts
    wait_for(lambda: source.rows(f"SELECT SUM(v) = 2 * COUNT(*) FROM {t}") == [(1,)], 60,
             "the update back")
    source.execute(f"UPDATE {t} SET v = 3 WHERE {one}")
    wait_equal(source, target, schema, ["t"])
    log = cluster.nodes[1].output()
    assert not [line for line in log.splitlines()
                if "event=conflict" in line and f"table={schema}.t" in line]
    cluster.set_status(name, "STOP")


def test_a_losing_sides_change_of_the_winners_row_read_in_one_batch_with_its_conflict_crosses(
        cluster: Cluster, sandbox: Sandbox, source: Database, target: Database) -> None:
    """A: v0 → vA; B: v0 → vB; the winner writes vA on B; a B user then runs vA → vB2. The
    loser reads B's v0 → vB and vA → vB2 in one batch: the first conflicts and is left out,
    the second follows A's row and crosses. Comparing both with the key's first before image
    (v0) left both out: A = vA, B = vB2 for good. (The loser's batch before them waits on a
    lock held on A, so the two gather in one batch behind it.)"""
    schema = make_schema(source, target, ITEMS)
    channel = two_way("one-batch", schema)
    channel["pipelines"][1]["batch_timeout_ms"] = 20000
    cluster.apply([channel])
    start(cluster, "one-batch")
    t = f"`{schema}`.items"
    source.execute(f"INSERT INTO {t} VALUES (1, 'v0', 0), (2, 'blocker', 0)")
    wait_equal(source, target, schema, ["items"])
    on_a, on_b = Database(sandbox, "source"), Database(sandbox, "target")
    try:
        on_a.script("BEGIN", f"SELECT * FROM {t} WHERE id = 2 FOR UPDATE")
        target.execute(f"UPDATE {t} SET qty = 5 WHERE id = 2")  # the loser's batch waits
        on_b.script("BEGIN", f"UPDATE {t} SET name = 'vB' WHERE id = 1")
        source.execute(f"UPDATE {t} SET name = 'vA' WHERE id = 1")  # the winner's waits
        on_b.execute("COMMIT")
        wait_for(lambda: target.rows(f"SELECT name FROM {t} WHERE id = 1") == [("vA",)], 30,
                 "the winner's row on the target")
        target.execute(f"UPDATE {t} SET name = 'vB2' WHERE id = 1")
        time.sleep(1.0)  # (no condition to wait on: the loser reads it into its open batch)
    finally:
        on_a.execute("ROLLBACK")
        on_a.close()
        on_b.close()
    wait_for(lambda: source.rows(f"SELECT name FROM {t} WHERE id = 1") == [("vB2",)], 60,
             "the target user's change of the winner's row on the source")
    wait_equal(source, target, schema, ["items"])
    assert source.table(schema, "items") == [(1, "vB2", 0), (2, "blocker", 5)]
    set_and_wait(cluster, "one-batch", "STOP", "not running")


def test_target_tables_whose_rows_the_conflict_check_cannot_tell_apart_are_refused_at_start(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The write (INSERT … ON DUPLICATE KEY UPDATE) finds a row by every unique key and by
    the server's collation, the conflict check by one key's exact value: a second unique key
    or a case-insensitive key let each side's insert overwrite the other's row unseen. A
    trigger's rows ride in setl's marked transaction and never cross back. Each is refused
    when the channel starts, naming the table."""
    schema = make_schema(source, target, ITEMS)
    t = f"`{schema}`.items"
    cluster.apply([two_way("unsafe-both", schema)])

    def refused(why: str) -> str:
        cluster.set_status("unsafe-both", "START")
        wait_for(lambda: why in cluster.pipeline_state("unsafe-both").last_error, 90,
                 f"the start refused: {why}")
        cluster.set_status("unsafe-both", "STOP")
        return cluster.pipeline_state("unsafe-both").last_error

    target.execute(f"ALTER TABLE {t} ADD UNIQUE KEY by_name (name)")
    error = refused("has 2 unique keys (PRIMARY, by_name)")
    assert f"target table {schema}.items on target has 2 unique keys" in error, error
    target.execute(f"ALTER TABLE {t} DROP KEY by_name")
    for db in (source, target):
        db.script(f"ALTER TABLE {t} DROP PRIMARY KEY",
                  f"ALTER TABLE {t} MODIFY name VARCHAR(30) CHARACTER SET utf8mb4 COLLATE "
                  "utf8mb4_general_ci NOT NULL", f"ALTER TABLE {t} ADD PRIMARY KEY (name)")
    error = refused("key column name has collation utf8mb4_general_ci")
    assert "COLLATE utf8mb4_nopad_bin" in error, error
    for db in (source, target):
        db.execute(f"ALTER TABLE {t} MODIFY name VARCHAR(30) CHARACTER SET utf8mb4 COLLATE "
                   "utf8mb4_nopad_bin NOT NULL")
    target.execute(f"CREATE TRIGGER `{schema}`.audit BEFORE INSERT ON {t} FOR EACH ROW "
                   "SET NEW.qty = NEW.qty + 1")
    refused(f"target table {schema}.items on target has trigger audit")
    target.execute(f"DROP TRIGGER `{schema}`.audit")
    for db in (source, target):  # ids numbered alike on both sides: 1, 2, 3…
        db.execute(f"ALTER TABLE {t} MODIFY id INT NOT NULL AUTO_INCREMENT, ADD KEY (id)")
    refused("numbers rows by AUTO_INCREMENT column id, and source and target number alike")
    for db in (source, target):
        db.execute(f"ALTER TABLE {t} MODIFY id INT NOT NULL, DROP KEY id")
    start(cluster, "unsafe-both")
    source.execute(f"INSERT INTO {t} VALUES (1, 'abc', 0)")
    target.execute(f"INSERT INTO {t} VALUES (2, 'ABC', 0)")
    wait_for(lambda: len(source.table(schema, "items")) == 2 == len(
        target.table(schema, "items")), 60, "both rows on both sides")
    wait_equal(source, target, schema, ["items"])
    set_and_wait(cluster, "unsafe-both", "STOP", "not running")


def test_a_target_users_insert_cannot_land_between_the_check_and_the_write_under_read_committed(
        cluster: Cluster, sandbox: Sandbox, source: Database, target: Database) -> None:
    """Under READ COMMITTED (here the source server's default) the check's SELECT … FOR
    UPDATE of a missing key locked nothing: a source user's insert of that key between the
    check and the write was overwritten by the loser, while the winner wrote it over the
    target's row (A = B's row, B = A's, for good). Two-way loads run REPEATABLE READ: the
    insert waits for the load (and here times out), and both sides keep the target's row."""
    schema = make_schema(source, target, ITEMS)
    t = f"`{schema}`.items"
    source.execute("SET GLOBAL TRANSACTION ISOLATION LEVEL READ COMMITTED")
    on_a, user = Database(sandbox, "source"), Database(sandbox, "source")
    try:
        cluster.apply([two_way("read-committed", schema)])
        start(cluster, "read-committed")
        source.execute(f"INSERT INTO {t} VALUES (9, 'blocker', 0)")
        wait_equal(source, target, schema, ["items"])
        on_a.script("BEGIN", f"SELECT * FROM {t} WHERE id = 9 FOR UPDATE")
        target.script("BEGIN", f"INSERT INTO {t} VALUES (1, 'target insert', 1)",
                      f"UPDATE {t} SET qty = 5 WHERE id = 9", "COMMIT")
        wait_for(lambda: source.rows("SELECT COUNT(*) FROM information_schema.INNODB_TRX "
                                     "WHERE trx_state = 'LOCK WAIT'")[0][0] > 0, 30,
                 "the loser's check waiting on id 9, past id 1")
        user.execute("SET SESSION innodb_lock_wait_timeout = 1")
        with pytest.raises(pymysql.err.OperationalError, match="Lock wait timeout"):
            user.execute(f"INSERT INTO {t} VALUES (1, 'source insert', 2)")  # the load's gap
    finally:
        source.execute("SET GLOBAL TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        on_a.execute("ROLLBACK")
        on_a.close()
        user.close()
    wait_for(lambda: source.rows(f"SELECT qty FROM {t} WHERE id = 9") == [(5,)], 60,
             "the loser's batch on the source")
    wait_equal(source, target, schema, ["items"])
    time.sleep(1.0)  # (equal on the way there would not be the end)
    wait_equal(source, target, schema, ["items"])
    set_and_wait(cluster, "read-committed", "STOP", "not running")


def test_a_replay_of_a_two_way_pipeline_is_refused_saying_what_to_do_instead(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """A replay of the first pipeline wrote its source's older changes over the other side's
    later ones (echoes in its binlog, skipped): setl position set to an earlier place, and a
    reset to a start: that is a place, are refused; --latest (nothing loaded again) is not."""
    schema = make_schema(source, target, ITEMS)
    t = f"`{schema}`.items"
    file, pos = master_position(source)
    channel = two_way("replay-both", schema)
    channel["pipelines"][0]["start"] = {"file": file, "pos": int(pos)}
    cluster.apply([channel])
    start(cluster, "replay-both")
    source.execute(f"INSERT INTO {t} VALUES (1, 'v0', 0)")
    wait_equal(source, target, schema, ["items"])
    target.execute(f"UPDATE {t} SET name = 'later on the target' WHERE id = 1")
    wait_equal(source, target, schema, ["items"])
    set_and_wait(cluster, "replay-both", "STOP", "not running")
    position = ["--manager", cluster.manager_address, "position"]
    capsys.readouterr()
    assert cli.main([*position, "set", "replay-both/forward", "--file", file, "--pos",
                     str(pos), "--replay"]) == 1
    refused = capsys.readouterr().err
    assert "pipeline replay-both.forward is on a two-way channel: a start at" in refused, \
        refused
    assert "setl position set replay-both/forward --latest" in refused, refused
    assert cli.main([*position, "reset", "replay-both"]) == 1
    assert "setl position reset (the next start loads again from the definition's start:) " \
        "is refused" in capsys.readouterr().err
    assert cli.main([*position, "set", "replay-both/forward", "--latest"]) == 0
    start(cluster, "replay-both")
    source.execute(f"INSERT INTO {t} VALUES (2, 'after', 0)")
    wait_equal(source, target, schema, ["items"])
    assert source.table(schema, "items") == [(1, "later on the target", 0), (2, "after", 0)]
    set_and_wait(cluster, "replay-both", "STOP", "not running")


def test_json_looking_text_changed_on_both_sides_is_a_conflict_and_converges(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A VARCHAR holding JSON-looking text is text: each side rewrites the same document
    with its keys in another order. Compared as parsed JSON the loser saw no conflict and
    wrote its side's text over the winner's, while the winner wrote its own on the other
    side: the two sides swapped texts and differed for good."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.docs (id INT PRIMARY KEY, "
                         "doc VARCHAR(60) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)")
    channel = two_way("json-text-both", schema)
    for pipeline in channel["pipelines"]:
        pipeline["pairs"] = [{"source": f"{schema}.docs", "target": f"{schema}.docs"}]
    cluster.apply([channel])
    start(cluster, "json-text-both")
    t = f"`{schema}`.docs"
    source.execute(f"""INSERT INTO {t} VALUES (1, '{{"a": 1, "b": 2}}')""")
    wait_equal(source, target, schema, ["docs"])
    set_and_wait(cluster, "json-text-both", "STOP", "not running")
    source.execute(f"""UPDATE {t} SET doc = '{{"b": 2, "a": 1}}' WHERE id = 1""")
    target.execute(f"""UPDATE {t} SET doc = '{{"a":1,"b":2}}' WHERE id = 1""")
    start(cluster, "json-text-both")
    wait_equal(source, target, schema, ["docs"])
    time.sleep(1.0)  # (equal on the way there would not be the end)
    wait_equal(source, target, schema, ["docs"])
    assert source.table(schema, "docs") == [(1, '{"b": 2, "a": 1}')]
    log = cluster.nodes[1].output()
    assert any("event=conflict" in line and f"table={schema}.docs" in line and
               "resolution=target_kept" in line for line in log.splitlines())
    set_and_wait(cluster, "json-text-both", "STOP", "not running")


def test_a_drop_that_never_ran_on_the_other_side_does_not_swallow_a_later_drop_there(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A DROP replayed on the target of a table the target no longer had fails there and is
    taken as applied: its intent reached the target's binlog, the DROP never did. The
    opposite pipeline kept that intent and took the target users' own DROP of the name,
    much later, for its echo: the table stayed on the source for good."""
    schema = make_schema(source, target, ITEMS)
    channel = two_way("drop-intent-both", schema)
    for pipeline in channel["pipelines"]:
        pipeline["ddl_sync"] = True
        pipeline["pairs"] = [{"source": f"{schema}.{name}", "target": f"{schema}.{name}"}
                             for name in ("items", "marker")]
    cluster.apply([channel])
    start(cluster, "drop-intent-both")
    t = f"`{schema}`.items"

    def has_items(db: Database) -> bool:
        return "items" in [row[0] for row in db.rows(f"SHOW TABLES FROM `{schema}`")]

    target.script("SET SESSION sql_log_bin = 0", f"DROP TABLE {t}",
                  "SET SESSION sql_log_bin = 1")  # gone on the target alone, unseen
    source.execute(f"DROP TABLE {t}")  # replayed on the target: no such table there
    source.execute(f"CREATE TABLE `{schema}`.marker (id INT PRIMARY KEY)")
    wait_for(lambda: "marker" in [row[0] for row in target.rows(f"SHOW TABLES FROM `{schema}`")],
             60, "the DDL after the DROP on the target")
    target.execute(ITEMS.format(schema=schema))  # made again on the target: it crosses
    wait_for(lambda: has_items(source), 60, "the table made again on the source")
    target.execute(f"INSERT INTO {t} VALUES (1, 'made on the target', 0)")
    wait_equal(source, target, schema, ["items"])
    target.execute(f"DROP TABLE {t}")  # the target users' own: it crosses
    wait_for(lambda: not has_items(source), 60, "the target's DROP on the source")
    source.execute(f"INSERT INTO `{schema}`.marker VALUES (1)")
    wait_equal(source, target, schema, ["marker"])
    assert not has_items(source) and not has_items(target)
    set_and_wait(cluster, "drop-intent-both", "STOP", "not running")


def test_a_drop_whose_intent_was_read_before_a_restart_is_still_not_sent_back(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The forward pipeline's replay of a DROP on the target: its intent, then the DROP (as
    the server writes it, without the loop comment), played here by hand, the channel
    stopped between them. The backward pipeline loaded the stretch up to the intent: its
    position rested between the two, and restarted there it knew no intent, took the DROP
    for the target users' and ran it on the source, where the table had been made again
    meanwhile. No batch ends between an intent and its DROP now."""
    schema = make_schema(source, target, ITEMS)
    started_with_ddl(cluster, "drop-restart-both", schema)
    t = f"`{schema}`.items"
    made_again = [ITEMS.format(schema=schema), f"INSERT INTO {t} VALUES (3, 'made again', 0)"]
    # the source's users drop the table and make it again (their DDL: by hand, unlogged)
    source.script("SET SESSION sql_log_bin = 0", f"DROP TABLE {t}", *made_again,
                  "SET SESSION sql_log_bin = 1")
    target.execute(INTENT_DDL)
    target.execute("INSERT INTO retl.retl_ddl VALUES (%s, 'binlog.000001', 4, 0, %s, %s)",
                   ("drop-restart-both.forward", "0" * 64, f"DROP TABLE {t}"))
    file, pos = master_position(target)

    def loaded() -> bool:
        rows = source.rows("SELECT binlog_file, binlog_pos FROM retl.retl_position WHERE "
                           "pipeline_id = 'drop-restart-both.backward'")
        return bool(rows) and (rows[0][0], int(rows[0][1])) >= (file, int(pos))
    # a position-only batch goes at least every second: within seconds one would end past
    # the intent, and no batch may end there before its DROP came
    deadline = time.monotonic() + 4.0
    while not loaded() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not loaded(), "the backward pipeline's position rests between intent and DROP"
    set_and_wait(cluster, "drop-restart-both", "STOP", "not running")
    target.execute(f"DROP TABLE {t}")  # the forward pipeline's, after its intent
    target.script("SET SESSION sql_log_bin = 0", *made_again, "SET SESSION sql_log_bin = 1")
    target.execute("DELETE FROM retl.retl_ddl WHERE pipeline_id = 'drop-restart-both.forward'")
    start(cluster, "drop-restart-both")
    target.execute(f"INSERT INTO {t} VALUES (4, 'after the restart', 0)")
    wait_for(lambda: source.rows(f"SELECT COUNT(*) FROM {t} WHERE id = 4")[0][0]
             if "items" in [r[0] for r in source.rows(f"SHOW TABLES FROM `{schema}`")] else 0,
             60, "the target's row after the DROP on the source")
    wait_equal(source, target, schema, ["items"])
    assert [row[0] for row in source.table(schema, "items")] == [3, 4]
    set_and_wait(cluster, "drop-restart-both", "STOP", "not running")


def test_the_winner_changes_places_only_while_the_channel_is_stopped(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The first pipeline wins conflicts: its pipelines given in the other order while the
    channel runs, each runner takes the new definition at its own time, and both sides could
    win (each keeping the other's row). Apply refuses it; stopped, it applies."""
    schema = make_schema(source, target, ITEMS)
    channel = two_way("swap-winner", schema)
    cluster.apply([channel])
    start(cluster, "swap-winner")
    swapped = {**channel, "pipelines": list(reversed(channel["pipelines"]))}
    [error] = cluster.apply_errors([swapped])
    assert "channel swap-winner: pipeline backward would be first, and win conflicts, in " \
        "place of forward while the channel runs" in error, error
    cluster.set_status("swap-winner", "STOP")
    assert cluster.apply_errors([swapped]) == []
