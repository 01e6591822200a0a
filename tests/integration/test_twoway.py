"""Two-way channels on two real MariaDB servers (both with binlogs): the loop mark stops
ping-pong, concurrent writes on both sides converge, and conflicting writes to one key are
reported and resolved by the rule (the channel's first pipeline wins). DDL both ways:
test_twoway_ddl.py; what a two-way channel refuses: test_twoway_refusals.py."""

from __future__ import annotations

import threading
import time

import pymysql
import pytest

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
