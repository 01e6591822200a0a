"""The stream's writes onto a target out of step with another unique key (a review,
reproduced on MariaDB): source (2991, slot 2991), (2992, slot 2992); target (2991, slot
9991), (2992, slot 2991). A live update of row 2991 comes down the stream while a snapshot of the
table runs; its upsert meets row 2991 by key, sets slot 2991, and meets row 2992 there: 1062,
Load retried, the pipeline paused for good — the copy that would mend row 2992 is behind the
stream's batch in the same pipeline, and never loaded.

Now the stream's upserts into a table whose copy is unfinished go with the displaced step
of rows read in a window: row 2992 is removed in the same transaction and asked again
through the free door. With no copy running a 1062 still pauses, saying what is wrong and
what to do; doing it (``setl snapshot``) mends the table."""

from __future__ import annotations

import random
import threading

import pytest

from manager import cli
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside
from tests.integration.test_displaced_loops import events, gathered, paused, two_channels
from tests.integration.test_displaced_rows import U, without_binlog

ROWS = 3000  # source rows 1..ROWS, slot = id; chunks of 20: 2991, 2992 in the last one
CLEAN = 100  # ids 1..CLEAN: changed by the writer too (in step on the target)


def out_of_step(source: Database, target: Database, schema: str) -> None:
    """The target holds the source's rows but 2991 (another slot) and 2992 (2991's slot), and
    lacks row 3 while row 4 holds 3's slot (the reviewer's shape: a row the target lacks)."""
    t = f"`{schema}`.u"
    without_binlog(source, f"INSERT INTO {t} VALUES " + ", ".join(
        f"({i}, {i}, 'src {i}')" for i in range(1, ROWS + 1)))
    stale = {i: (i, f"src {i}") for i in range(1, ROWS + 1)}
    stale[2991], stale[2992] = (9991, "stale 2991"), (2991, "stale 2992")
    del stale[3]
    stale[4] = (3, "stale 4")
    without_binlog(target, f"INSERT INTO {t} VALUES " + ", ".join(
        f"({i}, {s}, '{n}')" for i, (s, n) in stale.items()))


def writer(db: Database, schema: str, stop: threading.Event) -> None:
    """Updates of rows 2991 and 3 (each meets a target row of another key on ``slot``) and
    of rows in step, and new rows."""
    rng, t, born = random.Random(11), f"`{schema}`.u", 5000
    while not stop.is_set():
        db.execute(f"UPDATE {t} SET note = 'hot {rng.randrange(1000)}' WHERE id IN (2991, 3)")
        key = rng.randint(5, CLEAN)
        if rng.randrange(2):
            db.execute(f"UPDATE {t} SET note = 'warm {key}' WHERE id = {key}")
        else:
            born += 1
            db.execute(f"INSERT INTO {t} VALUES ({born}, {born}, 'born')")
        stop.wait(0.01)


def test_the_streams_write_into_a_table_being_copied_heals_a_1062(
        cluster: Cluster, source: Database, target: Database) -> None:
    channel = "ds-heal"
    schema = make_schema(source, target, U)
    out_of_step(source, target, schema)
    shapes = Shapes(cluster.sandbox, source, target, seed=61)
    cluster.apply([beside(one_way(channel, schema, ["u"], snapshot_chunk_size=20,
                                  free_door={"source": "target"}), shapes.schema)])
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)
    shapes.start()
    stop = threading.Event()
    db = Database(cluster.sandbox, "source")
    thread = threading.Thread(target=writer, args=(db, schema, stop), daemon=True)
    try:
        assert cli.main(["--manager", cluster.manager_address, "snapshot", channel,
                         "--table", f"{schema}.u"]) == 0
        wait_for(lambda: [c.state for c in cluster.pipeline_state(channel).snapshots]
                 == ["copying"], 60, "the copy started")  # (its last chunk far off)
        thread.start()  # (2991 written by the stream long before its chunk is copied)
        wait_for(lambda: [line for line in events(cluster, channel, "displaced_rows")
                          if "keys=[[2992]]" in line], 60,
                 "row 2992 displaced (by the stream's write of 2991, or by its chunk)")
        wait_for(lambda: [c.state for c in cluster.pipeline_state(channel).snapshots]
                 == ["done"], 180, "the copy done")
        shapes.keep_on(transactions=50, reads=10)
    finally:
        stop.set()
        if thread.ident is not None:
            thread.join(60)
        db.close()
    try:
        wait_equal(source, target, schema, ["u"], timeout_s=120)
        shapes.finish(source)
    finally:
        shapes.stop()
    state = cluster.pipeline_state(channel)
    assert state.state == "running", state.last_error
    log = cluster.nodes[1].output()
    assert not [line for line in log.splitlines()
                if f"{channel}.forward" in line and "Duplicate entry" in line], \
        "a write of the stream was refused (1062)"
    cluster.set_status(channel, "STOP")


def test_with_no_copy_running_a_1062_pauses_saying_what_to_do_and_a_snapshot_mends_it(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Source (1, 5), (2, 6); target (1, 7), (2, 5), written by someone else: the stream's
    update of row 1 meets row 2 on ``slot``. The pause names the table, the key and the
    command; that snapshot, the channel resumed, mends both rows."""
    channel = "ds-pause"
    schema = make_schema(source, target, U)
    without_binlog(source, f"INSERT INTO `{schema}`.u VALUES (1, 5, 'one'), (2, 6, 'two')")
    without_binlog(target, f"INSERT INTO `{schema}`.u VALUES (1, 7, 'x'), (2, 5, 'y')")
    cluster.apply([one_way(channel, schema, ["u"], free_door={"source": "target"},
                           max_retries=1)])
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)
    source.execute(f"UPDATE `{schema}`.u SET note = 'uno' WHERE id = 1")
    message = paused(cluster, channel, "Duplicate entry")
    assert f"{schema}.u" in message and "'us'" in message, message
    assert f"setl snapshot {channel} --table {schema}.u" in message, message
    assert "out of step" in message, message
    assert target.table(schema, "u") == [(1, 7, "x"), (2, 5, "y")]  # nothing overwritten
    assert cli.main(["--manager", cluster.manager_address, "snapshot", channel,
                     "--table", f"{schema}.u"]) == 0
    cluster.set_status(channel, "START")
    wait_equal(source, target, schema, ["u"], timeout_s=90)
    assert target.table(schema, "u") == [(1, 5, "uno"), (2, 6, "two")]
    cluster.set_status(channel, "STOP")


def test_a_stream_row_meeting_a_row_another_channel_writes_still_stops(
        cluster: Cluster, source: Database, target: Database) -> None:
    """t1 (ds-x) and t2 (ds-y) feed g. A copy of t1 under way (paused: it stays so); the
    stream's update of t1's row 1 meets g's row 2 on ``slot``, a row ds-y may have written:
    the batch stops naming ds-y, nothing deleted (no delete-and-ask-again loop)."""
    schema = gathered(source, target, ("(1, 5, 'one')", "(2, 6, 'two')",
                                       "(1, 7, 'x'), (2, 5, 'stale')"))
    two_channels(cluster, schema, "ds")
    manager = ["--manager", cluster.manager_address, "snapshot"]
    assert cli.main([*manager, "pause", "ds-x"]) == 0
    assert cli.main([*manager, "ds-x", "--table", f"{schema}.t1"]) == 0
    wait_for(lambda: [c.state for c in cluster.pipeline_state("ds-x").snapshots]
             == ["copying"], 60, "the copy taken (paused)")
    source.execute(f"UPDATE `{schema}`.t1 SET note = 'uno' WHERE id = 1")
    message = paused(cluster, "ds-x", "ds-y.forward")
    assert f"{schema}.g" in message and "(`slot`)" in message, message
    assert target.table(schema, "g") == [(1, 7, "x"), (2, 5, "stale")]  # nothing deleted
    assert events(cluster, "ds-x", "displaced_rows_other_writer")
    assert not events(cluster, "ds-x", "displaced_rows")
    assert cluster.pipeline_state("ds-y").state == "running"
    for name in ("ds-x", "ds-y"):
        cluster.set_status(name, "STOP")


SWAP = ("CREATE TABLE `{schema}`.{t} (id INT PRIMARY KEY, slot INT NOT NULL, note VARCHAR(20), "
        "UNIQUE KEY us (slot))")
CHILD = ("CREATE TABLE `{schema}`.c (id INT PRIMARY KEY, pslot INT, KEY (pslot), FOREIGN KEY "
         "(pslot) REFERENCES `{schema}`.u (slot) ON UPDATE CASCADE)")
MARK = "CREATE TABLE `{schema}`.m (id INT PRIMARY KEY)"


def copy_paused(cluster: Cluster, channel: str, table: str) -> None:
    """A copy of ``table`` taken and paused: the table counts as being copied."""
    manager = ["--manager", cluster.manager_address, "snapshot"]
    assert cli.main([*manager, "pause", channel]) == 0
    assert cli.main([*manager, channel, "--table", table]) == 0
    wait_for(lambda: [c.state for c in cluster.pipeline_state(channel).snapshots]
             == ["copying"], 60, "the copy taken (paused)")


def test_a_swap_of_unique_values_on_a_target_in_step_is_written_as_the_source_did_it(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A review of the stream's look-up: on a target IN STEP, row 2 gives slot 6 up and row
    1 takes it in one source transaction while the table is being copied. The look-up finds
    row 2 holding 6 — a row the same statements move aside — and deleted it with the others:
    the row written again lost its target-only column, fired the target's DELETE trigger,
    and a child's ON UPDATE CASCADE never ran (the child left on the wrong parent, the
    foreign key valid, status green). Rows of the stream the statements write are not
    deleted: the twin table no copy touches ends the same."""
    channel = "ds-swap"
    schema = make_schema(source, target, SWAP.replace("{t}", "u"), SWAP.replace("{t}", "u2"),
                         CHILD, MARK)
    for t in ("u", "u2"):
        target.execute(f"ALTER TABLE `{schema}`.{t} ADD COLUMN tag VARCHAR(10) NOT NULL "
                       "DEFAULT 'dflt'")
        without_binlog(source, f"INSERT INTO `{schema}`.{t} VALUES (1, 5, 'a'), (2, 6, 'b')")
        without_binlog(target, f"INSERT INTO `{schema}`.{t} VALUES "
                       "(1, 5, 'a', 'mine1'), (2, 6, 'b', 'mine2')")
    for db in (source, target):
        without_binlog(db, f"INSERT INTO `{schema}`.c VALUES (10, 5), (20, 6)")
    target.execute(f"CREATE TABLE `{schema}`.gone (t VARCHAR(5), id INT)")
    target.execute(f"CREATE TRIGGER `{schema}`.del_u AFTER DELETE ON `{schema}`.u "
                   f"FOR EACH ROW INSERT INTO `{schema}`.gone VALUES ('u', OLD.id)")
    cluster.apply([one_way(channel, schema, ["u", "u2", "c", "m"],
                           free_door={"source": "target"}, fire_target_triggers=True)])
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)
    copy_paused(cluster, channel, f"{schema}.u")
    for t in ("u", "u2"):
        source.script("BEGIN", f"UPDATE `{schema}`.{t} SET slot = 7 WHERE id = 2",
                      f"UPDATE `{schema}`.{t} SET slot = 6 WHERE id = 1", "COMMIT")
    source.execute(f"INSERT INTO `{schema}`.m VALUES (1)")
    wait_for(lambda: target.rows(f"SELECT 1 FROM `{schema}`.m WHERE id = 1"), 60,
             "the swap's transaction and the mark after it loaded")
    for t in ("u", "u2"):
        assert target.table(schema, t) == [(1, 6, "a", "mine1"), (2, 7, "b", "mine2")], t
    assert target.table(schema, "c") == source.table(schema, "c") == [(10, 6), (20, 7)]
    assert target.table(schema, "gone") == []  # no DELETE the source did not do
    assert not events(cluster, channel, "displaced_rows")
    assert cluster.pipeline_state(channel).state == "running"


@pytest.mark.parametrize(("kind", "k1", "k2"), [
    ("VARCHAR(10) CHARACTER SET big5", "'k1'", "'k2'"),  # (kept as its bytes in the stream)
    ("FLOAT", "0.1", "0.2"),  # (the binlog's single precision; the server prints 0.2)
    ("BIT(8)", "b'1'", "b'10'"),
])
def test_a_swap_in_step_keyed_by_values_the_server_returns_otherwise_is_spared(
        cluster: Cluster, source: Database, target: Database, kind: str, k1: str,
        k2: str) -> None:
    """The swap above keyed by a big5 text, a FLOAT or a BIT: the row found was matched to
    the chunk's stream rows by Python's equality, the key as the server returns it against
    the key as the binlog gave it — never equal, so it was deleted and written again (its
    target-only column reset, the child's ON UPDATE CASCADE lost; a review). The server
    tells which stream row writes the key found."""
    channel = f"ds-kind-{kind.split('(')[0].lower()}"
    schema = make_schema(source, target, SWAP.replace("{t}", "u").replace(
        "id INT PRIMARY KEY", f"id {kind} PRIMARY KEY"), CHILD, MARK)
    target.execute(f"ALTER TABLE `{schema}`.u ADD COLUMN tag VARCHAR(10) NOT NULL "
                   "DEFAULT 'dflt'")
    without_binlog(source, f"INSERT INTO `{schema}`.u VALUES ({k1}, 5, 'a'), ({k2}, 6, 'b')")
    without_binlog(target, f"INSERT INTO `{schema}`.u VALUES ({k1}, 5, 'a', 'mine1'), "
                   f"({k2}, 6, 'b', 'mine2')")
    for db in (source, target):
        without_binlog(db, f"INSERT INTO `{schema}`.c VALUES (10, 5), (20, 6)")
    cluster.apply([one_way(channel, schema, ["u", "c", "m"], free_door={"source": "target"})])
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)
    copy_paused(cluster, channel, f"{schema}.u")
    source.script("BEGIN", f"UPDATE `{schema}`.u SET slot = 7 WHERE slot = 6",
                  f"UPDATE `{schema}`.u SET slot = 6 WHERE slot = 5", "COMMIT")
    source.execute(f"INSERT INTO `{schema}`.m VALUES (1)")
    wait_for(lambda: target.rows(f"SELECT 1 FROM `{schema}`.m WHERE id = 1"), 60,
             "the swap's transaction and the mark after it loaded")
    assert target.rows(f"SELECT slot, note, tag FROM `{schema}`.u ORDER BY slot") == [
        (6, "a", "mine1"), (7, "b", "mine2")]
    assert target.table(schema, "c") == source.table(schema, "c") == [(10, 6), (20, 7)]
    assert not events(cluster, channel, "displaced_rows")
    assert cluster.pipeline_state(channel).state == "running"


@pytest.mark.parametrize("one", ["new", "held"])
def test_a_stale_row_the_stream_writes_after_its_value_is_taken_is_not_overwritten(
        cluster: Cluster, source: Database, target: Database, one: str) -> None:
    """Out of step while the table is copied: the target's row 2 holds slot 5 (the source's
    has 9). One source transaction writes row 1 with slot 5 (a new row, or one both sides
    hold at slot 4), then moves row 2 to 7. Row 2 is written by the same statements, after
    row 1 takes its value: spared, row 1's upsert updated row 2 with row 1's values and row
    2's restored it — row 1 lost, status green — or, row 1 held, failed on 1062 for good (a
    review). It is deleted before and written again."""
    channel = f"ds-stale-{one}"
    schema = make_schema(source, target, SWAP.replace("{t}", "u"), MARK)
    without_binlog(source, f"INSERT INTO `{schema}`.u VALUES (2, 9, 'b')")
    without_binlog(target, f"INSERT INTO `{schema}`.u VALUES (2, 5, 'stale')")
    if one == "held":
        for db in (source, target):
            without_binlog(db, f"INSERT INTO `{schema}`.u VALUES (1, 4, 'a')")
    cluster.apply([one_way(channel, schema, ["u", "m"], free_door={"source": "target"})])
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)
    copy_paused(cluster, channel, f"{schema}.u")
    write_one = (f"INSERT INTO `{schema}`.u VALUES (1, 5, 'a')" if one == "new" else
                 f"UPDATE `{schema}`.u SET slot = 5 WHERE id = 1")
    source.script("BEGIN", write_one, f"UPDATE `{schema}`.u SET slot = 7 WHERE id = 2",
                  "COMMIT")
    source.execute(f"INSERT INTO `{schema}`.m VALUES (1)")
    wait_for(lambda: target.rows(f"SELECT 1 FROM `{schema}`.m WHERE id = 1"), 60,
             "the transaction and the mark after it loaded")
    assert target.table(schema, "u") == source.table(schema, "u") == [(1, 5, "a"), (2, 7, "b")]
    assert cluster.pipeline_state(channel).state == "running"


def test_a_stale_row_met_in_the_index_s_collation_is_not_spared(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The first row taking a stale row's value told by the server, in the index's collation
    (a review: Python's comparison, blind to accents, took 'resumes' — a later row — for the
    first taker of 'resume' and spared the stale row 2: row 1 'Résumé' updated it and was
    lost, status green)."""
    channel = "ds-accent"
    table = ("CREATE TABLE `{schema}`.u (id INT PRIMARY KEY, name VARCHAR(20) CHARACTER SET "
             "utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, UNIQUE KEY un (name))")
    schema = make_schema(source, target, table, MARK)
    without_binlog(source, f"INSERT INTO `{schema}`.u VALUES (2, 'orig')")
    without_binlog(target, f"INSERT INTO `{schema}`.u VALUES (2, 'resume')")
    cluster.apply([one_way(channel, schema, ["u", "m"], free_door={"source": "target"})])
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)
    copy_paused(cluster, channel, f"{schema}.u")
    source.script("BEGIN", f"INSERT INTO `{schema}`.u VALUES (1, 'Résumé')",
                  f"UPDATE `{schema}`.u SET name = 'x' WHERE id = 2",
                  f"INSERT INTO `{schema}`.u VALUES (3, 'resumes')", "COMMIT")
    source.execute(f"INSERT INTO `{schema}`.m VALUES (1)")
    wait_for(lambda: target.rows(f"SELECT 1 FROM `{schema}`.m WHERE id = 1"), 60,
             "the transaction and the mark after it loaded")
    assert target.table(schema, "u") == source.table(schema, "u") == [
        (1, "Résumé"), (2, "x"), (3, "resumes")]
    assert cluster.pipeline_state(channel).state == "running"
