"""Load on a real target, the error policy: skip_load_exception skips the rows the target
refuses (a big row's pieces with it) and goes on, and never takes an interrupted statement
for a bad row."""

from __future__ import annotations

from tests.devcluster import make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside
from tests.integration.test_load import ITEMS


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

