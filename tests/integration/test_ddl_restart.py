"""DDL logged while the node was down, on real servers: what the pipeline reads of the
source's schema when it starts again is the schema after it (a column's type before a
MODIFY, versioning added and dropped again), so the statement in the binlog decides. The
workload's keyless, unique-swap and sum tables go through the same pipeline and kill."""

from __future__ import annotations

import pytest

from tests.devcluster import Cluster, Database, make_schema, wait_for
from tests.integration.shapes import Shapes, beside
from tests.integration.test_ddl import channel, copied, running


def down_while(cluster: Cluster, source: Database, shapes: Shapes,
               statements: list[str]) -> None:
    """Kill the node under the workload, run ``statements`` on the source (the workload
    stopped first: its rows all come before them), start the node again."""
    shapes.start()
    shapes.keep_on(40)
    cluster.nodes[1].kill()
    shapes.keep_on(20, reads=5)
    shapes.pause()
    source.script(*statements)
    cluster.start_node(1)


def paused(cluster: Cluster, name: str) -> str:
    wait_for(lambda: cluster.channel_status(name) == "PAUSE", 120, "the pause")
    return cluster.pipeline_state(name).last_error


def test_without_ddl_sync_a_strict_alter_to_an_integer_after_a_restart_pauses(
        cluster: Cluster, source: Database, target: Database) -> None:
    """After a restart no table map of the table had been read, so the column's type before
    the ALTER was not known and the new type alone was judged, and INT was not one that
    rounds: MariaDB rounded 1.655 to 2 in place (a strict sql_mode does not fail it) with no
    row event, and the target kept 1.655. With the type before unknown, a MODIFY to any
    number or time type pauses."""
    name = "ddl-restart-int"
    shapes = Shapes(cluster.sandbox, source, target, seed=61, kinds=3)
    columns = "id INT PRIMARY KEY, price DECIMAL(10,3)"
    schema = make_schema(source, target, f"CREATE TABLE `{{schema}}`.items ({columns})")
    copy = copied(target, schema, columns)
    running(cluster, beside(channel(name, schema, copy, False), shapes.schema))
    s = f"`{schema}`.items"
    source.script(f"INSERT INTO {s} VALUES (1, 1.655), (2, 7.4)")
    wait_for(lambda: len(target.table(copy, "items_copy")) == 2, 60, "the rows")
    down_while(cluster, source, shapes, [
        "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'",
        f"ALTER TABLE {s} MODIFY price INT",
        "SET SESSION sql_mode = DEFAULT", f"INSERT INTO {s} VALUES (3, 3)"])
    error = paused(cluster, name)
    assert "may have rewritten the values" in error and "'MODIFY price INT'" in error, error
    assert f"setl position set {name}/forward" in error, error
    assert source.table(schema, "items") == [(1, 2), (2, 7), (3, 3)]
    assert [(i, str(price)) for i, price in target.table(copy, "items_copy")] == [
        (1, "1.655"), (2, "7.400")]
    shapes.finish(source)
    cluster.set_status(name, "STOP")


def test_without_ddl_sync_widenings_after_a_restart_pass_by_the_targets_column(
        cluster: Cluster, source: Database, target: Database) -> None:
    """After a restart no table map of the table had been read, so a plain widening (INT to
    BIGINT) paused as any MODIFY to a number type, as did a MODIFY of a column an earlier
    ALTER of the same stretch had added (no row event between). The first is judged by the
    target's column (its values are what the target holds), the second by the type the ADD
    gave it (the target's DECIMAL(12,4) would say otherwise); the rows after them come
    through. A MODIFY that rounds the target's column's values still pauses, saying where
    the statement ends, the table and the column."""
    name = "ddl-restart-widen"
    shapes = Shapes(cluster.sandbox, source, target, seed=71, kinds=3)
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, "
                         "n INT, price DECIMAL(10,3))")
    # (the operator made the target's new column ahead, with more decimals than the source's)
    copy = copied(target, schema, "id INT PRIMARY KEY, n INT, price DECIMAL(10,3), "
                                  "d DECIMAL(12,4) NULL")
    running(cluster, beside(channel(name, schema, copy, False), shapes.schema))
    s = f"`{schema}`.items"
    source.script(f"INSERT INTO {s} VALUES (1, 1, 1.655), (2, 2, 7.4)")
    wait_for(lambda: len(target.table(copy, "items_copy")) == 2, 60, "the rows")
    down_while(cluster, source, shapes, [
        "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'",
        f"ALTER TABLE {s} MODIFY n BIGINT",  # the target's INT: a widening
        f"ALTER TABLE {s} MODIFY n BIGINT NOT NULL",  # by the type the first one set
        f"ALTER TABLE {s} ADD d DECIMAL(10,2) NULL",
        f"ALTER TABLE {s} MODIFY d DECIMAL(12,2)",  # by the type the ADD set
        f"INSERT INTO {s} VALUES (3, 3000000, 2.5, 1.25)",
        f"ALTER TABLE {s} MODIFY price INT",  # rounds DECIMAL(10,3): 1.655 kept as 2
        "SET SESSION sql_mode = DEFAULT", f"INSERT INTO {s} VALUES (4, 4, 4, NULL)"])
    error = paused(cluster, name)
    assert "may have rewritten the values of column `price` of " \
        f"`{schema}`.`items`" in error and "'MODIFY price INT'" in error, error
    assert "the statement ends at binlog " in error, error
    assert f"setl position set {name}/forward --file " in error, error
    assert [(i, n, str(price), d if d is None else str(d))
            for i, n, price, d in target.table(copy, "items_copy")] == [
        (1, 1, "1.655", None), (2, 2, "7.400", None), (3, 3000000, "2.500", "1.2500")]
    assert [(i, str(price)) for i, _, price, _ in source.table(schema, "items")] == [
        (1, "2"), (2, "7"), (3, "3"), (4, "4")]
    shapes.finish(source)
    cluster.set_status(name, "STOP")


@pytest.mark.parametrize(("on_source", "on_target", "to"), [
    ("TIMESTAMP", "DATETIME", "DATETIME"), ("DATETIME", "TIMESTAMP", "TIMESTAMP")],
    ids=["timestamp-to-datetime", "datetime-to-timestamp"])
def test_without_ddl_sync_a_modify_between_timestamp_and_datetime_after_a_restart_pauses(
        cluster: Cluster, source: Database, target: Database, on_source: str, on_target: str,
        to: str) -> None:
    """A pair may write a TIMESTAMP column into a DATETIME one (and back). After a restart
    the MODIFY of the source's column into the target's type was judged by the target's
    column — the same type, nothing rounded — and passed, while the source rewrote every
    row through its session's zone (+05:00 here), no row events, the target kept its values,
    status green (a review). A target's DATETIME or TIMESTAMP column tells nothing of the
    source's type: the MODIFY pauses."""
    name = f"ddl-restart-{on_source.lower()}"
    shapes = Shapes(cluster.sandbox, source, target, seed=83, kinds=3)
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, "
                         f"ts {on_source} NULL)")
    copy = copied(target, schema, f"id INT PRIMARY KEY, ts {on_target} NULL")
    running(cluster, beside(channel(name, schema, copy, False), shapes.schema))
    s = f"`{schema}`.items"
    source.script("SET SESSION time_zone = '+00:00'",
                  f"INSERT INTO {s} VALUES (1, '2026-01-01 00:00:00')")
    wait_for(lambda: len(target.table(copy, "items_copy")) == 1, 60, "the row")
    down_while(cluster, source, shapes, [
        "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'", "SET SESSION time_zone = '+05:00'",
        f"ALTER TABLE {s} MODIFY ts {to} NULL",
        "SET SESSION sql_mode = DEFAULT", f"INSERT INTO {s} VALUES (2, NULL)"])
    error = paused(cluster, name)
    assert "may have rewritten the values of column `ts`" in error, error
    assert len(target.table(copy, "items_copy")) == 1
    shapes.finish(source)
    cluster.set_status(name, "STOP")


@pytest.mark.parametrize("ddl_sync", [False, True], ids=["sync-off", "sync-on"])
def test_versioning_added_and_dropped_while_the_node_was_down_pauses(
        cluster: Cluster, source: Database, target: Database, ddl_sync: bool) -> None:
    """The start's check reads the source's schema, no longer versioned: the row events of
    the versioned time (a DELETE logged as an UPDATE of row_end, row_start and row_end in
    every image) were retried forever on "Unknown column 'row_start'". The ADD SYSTEM
    VERSIONING in the binlog pauses, with the versioned table's message, before them."""
    name = f"ddl-restart-vers-{int(ddl_sync)}"
    shapes = Shapes(cluster.sandbox, source, target, seed=67, kinds=3)
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, "
                         "v INT)")
    copy = copied(target, schema, "id INT PRIMARY KEY, v INT")
    running(cluster, beside(channel(name, schema, copy, ddl_sync), shapes.schema))
    s = f"`{schema}`.items"
    source.script(f"INSERT INTO {s} VALUES (1, 1), (2, 2), (3, 3)")
    wait_for(lambda: len(target.table(copy, "items_copy")) == 3, 60, "the rows")
    down_while(cluster, source, shapes, [
        f"ALTER TABLE {s} ADD SYSTEM VERSIONING", f"UPDATE {s} SET v = 10 WHERE id = 1",
        f"DELETE FROM {s} WHERE id = 2", f"ALTER TABLE {s} DROP SYSTEM VERSIONING",
        f"INSERT INTO {s} VALUES (4, 4)"])
    error = paused(cluster, name)
    assert "is a system-versioned table" in error and "ADD SYSTEM VERSIONING" in error, error
    assert f"setl position set {name}/forward" in error, error
    assert target.table(copy, "items_copy") == [(1, 1), (2, 2), (3, 3)]
    assert "row_start" not in [column for (column,) in target.rows(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
        "TABLE_NAME = 'items_copy'", (copy,))]
    shapes.finish(source)
    cluster.set_status(name, "STOP")
