"""Load on a real target: exactly-once positions, fencing of a stale owner, the error policy
(skip_load_exception) and dry runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from decimal import Decimal

import pytest

from manager.positionrows import move_row
from node.changes import Batch, ChangeType, TargetChange, Transaction
from node.jobs import PartResult, Unit
from node.target.mysql import loaddata
from node.target.mysql.loader import Loader
from node.target.mysql.sqltext import Sql
from shared.errors import FencedError, LoadError
from shared.model import BinlogPosition, DataSource, PipelineParams
from shared.secrets import SecretRef
from tests.devcluster import make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside
from tests.integration.shapes import channel as shapes_channel

ITEMS = "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(5))"


def batch(process_id: int, pos: int) -> Batch:
    """Batch ``process_id`` of one transaction ending at ``pos``, after the one ending 100
    bytes before (batches follow each other in these tests)."""
    end = BinlogPosition("binlog.000001", pos)
    return Batch("fence.forward", process_id, [Transaction((), end, 0, 0)],
                 start=BinlogPosition("binlog.000001", pos - 100))


def upsert(schema: str, row_id: int, name: str) -> TargetChange:
    return TargetChange("target", schema, "items", ChangeType.INSERT, ("id",), None,
                        {"id": row_id, "name": name})



def target_endpoint(sandbox) -> DataSource:
    server = sandbox.servers()["target"]
    return DataSource("target", "127.0.0.1", server.port, "setl",
                      SecretRef(f"file:{sandbox.secret_file}"))

@contextmanager
def owners(sandbox, pipeline_id: str, params: PipelineParams | None = None
           ) -> Iterator[tuple[str, Loader, Loader]]:
    """Two Loaders of one pipeline on the target: an older owner (epoch 10) and a newer one
    (epoch 20)."""
    endpoint = target_endpoint(sandbox)
    old = Loader(pipeline_id, {"target": endpoint}, params or PipelineParams(), epoch=10)
    new = Loader(pipeline_id, {"target": endpoint}, params or PipelineParams(), epoch=20)
    try:
        yield pipeline_id, old, new
    finally:
        old.close()
        new.close()


def test_replayed_batches_are_skipped_and_a_stale_owner_is_fenced(sandbox, source, target):
    schema = make_schema(source, target, ITEMS)
    with owners(sandbox, f"fence-{schema}.forward") as (pipeline_id, old, new):
        assert old.load(batch(1, 100), [upsert(schema, 1, "old")]) == 1
        # a replay of the same batch (crash between commit and cursor publish): skipped
        assert old.load(batch(1, 100), [upsert(schema, 1, "again")]) == 0
        assert target.table(schema, "items") == [(1, "old")]
        assert target.rows("SELECT binlog_pos FROM retl.retl_position WHERE pipeline_id = %s",
                           (pipeline_id,)) == [(100,)]
        # a newer owner takes over and writes; the old owner's late write is refused
        assert new.load(batch(2, 200), [upsert(schema, 1, "new")]) == 1
        with pytest.raises(FencedError, match=r"newer owner \(epoch 20 > 10\)"):
            old.load(batch(3, 300), [upsert(schema, 1, "stale")])
        assert target.table(schema, "items") == [(1, "new")]
        assert target.rows("SELECT binlog_pos, owner_epoch FROM retl.retl_position "
                           "WHERE pipeline_id = %s", (pipeline_id,)) == [(200, 20)]


def copy_unit(schema: str, lines: bytes, rows: int) -> Unit:
    head = loaddata.head(schema, "items", ["@setl_key", "`id`", "`name`"])
    return Unit("target", schema, "items", 0, -1,
                [Sql(head, count, data=data) for count, data in loaddata.pieces(lines)], rows,
                ("id",), apart=True)


def test_a_position_set_fences_a_runner_still_writing(sandbox, source, target):
    """setl position set while a runner whose ZooKeeper session was lost still loads (no
    mainstem said it was there): its next batch is refused, and the place set stands (it
    wrote its own over it, and the replay asked for was skipped)."""
    schema = make_schema(source, target, ITEMS)
    with owners(sandbox, f"moved-{schema}.forward") as (pipeline_id, old, _):
        assert old.load(batch(1, 100), [upsert(schema, 1, "one")]) == 1
        assert old.load(batch(2, 200), [upsert(schema, 1, "two")]) == 1
        move_row(target_endpoint(sandbox), pipeline_id, "replay",
                  BinlogPosition("binlog.000001", 100))
        with pytest.raises(FencedError, match=r"newer owner \(epoch 11 > 10\)"):
            old.load(batch(3, 300), [upsert(schema, 1, "three")])
        assert target.rows("SELECT binlog_pos, run FROM retl.retl_position WHERE "
                           "pipeline_id = %s", (pipeline_id,)) == [(100, "replay")]
        # a reset (nothing loaded): the row stays, without a position, and fences it too
        move_row(target_endpoint(sandbox), pipeline_id, "", BinlogPosition())
        with pytest.raises(FencedError, match=r"newer owner \(epoch 12 > 10\)"):
            old.load(batch(4, 400), [upsert(schema, 1, "four")])
        assert target.rows("SELECT binlog_file, binlog_pos FROM retl.retl_position WHERE "
                           "pipeline_id = %s", (pipeline_id,)) == [("", 0)]


def test_a_position_row_purged_under_a_runner_still_writing_fences_it(sandbox, source, target):
    """setl channel delete --purge-positions while a runner that claimed the target still
    loads: its next batch is refused (written, it would make the row again under its own
    epoch), and an owner that claims afresh writes from nothing."""
    schema = make_schema(source, target, ITEMS)
    with owners(sandbox, f"purged-{schema}.forward") as (pipeline_id, old, new):
        assert old.claim() == {"target": None}  # a first start: the claim makes the row
        assert old.load(batch(1, 100), [upsert(schema, 1, "one")]) == 1
        move_row(target_endpoint(sandbox), pipeline_id, "", BinlogPosition(), purge=True)
        with pytest.raises(FencedError, match=r"no longer has the pipeline's position row"):
            old.load(batch(2, 200), [upsert(schema, 1, "two")])
        assert target.table(schema, "items") == [(1, "one")]
        assert target.rows("SELECT 1 FROM retl.retl_position WHERE pipeline_id = %s",
                           (pipeline_id,)) == []
        assert new.claim() == {"target": None}
        assert new.load(batch(2, 200), [upsert(schema, 1, "two")]) == 1
        assert target.rows("SELECT binlog_pos, owner_epoch FROM retl.retl_position "
                           "WHERE pipeline_id = %s", (pipeline_id,)) == [(200, 20)]


def test_copies_load_after_the_batch_under_its_position_and_a_stale_owner_is_fenced(
        sandbox, source, target):
    """Snapshot lines load right after the batch's transaction, in transactions of their own
    (node.target.mysql.copies), each checking the position row is still this batch's under this
    owner's epoch: a stale owner's late copy is refused and writes nothing."""
    schema = make_schema(source, target, ITEMS)
    params = PipelineParams(snapshot_parallelism=2)
    with owners(sandbox, f"copies-{schema}.forward", params) as (pipeline_id, old, new):
        stream = PartResult([Unit("target", schema, "items", 0, 1 << 20, [Sql(
            f"INSERT INTO `{schema}`.items VALUES (9, 'strm')", 1)], 1)], [], 1)
        copies = PartResult([copy_unit(schema, b"1\t1\ta\n2\t2\tb\n", 2),
                             copy_unit(schema, b"3\t3\t\\N\n", 1)], [], 3)
        assert old.load_units(batch(1, 100), [copies, stream]) == 4
        assert target.table(schema, "items") == [(1, "a"), (2, "b"), (3, None), (9, "strm")]
        assert target.rows("SELECT binlog_pos FROM retl.retl_position WHERE pipeline_id = %s",
                           (pipeline_id,)) == [(100,)]
        # only copies in a batch: the batch's transaction still moves the position first
        assert old.load_units(batch(2, 200), [PartResult(
            [copy_unit(schema, b"4\t4\td\n", 1)], [], 1)]) == 1
        assert target.rows("SELECT binlog_pos FROM retl.retl_position WHERE pipeline_id = %s",
                           (pipeline_id,)) == [(200,)]
        # a newer owner takes over; the old owner's copy of a batch it still thinks is its
        # own finds another owner's position and epoch, and writes nothing
        assert new.load(batch(3, 300), [upsert(schema, 1, "new")]) == 1
        with pytest.raises(FencedError, match=r"another owner has the pipeline"):
            old.copies.load(batch(2, 200), [copy_unit(schema, b"1\t1\tstale\n", 1)])
        assert target.table(schema, "items") == [(1, "new"), (2, "b"), (3, None), (4, "d"),
                                                 (9, "strm")]


def test_a_python_error_in_load_says_where(sandbox, source, target):
    schema = make_schema(source, target, ITEMS)
    endpoint = target_endpoint(sandbox)
    loader = Loader(f"where-{schema}.forward", {"target": endpoint}, PipelineParams())
    try:
        for value, error in (({1, "a"}, "TypeError"),  # a value render cannot order
                             ("too long", "Data too long for column 'name'")):  # refused
            with pytest.raises(LoadError) as raised:
                loader.load(batch(7, 700), [upsert(schema, 1, value)])  # type: ignore[arg-type]
            message = str(raised.value)
            for part in (f"stage load, pipeline where-{schema}.forward, processId 7",
                         "position binlog.000001:700", f"table {schema}.items", error):
                assert part in message, message
        assert target.table(schema, "items") == []  # nothing of the batch was written
    finally:
        loader.close()


def test_a_batch_goes_in_one_query_and_a_failing_statement_names_its_table(
        sandbox, source, target):
    """A batch's statements of several tables, its position and its COMMIT go to the target
    as one multi-statement query; a statement the target refuses in the middle names its
    own table, and nothing of the batch (the tables before it, the position) is written."""
    schema = make_schema(source, target, ITEMS, ITEMS.replace(".items", ".other"))
    endpoint = target_endpoint(sandbox)
    pipeline_id = f"together-{schema}.forward"
    loader = Loader(pipeline_id, {"target": endpoint}, PipelineParams())

    def unit(table: str, *sqls: str) -> Unit:
        return Unit("target", schema, table, 0, 0, [Sql(sql, 1) for sql in sqls], len(sqls))

    try:
        first = [unit("items", f"INSERT INTO `{schema}`.items VALUES (1, 'a;b')",
                      f"INSERT INTO `{schema}`.items VALUES (2, 'c')"),
                 unit("other", f"INSERT INTO `{schema}`.other VALUES (1, 'x')")]
        assert loader.load_units(batch(1, 100), [PartResult(first, [], 3)]) == 3
        assert target.table(schema, "items") == [(1, "a;b"), (2, "c")]
        assert target.table(schema, "other") == [(1, "x")]
        refused = [unit("items", f"UPDATE `{schema}`.items SET name = 'z' WHERE id = 1"),
                   unit("other", f"INSERT INTO `{schema}`.other VALUES (2, 'too long')"),
                   unit("items", f"DELETE FROM `{schema}`.items WHERE id = 2")]
        with pytest.raises(LoadError) as raised:
            loader.load_units(batch(2, 200), [PartResult(refused, [], 3)])
        message = str(raised.value)
        assert f"table {schema}.other: Data too long for column 'name'" in message, message
        assert "processId 2" in message and "position binlog.000001:200" in message
        assert target.table(schema, "items") == [(1, "a;b"), (2, "c")]  # none of batch 2
        assert target.table(schema, "other") == [(1, "x")]
        assert target.rows("SELECT binlog_pos FROM retl.retl_position WHERE pipeline_id = %s",
                           (pipeline_id,)) == [(100,)]
        # the same batch again (the target fixed meanwhile) goes in whole
        target.execute(f"ALTER TABLE `{schema}`.other MODIFY name VARCHAR(10)")
        assert loader.load_units(batch(2, 200), [PartResult(refused, [], 3)]) == 3
        assert target.table(schema, "items") == [(1, "z")]
        assert target.table(schema, "other") == [(1, "x"), (2, "too long")]
    finally:
        loader.close()


def test_skip_load_exception_skips_refused_rows_and_goes_on(cluster, source, target):
    schema = make_schema(source, target, ITEMS)
    source.execute(f"ALTER TABLE `{schema}`.items MODIFY name VARCHAR(50)")  # target: 5
    cluster.apply([one_way("skipping", schema, ["items"], skip_load_exception=True)])
    cluster.set_status("skipping", "START")
    cluster.wait_running("skipping")
    source.execute("BEGIN")
    source.execute(f"INSERT INTO `{schema}`.items VALUES (1, 'ok'), (2, 'far too long'), "
                   "(3, 'fine')")
    source.execute("COMMIT")
    source.execute(f"INSERT INTO `{schema}`.items VALUES (4, 'later')")
    wait_for(lambda: len(target.table(schema, "items")) == 3, 60, "the rows the target takes")
    assert target.table(schema, "items") == [(1, "ok"), (3, "fine"), (4, "later")]
    assert cluster.channel_status("skipping") == "START"
    log = cluster.nodes[1].output()
    skipped = [line for line in log.splitlines()
               if "event=row_skipped channel=skipping pipeline=skipping" in line]
    assert len(skipped) == 1
    assert f"table={schema}.items key=(2,)" in skipped[0] and "Data too long" in skipped[0]
    wait_for(lambda: cluster.pipeline_state("skipping").rows_skipped == 1, 30,
             "setl status counting the skipped row")
    cluster.set_status("skipping", "STOP")


def test_skip_load_exception_skips_a_big_rows_pieces_with_it(cluster, source, target):
    """A value over 4 MiB goes as an insert and pieces appended to it; the target refuses
    the row's insert (another column too long): none of its pieces may append to the row
    the target holds (the target's row became its old value followed by the new one)."""
    table = "CREATE TABLE `{schema}`.docs (id INT PRIMARY KEY, c VARCHAR(%d), b LONGBLOB)"
    schema = make_schema(source, target)
    source.execute(table.format(schema=schema) % 20)
    target.execute(table.format(schema=schema) % 3)
    for side in (source, target):  # there before the channel starts
        side.execute(f"INSERT INTO `{schema}`.docs VALUES (1, 'old', 'OLD')")
    cluster.apply([one_way("bigskip", schema, ["docs"], skip_load_exception=True)])
    cluster.set_status("bigskip", "START")
    cluster.wait_running("bigskip")
    source.script("BEGIN", f"UPDATE `{schema}`.docs SET c = 'long', b = REPEAT('N', "
                  "4194304 + 100) WHERE id = 1",
                  f"INSERT INTO `{schema}`.docs VALUES (2, 'ok', 'two')", "COMMIT")
    wait_for(lambda: len(target.table(schema, "docs")) == 2, 60, "the row the target takes")
    assert target.rows(f"SELECT id, c, LENGTH(b) FROM `{schema}`.docs ORDER BY id") == [
        (1, "old", 3), (2, "ok", 3)]
    skipped = [line for line in cluster.nodes[1].output().splitlines()
               if "event=row_skipped channel=bigskip pipeline=bigskip" in line]
    assert len(skipped) == 1 and "key=(1,)" in skipped[0], skipped
    cluster.set_status("bigskip", "STOP")


def test_skip_load_exception_never_takes_an_interrupted_statement_for_a_bad_row(
        cluster, source, target):
    """An error that is not the row's fault (here a trigger on the target raising 1317,
    "query execution was interrupted", as KILL QUERY does; 1206 and 1969 alike) stops the
    pipeline with nothing of the transaction written: skipping the row would tear it. The
    start after the pause loads the batch again, with the keyless, unique-swap and sum
    tables of the same pipeline written all along (equal as multisets, none skipped)."""
    schema = make_schema(source, target, ITEMS)
    t = f"`{schema}`.items"
    target.execute(f"CREATE TRIGGER `{schema}`.interrupt BEFORE INSERT ON {t} FOR EACH ROW "
                   "IF NEW.name = 'stop' THEN SIGNAL SQLSTATE '70100' SET "
                   "MYSQL_ERRNO = 1317, MESSAGE_TEXT = 'Query execution was interrupted'; "
                   "END IF")
    shapes = Shapes(cluster.sandbox, source, target, seed=47)
    cluster.apply([beside(one_way("interrupted", schema, ["items"], skip_load_exception=True,
                                  max_retries=0, fire_target_triggers=True), shapes.schema)])
    cluster.set_status("interrupted", "START")
    cluster.wait_running("interrupted")
    shapes.start()
    try:
        shapes.wait_transactions(50)
        source.execute("BEGIN")
        source.execute(f"INSERT INTO {t} VALUES (1, 'ok'), (2, 'stop'), (3, 'fine')")
        source.execute("COMMIT")
        wait_for(lambda: cluster.channel_status("interrupted") == "PAUSE", 60, "the pause")
        assert "interrupted" in cluster.pipeline_state("interrupted").last_error
        assert target.table(schema, "items") == []
        target.execute(f"DROP TRIGGER `{schema}`.interrupt")
        cluster.set_status("interrupted", "START")
        wait_equal(source, target, schema, ["items"])
        shapes.keep_on()
        shapes.finish(source)
    finally:
        shapes.stop()
    assert not [line for line in cluster.nodes[1].output().splitlines()
                if "event=row_skipped channel=interrupted pipeline=interrupted" in line]
    cluster.set_status("interrupted", "STOP")


def test_a_target_table_with_triggers_pauses_before_its_rows_are_written_twice(
        cluster, source, target):
    """The target's schema was copied with mysqldump, which brings triggers: the source's
    trigger wrote an audit row that comes in the binlog, and the target's own would write
    it again for the row setl writes (native row replication fires none). The pipeline
    pauses before the batch, naming the trigger; dropped, the batch loads once. The
    keyless, unique-swap and sum tables of the same pipeline go through the pause."""
    schema = make_schema(source, target, ITEMS, "CREATE TABLE `{schema}`.audit (item INT)")
    t = f"`{schema}`"
    trigger = (f"CREATE TRIGGER {t}.noted AFTER INSERT ON {t}.items FOR EACH ROW "
               f"INSERT INTO {t}.audit VALUES (NEW.id)")
    source.execute(trigger)
    target.execute(trigger)
    shapes = Shapes(cluster.sandbox, source, target, seed=59)
    cluster.apply([beside(one_way("fired", schema, ["items", "audit"], max_retries=0),
                          shapes.schema)])
    cluster.set_status("fired", "START")
    cluster.wait_running("fired")
    shapes.start()
    try:
        shapes.wait_transactions(30)
        source.execute(f"INSERT INTO {t}.items VALUES (1, 'a'), (2, 'b')")
        wait_for(lambda: cluster.channel_status("fired") == "PAUSE", 60, "the pause")
        error = cluster.pipeline_state("fired").last_error
        assert f"target table {schema}.items on target has trigger noted" in error, error
        assert target.table(schema, "audit") == []
        target.execute(f"DROP TRIGGER {t}.noted")
        cluster.set_status("fired", "START")
        wait_equal(source, target, schema, ["items", "audit"])
        assert sorted(target.table(schema, "audit")) == [(1,), (2,)]  # once each
        shapes.keep_on()
        shapes.finish(source)
    finally:
        shapes.stop()
    cluster.set_status("fired", "STOP")


def test_a_target_table_that_does_not_roll_back_pauses_before_its_rows(
        cluster, source, target):
    """A MyISAM target table takes a batch's rows before its position commits, and again
    after a crash (a keyless table's twice): the pipeline pauses before writing it, saying
    how to convert it; converted, the batch loads whole, duplicate keyless rows and all."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.kl (a INT, b VARCHAR(9))")
    target.execute(f"ALTER TABLE `{schema}`.kl ENGINE=MyISAM")
    cluster.apply([one_way("engine", schema, ["kl"], max_retries=0)])
    cluster.set_status("engine", "START")
    cluster.wait_running("engine")
    source.script("BEGIN", f"INSERT INTO `{schema}`.kl VALUES (1, 'twin'), (1, 'twin')",
                  "COMMIT")
    wait_for(lambda: cluster.channel_status("engine") == "PAUSE", 60, "the pause")
    error = cluster.pipeline_state("engine").last_error
    assert f"target table {schema}.kl on target is MyISAM, whose writes do not roll back" \
        in error and "ENGINE=InnoDB" in error, error
    assert target.table(schema, "kl") == []
    target.execute(f"ALTER TABLE `{schema}`.kl ENGINE=InnoDB")
    cluster.set_status("engine", "START")
    wait_equal(source, target, schema, ["kl"])
    assert target.table(schema, "kl") == [(1, "twin"), (1, "twin")]
    cluster.set_status("engine", "STOP")


def test_dry_run_counts_and_writes_nothing(cluster, source, target):
    """A dry run counts and writes nothing; the run after it starts where the target is.
    The keyless, unique-swap and sum tables go through the same in a channel of their own
    (the dry run's counts stay this table's), written all along: untouched by the dry run,
    then equal as multisets."""
    schema = make_schema(source, target, ITEMS)
    shapes = Shapes(cluster.sandbox, source, target, seed=53)
    channels = ("dry", "dry-shapes")
    cluster.apply([one_way("dry", schema, ["items"], dry_run=True),
                   shapes_channel("dry-shapes", shapes.schema, dry_run=True)])
    for name in channels:
        cluster.set_status(name, "START")
    for name in channels:
        cluster.wait_running(name)
    shapes.start()
    try:
        source.execute(f"INSERT INTO `{schema}`.items VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        for name in channels:
            wait_for(lambda n=name: f"event=batch_dry_run pipeline={n}.forward" in
                     cluster.nodes[1].output(), 30, f"the dry-run count of {name}")
        line = next(line for line in cluster.nodes[1].output().splitlines()
                    if "event=batch_dry_run pipeline=dry.forward" in line)
        assert " rows=3 " in line
        assert target.table(schema, "items") == []
        assert shapes.rows(target) == shapes.opening()  # nothing of what was counted
        made = target.rows("SELECT COUNT(*) FROM information_schema.TABLES WHERE "
                           "TABLE_SCHEMA = 'retl' AND TABLE_NAME = 'retl_position'") == [(1,)]
        assert not made or target.rows("SELECT COUNT(*) FROM retl.retl_position WHERE "
                                       "pipeline_id IN ('dry.forward', 'dry-shapes.forward')"
                                       ) == [(0,)]
        # the run after it starts where the target is: what the dry run read is loaded then
        for name in channels:
            cluster.set_status(name, "STOP")
        for name in channels:
            wait_for(lambda n=name: cluster.pipeline_state(n).state == "not running", 30,
                     f"the stop of {name}")
        cluster.apply([one_way("dry", schema, ["items"]),
                       shapes_channel("dry-shapes", shapes.schema)])
        for name in channels:
            cluster.set_status(name, "START")
        wait_equal(source, target, schema, ["items"])
        assert sorted(target.table(schema, "items")) == [(1, "a"), (2, "b"), (3, "c")]
        shapes.keep_on()
        shapes.finish(source)
    finally:
        shapes.stop()
    for name in channels:
        cluster.set_status(name, "STOP")


def test_a_stale_owner_frozen_in_a_transaction_is_ended_by_the_new_one(sandbox, source,
                                                                        target) -> None:
    """A frozen owner's open load transaction holds the position row; the newer owner kills
    that connection (registered in retl.retl_owner) and loads, instead of waiting for it."""
    import pymysql

    schema = make_schema(source, target, ITEMS)
    with owners(sandbox, f"zombie-{schema}.forward") as (pipeline_id, old, new):
        assert old.load(batch(1, 100), [upsert(schema, 1, "old")]) == 1
        frozen = old._connection("target")  # as if the old owner froze mid-transaction
        with frozen.cursor() as cursor:
            cursor.execute("SELECT * FROM retl.retl_position WHERE pipeline_id = %s "
                           "FOR UPDATE", (pipeline_id,))
            cursor.execute(f"INSERT INTO `{schema}`.items VALUES (2, 'stale')")
        assert new.load(batch(2, 200), [upsert(schema, 1, "new")]) == 1
        assert target.table(schema, "items") == [(1, "new")]  # the stale row rolled back
        with pytest.raises(pymysql.MySQLError):
            with frozen.cursor() as cursor:  # its connection is gone: it writes nothing
                cursor.execute("COMMIT")
        assert target.rows("SELECT owner_epoch FROM retl.retl_position WHERE pipeline_id = %s",
                           (pipeline_id,)) == [(20,)]


def test_a_new_owner_ends_the_older_owners_connections_when_it_claims(sandbox, source,
                                                                     target) -> None:
    """An older owner frozen between its DDL's intent and the DDL holds no row lock a load
    would wait on: its connections are ended at the claim, so it never runs the DDL after
    the new owner replayed it."""
    import pymysql

    schema = make_schema(source, target, ITEMS)
    with owners(sandbox, f"claim-ends-{schema}.forward") as (_, old, new):
        assert old.load(batch(1, 100), [upsert(schema, 1, "old")]) == 1
        frozen = old._connection("target")
        new.claim()
        with pytest.raises(pymysql.MySQLError), frozen.cursor() as cursor:
            cursor.execute(f"TRUNCATE `{schema}`.items")  # as the frozen owner wakes
        assert target.table(schema, "items") == [(1, "old")]


def test_two_target_datasources_on_one_server_are_refused_naming_them(cluster, source, target):
    """They would share the pipeline's position row: the second to load a batch found it
    loaded by the first and wrote nothing."""
    schema = make_schema(source, target, ITEMS, ITEMS.replace(".items", ".others"))
    servers = cluster.sandbox.servers()
    sources = [{"name": name, "host": host, "port": servers[server].port, "user": "setl",
                "password": f"file:{cluster.sandbox.secret_file}"}
               for name, host, server in (("source", "127.0.0.1", "source"),
                                          ("target", "127.0.0.1", "target"),
                                          ("target_too", "localhost", "target"))]
    channel = one_way("one-server", schema, ["items"])
    channel["pipelines"][0]["pairs"].append(
        {"source": f"{schema}.others",
         "target": {"datasource": "target_too", "namespace": schema, "table": "others"}})
    cluster.apply([channel], sources)
    cluster.set_status("one-server", "START")
    wait_for(lambda: "are one server" in cluster.pipeline_state("one-server").last_error, 90,
             "the refusal")
    error = cluster.pipeline_state("one-server").last_error
    assert "targets target and target_too are one server" in error or \
        "targets target_too and target are one server" in error
    cluster.set_status("one-server", "STOP")


def test_a_target_key_that_folds_case_the_source_keeps_pauses_before_rows_merge(
        cluster, source, target):
    """The source keys rows by a utf8mb4_bin column, the target's copy of the table was
    made with utf8mb4_general_ci: 'a' and 'A' are two rows on the source and one key on the
    target, where the second write landed on the first row and a delete of 'A' then took
    'a' with it, silently. The pipeline pauses before writing, naming the column and both
    collations; with the target's column altered as it says, both rows arrive."""
    assert source.rows("SELECT 'a' = 'a ' COLLATE utf8mb4_bin, "  # MariaDB's _bin pads
                       "'a' = 'a ' COLLATE utf8mb4_nopad_bin") == [(1, 0)]
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.codes (code VARCHAR(10) "
                         "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, n INT)")
    t = f"`{schema}`"
    target.execute(f"ALTER TABLE {t}.codes MODIFY code VARCHAR(10) CHARACTER SET utf8mb4 "
                   "COLLATE utf8mb4_general_ci")
    cluster.apply([one_way("keyfold", schema, ["codes"], max_retries=0)])
    cluster.set_status("keyfold", "START")
    cluster.wait_running("keyfold")
    source.execute(f"INSERT INTO {t}.codes VALUES ('a', 1), ('A', 2)")
    wait_for(lambda: cluster.channel_status("keyfold") == "PAUSE", 60, "the pause")
    error = cluster.pipeline_state("keyfold").last_error
    for part in (f"target table {schema}.codes on target: key column code has collation "
                 "utf8mb4_general_ci", "column code (utf8mb4_bin)",
                 f"ALTER TABLE {schema}.codes MODIFY code varchar(10) CHARACTER SET utf8mb4 "
                 "COLLATE utf8mb4_bin"):
        assert part in error, error
    assert target.table(schema, "codes") == []
    target.execute(f"ALTER TABLE {t}.codes MODIFY code VARCHAR(10) CHARACTER SET utf8mb4 "
                   "COLLATE utf8mb4_bin")
    cluster.set_status("keyfold", "START")
    wait_equal(source, target, schema, ["codes"])
    source.execute(f"DELETE FROM {t}.codes WHERE code = 'A'")
    wait_equal(source, target, schema, ["codes"])
    assert target.table(schema, "codes") == [("a", 1)]
    cluster.set_status("keyfold", "STOP")


def test_a_copy_into_a_target_key_that_folds_case_pauses_before_rows_merge(
        cluster, source, target):
    """As above for a table copied (``start: snapshot``) as LOAD DATA lines, which go to the
    target without a batch of their own: 'a' and 'A' were two source rows and one target
    row, silently. The copy fails, saying why in status, until the column is altered."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.codes (code VARCHAR(10) "
                         "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, n INT)")
    t = f"`{schema}`"
    target.execute(f"ALTER TABLE {t}.codes MODIFY code VARCHAR(10) CHARACTER SET utf8mb4 "
                   "COLLATE utf8mb4_general_ci")
    source.execute(f"INSERT INTO {t}.codes VALUES ('a', 1), ('A', 2)")
    source.execute(f"USE {t}")
    source.execute(f"INSERT INTO {t}.codes SELECT CONCAT('k', seq), seq FROM seq_1_to_500")
    cluster.apply([one_way("keyfoldcopy", schema, ["codes"], max_retries=0, start="snapshot",
                           load_data_min_rows=2)])
    cluster.set_status("keyfoldcopy", "START")
    wait_for(lambda: "key column code has collation utf8mb4_general_ci" in
             cluster.pipeline_state("keyfoldcopy").last_error, 90,
             "the copy refused, said in status")
    assert target.rows(f"SELECT COUNT(*) FROM {t}.codes WHERE code IN ('a', 'A')")[0][0] == 0
    target.execute(f"ALTER TABLE {t}.codes MODIFY code VARCHAR(10) CHARACTER SET utf8mb4 "
                   "COLLATE utf8mb4_bin")
    wait_equal(source, target, schema, ["codes"], 90)  # the copy tried again
    cluster.set_status("keyfoldcopy", "STOP")


def test_a_load_data_the_target_rounds_a_value_of_fails_with_nothing_written(
        sandbox, source, target):
    """A strict session still rounds a DECIMAL given more digits than its scale, with only a
    note (1265): LOAD DATA lines of the stream or of a copy wrote 1.26 for 1.255, silently.
    Now the statement fails, naming what the target said, and nothing of the batch or of
    the copy is written."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, "
                         "d DECIMAL(5,2))")
    loader = Loader(f"rounded-{schema}.forward", {"target": target_endpoint(sandbox)},
                    PipelineParams())
    try:
        head = loaddata.head(schema, "items", ["`id`", "`d`"])
        stream = PartResult([Unit("target", schema, "items", 0, 1 << 20,
                                  [Sql(head, 2, data=b"1\t1.25\n2\t1.255\n")], 2)], [], 2)
        with pytest.raises(LoadError) as raised:
            loader.load_units(batch(1, 100), [stream])
        for part in (f"table {schema}.items", "the target changed values as it loaded them",
                     "Data truncated for column 'd'"):
            assert part in str(raised.value), raised.value
        copied = copy_unit(schema, b"3\t3\t1.5\n4\t4\t2.125\n", 2)
        copied.sqls[:] = [Sql(loaddata.head(schema, "items", ["@setl_key", "`id`", "`d`"]),
                              2, data=copied.sqls[0].data)]
        with pytest.raises(Exception, match="the target changed values as it loaded them"):
            loader.load_units(batch(1, 100), [PartResult([copied], [], 2)])
        assert target.table(schema, "items") == []
    finally:
        loader.close()


def test_a_target_column_that_would_round_or_stamp_source_values_pauses_before_rows(
        cluster, source, target):
    """A target table made apart from its source: a DECIMAL of a smaller scale kept 1.255
    as 1.26, a DATETIME of fewer fractional digits rounded them, and a TIMESTAMP NOT NULL
    stored the time of the load for the source's NULL, all without an error. The batch
    pauses before writing, naming each column and the ALTER to run; with the target altered
    as it says, every value arrives as the source has it."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.prices (id INT PRIMARY KEY, "
                         "amount DECIMAL(10,3), at DATETIME(6), seen TIMESTAMP NULL "
                         "DEFAULT NULL)")
    t = f"`{schema}`.prices"
    target.execute(f"ALTER TABLE {t} MODIFY amount DECIMAL(10,2), MODIFY at DATETIME, "
                   "MODIFY seen TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP")
    cluster.apply([one_way("roundload", schema, ["prices"], max_retries=0)])
    cluster.set_status("roundload", "START")
    cluster.wait_running("roundload")
    source.execute(f"INSERT INTO {t} VALUES (1, 1.255, '2020-01-01 10:00:00.700000', NULL), "
                   "(2, 2.5, '2020-01-02 00:00:00', '2020-01-03 04:05:06')")
    for column, alter in (("amount", "DECIMAL(10,3)"), ("at", "DATETIME(6)"),
                          ("seen", "TIMESTAMP NULL DEFAULT NULL")):
        wait_for(lambda c=column: f"target table {schema}.prices on target: column {c} " in
                 cluster.pipeline_state("roundload").last_error, 60, f"the pause on {column}")
        assert cluster.channel_status("roundload") == "PAUSE"
        assert target.table(schema, "prices") == []
        target.execute(f"ALTER TABLE {t} MODIFY {column} {alter}")
        cluster.set_status("roundload", "START")
    wait_equal(source, target, schema, ["prices"])
    assert target.rows(f"SELECT amount, at, seen FROM {t} WHERE id = 1") == [
        (Decimal("1.255"), datetime(2020, 1, 1, 10, 0, 0, 700000), None)]
    cluster.set_status("roundload", "STOP")
