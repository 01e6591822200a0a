"""Rows a window read onto a target out of step with another unique key (the case
snapshots and backfills are run for): a row read whose unique value another target row
holds under another key never lands on that row (its upsert would update the other row,
key kept: the row read lost, the other holding an image the source never had). The row so
displaced is removed, and copied again: by its own chunk (a snapshot), or by a request the
node keeps for it (a backfill whose keys do not name it). A racing writer changes the
table meanwhile; the keyless, unique-swap and sum tables ride along in the pipeline; the
target ends equal to the source as multisets."""

from __future__ import annotations

import random
import struct
import threading
from collections.abc import Callable
from typing import Any

import pytest

from manager import cli
from shared.retl import encode_key
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside
from tests.integration.shapes import channel as shapes_channel

U = ("CREATE TABLE `{schema}`.u (id INT PRIMARY KEY, slot INT NOT NULL, note VARCHAR(20), "
     "UNIQUE KEY us (slot))")
ROWS = 300  # source rows 1..ROWS, slot = id
CLEAN = 100  # ids 1..CLEAN: the target holds them as the source does (the writer's)


def without_binlog(db: Database, sql: str) -> None:
    db.execute("SET SESSION sql_log_bin = 0")
    try:
        db.execute(sql)
    finally:
        db.execute("SET SESSION sql_log_bin = 1")


def out_of_step(source: Database, target: Database, schema: str) -> None:
    """Source: (i, slot i) for 1..ROWS. Target: the first CLEAN rows as they are; 101..200
    each holding the next one's slot (200 holds 101's); 1001..1020 only on the target,
    holding the slots of 201..220; 201..300 missing."""
    t = f"`{schema}`.u"
    without_binlog(source, f"INSERT INTO {t} VALUES " + ", ".join(
        f"({i}, {i}, 'src {i}')" for i in range(1, ROWS + 1)))
    stale = [(i, i, f"src {i}") for i in range(1, CLEAN + 1)] + \
        [(i, i + 1 if i < 200 else 101, f"stale {i}") for i in range(101, 201)] + \
        [(1000 + i, 200 + i, f"extra {i}") for i in range(1, 21)]
    without_binlog(target, f"INSERT INTO {t} VALUES " + ", ".join(
        f"({i}, {s}, '{n}')" for i, s, n in stale))


def racing(db: Database, schema: str, stop: threading.Event, table: str = "u",
           unique: Callable[[int, str], str] = lambda key, _: str(key), seed: int = 5
           ) -> None:
    """Changes of the rows the target holds in step, and new rows of free unique values
    (``unique``: the SQL of a key's value of the unique column, by what the row is)."""
    rng, t, born = random.Random(seed), f"`{schema}`.{table}", 5000
    while not stop.is_set():
        key = rng.randint(1, CLEAN)
        kind = rng.randrange(3)
        if kind == 0:
            db.execute(f"UPDATE {t} SET note = 'hot {key}' WHERE id = {key}")
        elif kind == 1:
            db.execute(f"DELETE FROM {t} WHERE id = {key}")
            db.execute(f"INSERT IGNORE INTO {t} VALUES ({key}, {unique(key, 'reborn')}, "
                       f"'reborn {key}')")
        else:
            born += 1
            db.execute(f"INSERT INTO {t} VALUES ({born}, {unique(born, 'born')}, 'born')")
        stop.wait(0.01)


def raced(cluster: Cluster, schema: str, shapes: Shapes, serve: Callable[[], None],
          *writer: Any) -> None:
    """``serve`` with a :func:`racing` writer (``writer``: its table, unique values and
    seed) changing the source, and the workload's tables written after it."""
    stop = threading.Event()
    db = Database(cluster.sandbox, "source")
    thread = threading.Thread(target=racing, args=(db, schema, stop, *writer), daemon=True)
    thread.start()
    try:
        serve()
        shapes.keep_on(transactions=50, reads=10)
    finally:
        stop.set()
        thread.join(60)
        db.close()
    assert not thread.is_alive(), "the racing writer did not stop"


def backfill_one(cluster: Cluster, target: Database, channel: str, schema: str, table: str,
                 key: Any) -> None:
    """A one-way channel over ``table`` with a central free door on the target, running,
    and a request for ``key``."""
    cluster.apply([one_way(channel, schema, [table], free_door={"source": "target"})])
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)
    target.execute("INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA, CHANNEL_ID, "
                   "PIPELINE_ID) VALUES (%s, 'I', %s, %s, 'forward')",
                   (f"{schema}.{table}", encode_key((key,)), channel))


def run(cluster: Cluster, source: Database, target: Database, channel: str, seed: int,
        serve) -> None:
    """The damage, a channel over it (with the workload's tables), a racing writer while
    ``serve(schema)`` asks for the copy; equal at the end."""
    schema = make_schema(source, target, U)
    out_of_step(source, target, schema)
    shapes = Shapes(cluster.sandbox, source, target, seed=seed)
    cluster.apply([beside(one_way(channel, schema, ["u"], snapshot_chunk_size=40,
                                  free_door={"source": "target"}), shapes.schema)])
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)
    shapes.start()
    raced(cluster, schema, shapes, lambda: serve(schema))
    try:
        wait_equal(source, target, schema, ["u"], timeout_s=120)
        shapes.finish(source)
    finally:
        shapes.stop()
    log = cluster.nodes[1].output()
    assert any("event=displaced_rows " in line and f"pipeline={channel}.forward " in line
               for line in log.splitlines()), "no row displaced: the damage was not met"
    # 1001..1020 (the target's only) displaced, asked again, missing from the source: said
    assert any("event=displaced_rows_missing " in line and f"pipeline={channel}.forward " in
               line for line in log.splitlines()), "a row deleted for good not said"
    cluster.set_status(channel, "STOP")


def test_a_snapshot_onto_a_target_out_of_step_copies_every_row_to_its_own_key(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Chunks of 40 rows: a row read displaces a target row of the chunk before or after
    it, or one the source lacks; each is copied by its own chunk or deleted for good."""
    def serve(schema: str) -> None:
        assert cli.main(["--manager", cluster.manager_address, "snapshot", "dr-snap",
                         "--table", f"{schema}.u"]) == 0
        wait_for(lambda: [c.state for c in cluster.pipeline_state("dr-snap").snapshots]
                 == ["done"], 120, "the copy done")

    run(cluster, source, target, "dr-snap", 41, serve)


def test_a_backfill_copies_again_the_rows_it_displaced_outside_its_keys(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Requests for every other row of 101..200 and for 201..220: each row read displaces a
    row its requests do not name (the next one, or a row the source lacks). Those are asked
    again by the node and copied in a later window; 221..300 were never asked for, so the
    source's rows 221..300 are asked for too to end equal."""
    def serve(schema: str) -> None:
        keys = [(i,) for i in range(101, 201, 2)] + [(i,) for i in range(201, ROWS + 1)]
        target.conn.cursor().executemany(
            "INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA, CHANNEL_ID, PIPELINE_ID) "
            "VALUES (%s, 'I', %s, 'dr-door', 'forward')",
            [(f"{schema}.u", encode_key(key)) for key in keys])
        wait_for(lambda: target.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE "
                                     "CHANNEL_ID = 'dr-door'") == [(0,)], 120, "served")
        # the keys displaced outside the requests, asked again (each served once at least)
        wait_for(lambda: source.rows("SELECT COUNT(*) FROM retl.retl_pending WHERE "
                                     "PIPELINE_ID = 'dr-door.forward'") == [(0,)], 120,
                 "the rows displaced asked again and served")
        # the rows the source lacks (1001..1020) deleted: a D request each
        target.conn.cursor().executemany(
            "INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA, CHANNEL_ID, PIPELINE_ID) "
            "VALUES (%s, 'D', %s, 'dr-door', 'forward')",
            [(f"{schema}.u", encode_key((1000 + i,))) for i in range(1, 21)])

    run(cluster, source, target, "dr-door", 43, serve)


def test_the_reviewers_backfill_of_one_key(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Source (1, 5, 'one'), (2, 6, 'two'); target only (2, 5, 'stale'); a request for key
    1 alone: row 1 is written, row 2 (displaced) copied again by the node's own request."""
    schema = make_schema(source, target, U)
    without_binlog(source, f"INSERT INTO `{schema}`.u VALUES (1, 5, 'one'), (2, 6, 'two')")
    without_binlog(target, f"INSERT INTO `{schema}`.u VALUES (2, 5, 'stale')")
    backfill_one(cluster, target, "dr-one", schema, "u", 1)
    wait_equal(source, target, schema, ["u"], timeout_s=60)
    assert target.table(schema, "u") == [(1, 5, "one"), (2, 6, "two")]
    cluster.set_status("dr-one", "STOP")


@pytest.mark.parametrize(("kind", "one", "two", "asked"), [
    ("FLOAT", "0.1", "0.2", struct.unpack("<f", struct.pack("<f", 0.1))[0]),  # (its double)
    ("BIT(8)", "b'1'", "b'10'", 1),  # (as a number)
    # (as its bytes; padded: its row read was compared with the key unmended, and the
    # request noted missing — the row "deleted for good" — though it was written)
    ("VARCHAR(10) CHARACTER SET big5", "'中一'", "'中二'", "中一".encode("big5")),
    ("BINARY(4)", "'ab'", "'cd'", b"ab\0\0"),
])
def test_a_row_displaced_is_asked_again_by_its_key_as_the_node_reads_keys(
        cluster: Cluster, source: Database, target: Database, kind: str, one: str, two: str,
        asked: Any) -> None:
    """The reviewer's backfill keyed by a FLOAT or a BIT, its key written as `setl backfill`
    writes it: the displaced row was asked again by its key as the server prints it (a
    FLOAT's 0.2, a BIT's bytes), which named no source row — it came back missing and stayed
    deleted (a review). It is asked by the key as the node reads keys."""
    schema = make_schema(source, target, U.replace("id INT", f"id {kind}"))
    without_binlog(source, f"INSERT INTO `{schema}`.u VALUES ({one}, 5, 'one'), "
                   f"({two}, 6, 'two')")
    without_binlog(target, f"INSERT INTO `{schema}`.u VALUES ({two}, 5, 'stale')")
    channel = f"dr-{kind.split('(')[0].lower()}-{len(kind)}"
    backfill_one(cluster, target, channel, schema, "u", asked)
    wait_for(lambda: target.rows(f"SELECT note FROM `{schema}`.u ORDER BY slot") ==
             [("one",), ("two",)], 60, "both rows at their own keys")
    wait_equal(source, target, schema, ["u"], timeout_s=60)
    from tests.integration.test_displaced_loops import events  # (it imports this module)
    assert len(events(cluster, channel, "displaced_rows")) == 1
    assert not events(cluster, channel, "displaced_rows_missing")
    cluster.set_status(channel, "STOP")


def test_a_row_displaced_in_a_table_two_source_tables_feed_is_asked_of_each(
        cluster: Cluster, source: Database, target: Database) -> None:
    """t1 and t2 feed g; a backfill of t1's key 1 displaces g's row 2, which is t2's: it is
    asked of both source tables (t1 lacks it: noted missing), not of t1 alone (a review:
    asked of t1 only, it never came back)."""
    schema = make_schema(source, target, U.replace(".u ", ".t1 "))
    source.execute(U.replace(".u ", ".t2 ").format(schema=schema))
    target.execute(f"RENAME TABLE `{schema}`.t1 TO `{schema}`.g")
    without_binlog(source, f"INSERT INTO `{schema}`.t1 VALUES (1, 5, 'one')")
    without_binlog(source, f"INSERT INTO `{schema}`.t2 VALUES (2, 6, 'two')")
    without_binlog(target, f"INSERT INTO `{schema}`.g VALUES (2, 5, 'stale')")
    cluster.apply([{"name": "dr-gather", "pipelines": [{
        "name": "forward", "source": "source", "target": "target",
        "pairs": [{"source": f"{schema}.t1", "target": f"{schema}.g"},
                  {"source": f"{schema}.t2", "target": f"{schema}.g"}],
        "free_door": {"source": "target"}}]}])
    cluster.set_status("dr-gather", "START")
    cluster.wait_running("dr-gather")
    target.execute("INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA, CHANNEL_ID, "
                   "PIPELINE_ID) VALUES (%s, 'I', %s, 'dr-gather', 'forward')",
                   (f"{schema}.t1", encode_key((1,))))
    wanted = [(1, 5, "one"), (2, 6, "two")]
    wait_for(lambda: target.table(schema, "g") == wanted, 60, "both rows on g")
    cluster.set_status("dr-gather", "STOP")


def test_a_row_displaced_is_copied_again_after_a_kill_9(sandbox, tmp_path) -> None:
    """The reviewer's backfill of key 1 alone, but the target refuses row 2's copy (a
    trigger): the window that serves the node's own request for row 2 cannot load. The node
    is killed (-9) while it retries; once the target takes the row again, the restarted
    node serves the request it kept in retl_pending. A second channel on the node streams
    the keyless, unique-swap and sum tables through the kill: equal as multisets at the
    end."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    shapes = Shapes(sandbox, source, target, seed=47)
    cluster = Cluster(sandbox, tmp_path, "displaced-kill")
    try:
        schema = make_schema(source, target, U)
        without_binlog(source, f"INSERT INTO `{schema}`.u VALUES (1, 5, 'one'), (2, 6, 'two')")
        without_binlog(target, f"INSERT INTO `{schema}`.u VALUES (2, 5, 'stale')")
        target.execute(f"CREATE TRIGGER `{schema}`.not_two BEFORE INSERT ON `{schema}`.u FOR "
                       "EACH ROW BEGIN IF NEW.id = 2 THEN SIGNAL SQLSTATE '45000' SET "
                       "MESSAGE_TEXT = 'not now'; END IF; END")
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([one_way("dk", schema, ["u"], free_door={"source": "target"},
                               max_retries=1000, fire_target_triggers=True),
                       shapes_channel("dk-shapes", shapes.schema)])
        for name in ("dk", "dk-shapes"):
            cluster.set_status(name, "START")
            cluster.wait_running(name)
        shapes.start()
        target.execute("INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA, CHANNEL_ID, "
                       "PIPELINE_ID) VALUES (%s, 'I', %s, 'dk', 'forward')",
                       (f"{schema}.u", encode_key((1,))))
        wait_for(lambda: target.table(schema, "u") == [(1, 5, "one")], 60,
                 "row 1 written, row 2 displaced")
        wait_for(lambda: "not now" in cluster.nodes[1].output(), 60,
                 "the window of row 2's request refused")
        shapes.wait_transactions(shapes.transactions + 30)
        cluster.nodes[1].kill()
        target.execute(f"DROP TRIGGER `{schema}`.not_two")
        cluster.start_node(1)
        wait_equal(source, target, schema, ["u"], timeout_s=90)
        assert target.table(schema, "u") == [(1, 5, "one"), (2, 6, "two")]
        shapes.wait_transactions(shapes.transactions + 30)
        shapes.finish(source)
    finally:
        shapes.stop()
        cluster.stop()
        source.close()
        target.close()
