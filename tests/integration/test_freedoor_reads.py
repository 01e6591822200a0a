"""The free door's windows on real servers: where a window's reads go when it holds no event
of its own, the isolation level they are read in, and a delete no pair set can serve."""

from __future__ import annotations

from tests.devcluster import Cluster, Database, make_schema, wait_for
from tests.integration.test_freedoor import ITEMS, TAGGED, door, request_rows, start, without_binlog

OTHER = "CREATE TABLE `{schema}`.other (id INT PRIMARY KEY, n INT)"


def test_a_delete_asked_in_a_window_without_events_after_a_change_is_loaded_in_order(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A window with no replicated change between its watermarks (a quiet source), in a batch
    that holds a change before it: the window's start and end are one place, and the row
    read went in before the delete asked. The merge made 'row, delete' nothing, so the
    target kept its stale row while the request counted as loaded. The batch is held open
    before the window by keeping the batch before it from loading (a row locked on the
    target), until the window's batch is cut at its high watermark."""
    schema = make_schema(source, target, ITEMS, OTHER)
    for db, name in ((source, "source"), (target, "stale")):
        without_binlog(db, f"INSERT INTO `{schema}`.items VALUES (1, 'a', 1), (2, '{name}', 2)",
                       f"INSERT INTO `{schema}`.other VALUES (1, 0), (2, 0)")
    start(cluster, "door-quiet", schema, ["items", "other"], free_door={"source": "target"},
          batch_timeout_ms=600_000)  # a batch is cut when the one before is loaded, or here
    used = lambda: cluster.pipeline_state("door-quiet").window_used  # noqa: E731
    locker = Database(cluster.sandbox, "target")
    try:
        locker.execute("BEGIN")
        locker.execute(f"SELECT * FROM `{schema}`.other WHERE id = 1 FOR UPDATE")
        source.execute(f"UPDATE `{schema}`.other SET n = 1 WHERE id = 1")
        wait_for(lambda: used() == 1, 60, "the batch of the first update loading (held)")
        source.execute(f"UPDATE `{schema}`.other SET n = 1 WHERE id = 2")  # the next batch
        request_rows(target, f"{schema}.items", [(2,)], kind="D", channel="door-quiet",
                     pipeline="forward")  # central: its window opens with that batch open
        wait_for(lambda: used() == 2, 60, "the batch cut at the window's high watermark")
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    wait_for(lambda: door(cluster, "door-quiet").loaded == 1, 60, "the delete served")
    wait_for(lambda: target.table(schema, "other") == source.table(schema, "other"), 30,
             "the updates")
    assert target.table(schema, "items") == [(1, "a", 1), (2, "source", 2)]
    cluster.set_status("door-quiet", "STOP")


def _isolation(db: Database, level: str) -> None:
    try:
        db.execute(f"SET GLOBAL transaction_isolation = '{level}'")
    except Exception:  # MariaDB before 11.1
        db.execute(f"SET GLOBAL tx_isolation = '{level}'")


def test_a_request_is_read_committed_on_a_source_whose_default_is_read_uncommitted(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The window's read took the server's default isolation: under READ UNCOMMITTED it
    read another transaction's change, which was then rolled back (no binlog event mends
    that): the target kept a value the source never committed. The reading session sets
    its own level."""
    schema = make_schema(source, target, ITEMS)
    t = f"`{schema}`.items"
    without_binlog(source, f"INSERT INTO {t} VALUES (1, 'committed', 1)")
    start(cluster, "door-dirty", schema, ["items"])
    writer = Database(cluster.sandbox, "source")
    _isolation(source, "READ-UNCOMMITTED")  # for the sessions opened from now on
    try:
        writer.execute("BEGIN")
        writer.execute(f"UPDATE {t} SET name = 'dirty' WHERE id = 1")
        request_rows(source, f"{schema}.items", [(1,)])
        wait_for(lambda: door(cluster, "door-dirty").loaded == 1, 60, "the request served")
    finally:
        _isolation(source, "REPEATABLE-READ")
        writer.execute("ROLLBACK")
        writer.close()
    assert target.table(schema, "items") == [(1, "committed", 1)]
    cluster.set_status("door-dirty", "STOP")


def test_a_delete_of_a_table_fanned_out_by_different_key_columns_is_rejected(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A request is read by the first pair's key_columns (code); its D reached the pair
    keyed by id as a delete by code, which paused the pipeline ('no primary key or unique
    key over (code)'), and at every resume after (the copy in retl_pending). Rejected,
    saying why; the stream goes on."""
    schema = make_schema(source, target, TAGGED)
    target.execute(f"CREATE TABLE `{schema}`.tagged2 (id INT PRIMARY KEY, "
                   "code VARCHAR(10) NOT NULL, n INT)")
    rows = "(1, '5', 0), (5, 'b', 0)"
    without_binlog(source, f"INSERT INTO `{schema}`.tagged VALUES {rows}")
    without_binlog(target, f"INSERT INTO `{schema}`.tagged VALUES {rows}",
                   f"INSERT INTO `{schema}`.tagged2 VALUES {rows}")
    pairs = [{"source": f"{schema}.tagged", "target": f"{schema}.tagged", "fan_out": True,
              "key_columns": ["code"]},
             {"source": f"{schema}.tagged", "target": f"{schema}.tagged2", "fan_out": True}]
    cluster.apply([{"name": "door-fanned", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": pairs}]}])
    cluster.set_status("door-fanned", "START")
    cluster.wait_running("door-fanned")
    request_rows(source, f"{schema}.tagged", [("5",)], kind="D")
    wait_for(lambda: door(cluster, "door-fanned").rejected == 1, 60, "the delete rejected")
    source.execute(f"INSERT INTO `{schema}`.tagged VALUES (7, 'c', 0)")
    for name in ("tagged", "tagged2"):
        wait_for(lambda name=name: (7, "c", 0) in target.table(schema, name), 60,
                 f"the stream into {name}")
    assert "the pairs the table fans out to find its rows by different key_columns" in \
        cluster.nodes[1].output()
    assert cluster.pipeline_state("door-fanned").state == "running"
    cluster.set_status("door-fanned", "STOP")
