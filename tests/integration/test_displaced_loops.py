"""Displaced rows that must not be deleted, nor asked for again forever, and the requests
kept for them taken without a restart (a review, review_s17a, reproduced each on MariaDB):

- a target table another channel also writes: a row of theirs the backfill displaced was
  deleted and asked of this channel's tables only (missing): gone for good, status green.
  Now the batch stops, naming the other pipeline; the row stays.
- two gathered tables holding one slot value each: each copy displaced the other's row,
  hundreds of times a minute, the target flipping, status green (a snapshot even "done").
  Now the second displacement of a key stops the batch, naming the index and both keys.
- a request the runner was still inserting into retl_pending when Load's displaced request
  (a later SEQ) committed was passed over until a restart. Now it is taken.
"""

from __future__ import annotations

import pymysql

from manager import cli
from shared.retl import encode_key
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_for
from tests.integration.test_displaced_rows import backfill_one, without_binlog

U = ("CREATE TABLE `{schema}`.t1 (id INT PRIMARY KEY, slot INT NOT NULL, note VARCHAR(20), "
     "UNIQUE KEY us (slot))")


def gathered(source: Database, target: Database, rows: tuple[str, str, str]) -> str:
    """Source tables t1, t2; target table g (t1's shape); ``rows``: t1's, t2's, g's."""
    schema = make_schema(source, target, U)
    source.execute(U.replace(".t1 ", ".t2 ").format(schema=schema))
    target.execute(f"RENAME TABLE `{schema}`.t1 TO `{schema}`.g")
    for db, table, values in ((source, "t1", rows[0]), (source, "t2", rows[1]),
                              (target, "g", rows[2])):
        without_binlog(db, f"INSERT INTO `{schema}`.{table} VALUES {values}")
    return schema


def events(cluster: Cluster, channel: str, event: str) -> list[str]:
    return [line for line in cluster.nodes[1].output().splitlines()
            if f"event={event} " in line and f"pipeline={channel}." in line]


def paused(cluster: Cluster, channel: str, *parts: str) -> str:
    def stopped() -> str:
        state = cluster.pipeline_state(channel)
        return state.last_error if state.state == "failed" and all(
            part in state.last_error for part in parts) else ""
    return wait_for(stopped, 30, f"{channel} paused naming {parts}")


def two_channels(cluster: Cluster, schema: str, prefix: str) -> None:
    """``{prefix}-x`` (t1 into g, with a free door) and ``{prefix}-y`` (t2 into g), running."""
    cluster.apply([
        {"name": f"{prefix}-x", "pipelines": [{
            "name": "forward", "source": "source", "target": "target",
            "pairs": [{"source": f"{schema}.t1", "target": f"{schema}.g"}],
            "free_door": {"source": "target"}}]},
        {"name": f"{prefix}-y", "pipelines": [{
            "name": "forward", "source": "source", "target": "target",
            "pairs": [{"source": f"{schema}.t2", "target": f"{schema}.g"}]}]}])
    for name in (f"{prefix}-x", f"{prefix}-y"):
        cluster.set_status(name, "START")
        cluster.wait_running(name)


def test_a_row_of_a_table_another_channel_writes_is_not_deleted(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = gathered(source, target, ("(1, 5, 'one')", "(2, 6, 'two')", "(2, 5, 'stale')"))
    two_channels(cluster, schema, "dl")
    target.execute("INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA, CHANNEL_ID, "
                   "PIPELINE_ID) VALUES (%s, 'I', %s, 'dl-x', 'forward')",
                   (f"{schema}.t1", encode_key((1,))))
    message = paused(cluster, "dl-x", "dl-y.forward")
    assert f"{schema}.g" in message and "(`slot`)" in message
    assert "key [2]" in message and "key [1]" in message
    assert target.table(schema, "g") == [(2, 5, "stale")]  # nothing deleted, nothing written
    assert events(cluster, "dl-x", "displaced_rows_other_writer")
    assert not events(cluster, "dl-x", "displaced_rows")
    assert cluster.pipeline_state("dl-y").state == "running"
    for name in ("dl-x", "dl-y"):
        cluster.set_status(name, "STOP")


def test_a_channel_added_after_a_displacement_in_the_table_is_seen(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A displacement in ``g`` while dl-ax alone writes it (a stale target-only row: deleted,
    asked, missing); then dl-ay is added and copies its row into ``g``; dl-ax's next row meets
    it: the other writers are read afresh, so dl-ax stops instead of deleting it (a review:
    the first read's answer, none, was kept for the run, and dl-ay's row was lost). Names of
    its own: re-applying the last test's dl-x with new pairs would copy the added tables."""
    schema = gathered(source, target, ("(1, 5, 'one'), (3, 7, 'three')", "(9, 99, 'nine')",
                                       "(4, 7, 'stale')"))
    without_binlog(source, f"DELETE FROM `{schema}`.t2")
    x = {"name": "dl-ax", "pipelines": [{
        "name": "forward", "source": "source", "target": "target",
        "pairs": [{"source": f"{schema}.t1", "target": f"{schema}.g"}],
        "free_door": {"source": "target"}}]}
    cluster.apply([x])
    cluster.set_status("dl-ax", "START")
    cluster.wait_running("dl-ax")
    ask = ("INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA, CHANNEL_ID, PIPELINE_ID) "
           "VALUES (%s, 'I', %s, 'dl-ax', 'forward')")
    target.execute(ask, (f"{schema}.t1", encode_key((3,))))
    wait_for(lambda: target.table(schema, "g") == [(3, 7, "three")], 60, "row 3 copied")
    cluster.apply([x, {"name": "dl-ay", "pipelines": [{
        "name": "forward", "source": "source", "target": "target",
        "pairs": [{"source": f"{schema}.t2", "target": f"{schema}.g"}]}]}])
    cluster.set_status("dl-ay", "START")
    cluster.wait_running("dl-ay")
    source.execute(f"INSERT INTO `{schema}`.t2 VALUES (2, 5, 'two')")
    wait_for(lambda: (2, 5, "two") in target.table(schema, "g"), 60, "dl-ay's row 2")
    target.execute(ask, (f"{schema}.t1", encode_key((1,))))
    paused(cluster, "dl-ax", "dl-ay.forward")
    assert target.table(schema, "g") == [(2, 5, "two"), (3, 7, "three")]
    for name in ("dl-ax", "dl-ay"):
        cluster.set_status(name, "STOP")


def two_rows_of_one_slot(cluster: Cluster, channel: str, schema: str) -> None:
    cluster.apply([{"name": channel, "pipelines": [{
        "name": "forward", "source": "source", "target": "target",
        "pairs": [{"source": f"{schema}.t1", "target": f"{schema}.g"},
                  {"source": f"{schema}.t2", "target": f"{schema}.g"}],
        "free_door": {"source": "target"}}]}])
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)


def said_once(cluster: Cluster, channel: str) -> None:
    message = paused(cluster, channel, "second time", "(`slot`)")
    assert "key [1]" in message and "key [2]" in message, message
    assert len(events(cluster, channel, "displaced_rows")) < 5
    assert len(events(cluster, channel, "displaced_rows_again")) == 1
    cluster.set_status(channel, "STOP")


def test_two_gathered_rows_of_one_slot_stop_a_backfill(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = gathered(source, target, ("(1, 5, 'one')", "(2, 5, 'two')", "(1, 5, 'one')"))
    two_rows_of_one_slot(cluster, "dl-gl", schema)
    target.execute("INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA, CHANNEL_ID, "
                   "PIPELINE_ID) VALUES (%s, 'I', %s, 'dl-gl', 'forward')",
                   (f"{schema}.t2", encode_key((2,))))
    said_once(cluster, "dl-gl")


def test_two_gathered_rows_of_one_slot_stop_a_snapshot(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = gathered(source, target, ("(1, 5, 'one')", "(2, 5, 'two')", "(2, 5, 'two')"))
    two_rows_of_one_slot(cluster, "dl-gs", schema)
    assert cli.main(["--manager", cluster.manager_address, "snapshot", "dl-gs",
                     "--table", f"{schema}.t1"]) == 0
    said_once(cluster, "dl-gs")  # (the chunk copied: the copy is done, the pipeline paused)


def test_a_request_committed_after_a_later_one_is_taken_without_a_restart(
        cluster: Cluster, source: Database, target: Database) -> None:
    """An open transaction on the source stands in for the runner's ask() still inserting
    (its SEQ drawn, not committed) while Load's request for a displaced row commits a later
    SEQ and the door reads it."""
    schema = make_schema(source, target, U.replace(".t1 ", ".u "))
    without_binlog(source, f"INSERT INTO `{schema}`.u VALUES (1, 5, 'one'), (2, 6, 'two'), "
                   "(3, 30, 'three')")
    without_binlog(target, f"INSERT INTO `{schema}`.u VALUES (2, 5, 'stale')")
    cluster.apply([one_way("dl-ss", schema, ["u"], free_door={"source": "target"})])
    cluster.set_status("dl-ss", "START")
    cluster.wait_running("dl-ss")
    inflight = pymysql.connect(**cluster.sandbox.connection("source"), autocommit=False)
    try:
        with inflight.cursor() as cursor:
            cursor.execute("INSERT IGNORE INTO retl.retl_pending (PIPELINE_ID, ID, FULL_NAME, "
                           "TYPE, PK_DATA) VALUES ('dl-ss.forward', 77, %s, 'I', %s)",
                           (f"`{schema}`.`u`", encode_key((3,))))
        target.execute("INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA, CHANNEL_ID, "
                       "PIPELINE_ID) VALUES (%s, 'I', %s, 'dl-ss', 'forward')",
                       (f"{schema}.u", encode_key((1,))))
        # row 2 displaced, its request committed after the one still open
        wait_for(lambda: source.rows("SELECT COUNT(*) FROM retl.retl_pending WHERE "
                                     "PIPELINE_ID = 'dl-ss.forward' AND ID <> 77") != [(0,)],
                 60, "the displaced row's request kept")
        inflight.commit()
    finally:
        inflight.close()
    wanted = [(1, 5, "one"), (2, 6, "two"), (3, 30, "three")]
    wait_for(lambda: target.table(schema, "u") == wanted, 60, "every request served")
    wait_for(lambda: source.rows("SELECT COUNT(*) FROM retl.retl_pending WHERE "
                                 "PIPELINE_ID = 'dl-ss.forward'") == [(0,)], 60, "none left")
    assert cluster.pipeline_state("dl-ss").state == "running"
    cluster.set_status("dl-ss", "STOP")


def test_a_unique_index_only_the_target_has_stops_the_copies(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The source's rows 1 and 2 share a name the target's unique index takes once: a
    backfill of 2 displaces 1, whose copy displaces 2, ... (the review: forever)."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.v (id INT PRIMARY KEY, "
                         "name VARCHAR(20) COLLATE utf8mb4_bin NOT NULL, note VARCHAR(20)) "
                         "DEFAULT CHARSET utf8mb4")
    target.execute(f"ALTER TABLE `{schema}`.v ADD UNIQUE KEY un (name)")
    without_binlog(source, f"INSERT INTO `{schema}`.v VALUES (1, 'x', 'one'), (2, 'x', 'two')")
    without_binlog(target, f"INSERT INTO `{schema}`.v VALUES (1, 'x', 'one')")
    backfill_one(cluster, target, "dl-pp", schema, "v", 2)
    message = paused(cluster, "dl-pp", "second time", "(`name`)")
    assert "key [1]" in message and "key [2]" in message, message
    assert len(events(cluster, "dl-pp", "displaced_rows")) < 5
    assert len(target.table(schema, "v")) == 1  # one of them: the index holds one
    cluster.set_status("dl-pp", "STOP")
