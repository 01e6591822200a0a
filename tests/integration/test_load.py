"""Load on a real target: exactly-once positions, fencing of a stale owner, errors that say
where, and dry runs. The error policy (skip_load_exception): test_load_skips.py; target
tables Load pauses on: test_load_pauses.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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
from tests.integration.shapes import Shapes
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
