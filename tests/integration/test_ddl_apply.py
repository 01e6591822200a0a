"""The load's DDL on a real target: a DDL that ran before a crash is not run again, one
whose intent was written but never ran runs on the replay, and one whose object the target
holds already runs, stops or is taken as applied by how that object differs."""

from __future__ import annotations

import pymysql
import pytest

from node.changes import Batch, ChangeType, TargetChange, Transaction
from node.target.mysql.ddlapply import INTENT_DDL, apply_ddl, fingerprint, ran_before, tables_of
from node.target.mysql.loader import Loader
from shared.model import BinlogPosition, PipelineParams
from tests.devcluster import make_schema
from tests.integration.test_ddl import columns
from tests.integration.test_load import target_endpoint


def ddl_change(schema: str, table: str, statement: str) -> TargetChange:
    return TargetChange("target", schema, table, ChangeType.DDL, (), None, None, ddl=statement)


def ddl_batch(process_id: int, pos: int) -> Batch:
    end = BinlogPosition("binlog.000001", pos)
    return Batch("ddl.forward", process_id, [Transaction((), end, 0, 0)],
                 start=BinlogPosition("binlog.000001", pos - 100))


@pytest.mark.parametrize("statement,check", [
    ("ALTER TABLE {t}.a CHANGE x x2 INT", "SHOW COLUMNS FROM {t}.a"),
    ("ALTER TABLE {t}.a ADD INDEX (y)", "SHOW INDEX FROM {t}.a"),
    ("ALTER TABLE {t}.a ADD PRIMARY KEY (x)", "SHOW INDEX FROM {t}.a"),
    ("RENAME TABLE {t}.a TO {t}.tmp, {t}.b TO {t}.a, {t}.tmp TO {t}.b",
     "SELECT * FROM {t}.a"),
], ids=["change-column", "unnamed-index", "primary-key", "swap"])
def test_a_ddl_that_ran_before_a_crash_is_not_run_again(sandbox, source, target, statement,
                                                         check):
    """kill -9 between a DDL and its position: the restart finds the target's schema moved
    since the DDL's intent and takes it as applied, whatever its kind (a replay of these
    stalled the pipeline, made a second index, or swapped the tables back)."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.a (x INT NOT NULL, y INT)",
                         "CREATE TABLE `{schema}`.b (x INT NOT NULL, y INT)")
    target.execute(f"INSERT INTO `{schema}`.a VALUES (1, 1)")
    target.execute(f"INSERT INTO `{schema}`.b VALUES (2, 2)")
    pipeline_id = f"ddl-{schema}.forward"
    change = ddl_change(schema, "a", statement.format(t=f"`{schema}`"))
    loader = Loader(pipeline_id, {"target": target_endpoint(sandbox)}, PipelineParams(),
                    epoch=5)
    conn = pymysql.connect(**sandbox.connection("target"), autocommit=False)
    try:
        assert loader.load(ddl_batch(1, 100), []) == 0  # the pipeline's position row
        with conn.cursor() as cursor:  # the first owner ran it, then died before the position
            apply_ddl(cursor, change, pipeline_id, 2, ddl_batch(2, 200).end, 0)
        expected = target.rows(check.format(t=f"`{schema}`"))
        assert loader.load(ddl_batch(3, 200), [change]) == 0  # the new owner's replay
        assert target.rows(check.format(t=f"`{schema}`")) == expected
        assert target.rows("SELECT binlog_pos FROM retl.retl_position WHERE pipeline_id = %s",
                           (pipeline_id,)) == [(200,)]
        assert target.rows("SELECT COUNT(*) FROM retl.retl_ddl WHERE pipeline_id = %s",
                           (pipeline_id,)) == [(0,)]
    finally:
        conn.close()
        loader.close()


@pytest.mark.parametrize("table,writer,older", [
    ("(x INT NOT NULL, y INT)", "", False),
    ("(id INT AUTO_INCREMENT PRIMARY KEY, x INT)", "INSERT INTO {t} (x) VALUES (1), (2)",
     False),
    ("(id INT AUTO_INCREMENT PRIMARY KEY, x INT)", "", True),
], ids=["alone", "rows-came-meanwhile", "intent-of-an-older-build"])
def test_a_ddl_whose_intent_was_written_but_that_never_ran_runs_on_the_replay(
        sandbox, source, target, table, writer, older):
    """The intent committed, then the node died before the DDL ran: the replay runs it —
    also when another writer's row moved the table's AUTO_INCREMENT counter meanwhile (the
    schema did not move; the counter was taken for a sign that the DDL ran), and when the
    intent is an older build's, whose fingerprint counted the counter (an upgrade between
    the intent and the replay took it for run)."""
    schema = make_schema(source, target, f"CREATE TABLE `{{schema}}`.a {table}")
    t = f"`{schema}`.a"
    pipeline_id = f"ddl2-{schema}.forward"
    change = ddl_change(schema, "a", f"ALTER TABLE {t} CHANGE x x2 INT")
    loader = Loader(pipeline_id, {"target": target_endpoint(sandbox)}, PipelineParams(),
                    epoch=5)
    conn = pymysql.connect(**sandbox.connection("target"), autocommit=False)
    try:
        assert loader.load(ddl_batch(1, 100), []) == 0  # the pipeline's position row
        with conn.cursor() as cursor:  # the intent committed, then the node died
            if older:
                target.execute(f"INSERT INTO {t} (x) VALUES (1)")  # AUTO_INCREMENT=2
                cursor.execute(INTENT_DDL)
                cursor.execute("INSERT INTO retl.retl_ddl VALUES (%s, %s, %s, 0, %s, %s)",
                               (pipeline_id, "binlog.000001", 200, fingerprint(
                                   cursor, tables_of(change), counters=True), change.ddl))
                cursor.execute("COMMIT")
            else:
                assert not ran_before(cursor, change, pipeline_id, ddl_batch(2, 200).end, 0)
        if writer:
            target.execute(writer.format(t=t))
        assert loader.load(ddl_batch(2, 200), [change]) == 1
        names = [c for c, _ in columns(target, schema, "a")]
        assert "x2" in names and "x" not in names
    finally:
        conn.close()
        loader.close()


def test_an_alter_with_a_clause_already_on_the_target_stops_rather_than_skip_the_others(
        sandbox, source, target):
    """The target has the column the ALTER adds: the ALTER fails as a whole, so its other
    clause never ran; taking it as applied left the column's type behind."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.a (x INT NOT NULL, y INT)")
    target.execute(f"ALTER TABLE `{schema}`.a ADD note TEXT")
    pipeline_id = f"ddl4-{schema}.forward"
    change = ddl_change(schema, "a", f"ALTER TABLE `{schema}`.a ADD note TEXT, "
                        "MODIFY y BIGINT")
    single = ddl_change(schema, "a", f"ALTER TABLE `{schema}`.a ALGORITHM=COPY, ADD note TEXT")
    loader = Loader(pipeline_id, {"target": target_endpoint(sandbox)}, PipelineParams(),
                    epoch=5)
    try:
        with pytest.raises(Exception, match="part of it is there already"):
            loader.load(ddl_batch(1, 100), [change])
        assert dict(columns(target, schema, "a"))["y"] == "int(11)"
        assert loader.load(ddl_batch(2, 200), [single]) == 0  # one clause: taken as applied
    finally:
        loader.close()


@pytest.mark.parametrize("on_target,statement,differs", [
    ("ALTER TABLE {t}.a ADD note VARCHAR(10)", "ALTER TABLE {t}.a ADD note TEXT", "note"),
    ("ALTER TABLE {t}.a ADD n INT NULL", "ALTER TABLE {t}.a ADD COLUMN n INT NOT NULL", "n"),
    ("CREATE TABLE {t}.b (id INT PRIMARY KEY, v VARCHAR(5))",
     "CREATE TABLE {t}.b (id INT PRIMARY KEY, v VARCHAR(20))", "v"),
    ("CREATE TABLE {t}.b (id INT PRIMARY KEY)",
     "CREATE TABLE {t}.b (id INT PRIMARY KEY, v INT)", "v"),
    ("CREATE INDEX i ON {t}.a (y)", "CREATE UNIQUE INDEX i ON {t}.a (y)", "unique keys"),
    ("ALTER TABLE {t}.a ADD UNIQUE KEY k (x)", "ALTER TABLE {t}.a ADD UNIQUE KEY k (y)",
     "unique keys"),
    ("CREATE TABLE {t}.b (id INT PRIMARY KEY, p INT, v INT, CONSTRAINT fk FOREIGN KEY (p) "
     "REFERENCES {t}.b (id))", "CREATE TABLE {t}.b (id INT PRIMARY KEY, p INT, v BIGINT, "
     "CONSTRAINT fk FOREIGN KEY (p) REFERENCES {t}.b (id))", "v"),
], ids=["column-type", "column-null", "create-type", "create-columns", "index-unique",
        "key-columns", "create-foreign-key"])
def test_a_ddl_whose_object_is_there_already_but_differs_stops(sandbox, source, target,
                                                               on_target, statement, differs):
    """A CREATE TABLE or ADD COLUMN failing with "exists" was taken as applied whatever the
    target's table or column was: the rows then loaded into another type (VARCHAR(10) cut
    the source's TEXT) or another key. It stops, naming what differs; once the target's
    table is made alike by hand, the retry takes it as applied."""
    t, table, change, loader = differing(sandbox, source, target, on_target, statement,
                                         "ddl-alike")
    try:
        before = target.rows(f"SHOW CREATE TABLE {t}.{table}")
        with pytest.raises(Exception, match="not as the statement makes it") as caught:
            loader.load(ddl_batch(1, 100), [change])
        assert differs in str(caught.value) and f"{t}.`{table}`" in str(caught.value)
        assert target.rows(f"SHOW CREATE TABLE {t}.{table}") == before
        # touched by hand, not made alike: the retry checks again (the failed statement's
        # intent is gone: a schema moved since it is no sign that the statement ran)
        target.execute(f"ALTER TABLE {t}.{table} COMMENT 'touched'")
        with pytest.raises(Exception, match="not as the statement makes it"):
            loader.load(ddl_batch(1, 100), [change])
        # made alike by hand: the retry of the same statement takes it as applied
        target.execute(f"DROP TABLE {t}.{table}")
        if table == "a":
            target.execute(f"CREATE TABLE {t}.a (x INT NOT NULL, y INT)")
        target.execute(statement.format(t=t))
        alike = target.rows(f"SHOW CREATE TABLE {t}.{table}")
        assert loader.load(ddl_batch(1, 100), [change]) == 0
        assert target.rows(f"SHOW CREATE TABLE {t}.{table}") == alike
        assert target.rows(f"SHOW TABLES FROM {t}") == [("a",)] + (
            [("b",)] if table == "b" else [])  # the probe is gone
    finally:
        loader.close()


def differing(sandbox, source, target, on_target: str, statement: str, name: str
              ) -> tuple[str, str, object, Loader]:
    """A schema with table ``a`` whose target copy ``on_target`` changed, the DDL change of
    ``statement`` on it (or on ``b``), and a Loader of pipeline ``name``."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.a (x INT NOT NULL, y INT)")
    t = f"`{schema}`"
    target.execute(on_target.format(t=t))
    table = "b" if "{t}.b" in statement else "a"
    loader = Loader(f"{name}-{schema}.forward", {"target": target_endpoint(sandbox)},
                    PipelineParams(), epoch=5)
    return t, table, ddl_change(schema, table, statement.format(t=t)), loader


@pytest.mark.parametrize("on_target,statement,differs", [
    ("ALTER TABLE {t}.a ADD note VARCHAR(10)",
     "ALTER TABLE {t}.a ADD COLUMN IF NOT EXISTS note TEXT", "note"),
    ("CREATE TABLE {t}.b (id INT PRIMARY KEY, v VARCHAR(5))",
     "CREATE TABLE IF NOT EXISTS {t}.b (id INT PRIMARY KEY, v VARCHAR(20))", "v"),
    ("CREATE INDEX i ON {t}.a (y)", "CREATE UNIQUE INDEX IF NOT EXISTS i ON {t}.a (y)",
     "unique keys"),
    ("ALTER TABLE {t}.a ADD KEY k (x)", "ALTER TABLE {t}.a ADD UNIQUE KEY IF NOT EXISTS k (x)",
     "unique keys"),
], ids=["add-column", "create-table", "create-index", "add-key"])
def test_an_if_not_exists_ddl_whose_object_is_there_but_differs_stops(
        sandbox, source, target, on_target, statement, differs):
    """With IF NOT EXISTS the target did nothing, with a note and no error, and the pipeline
    went on with the target's VARCHAR(10) where the source's column is TEXT (or a key that
    is not unique): rows loaded into another shape. It stops, naming what differs; made
    alike by hand, the retry passes."""
    t, table, change, loader = differing(sandbox, source, target, on_target, statement,
                                         "ddl-ifnot")
    try:
        with pytest.raises(Exception, match="not as the statement makes it") as caught:
            loader.load(ddl_batch(1, 100), [change])
        assert differs in str(caught.value) and "did nothing on target" in str(caught.value)
        assert f"{t}.`{table}`" in str(caught.value)
        target.execute(f"DROP TABLE {t}.{table}")
        if table == "a":
            target.execute(f"CREATE TABLE {t}.a (x INT NOT NULL, y INT)")
        target.execute(statement.format(t=t))
        assert loader.load(ddl_batch(1, 100), [change]) == 0
        assert target.rows(f"SHOW TABLES FROM {t}") == [("a",)] + (
            [("b",)] if table == "b" else [])  # the probe is gone
    finally:
        loader.close()


def test_a_ddl_whose_object_is_there_alike_is_taken_as_applied(sandbox, source, target):
    """The ones the target already has as the statement makes them pass, as before (a
    table made by hand, from the source's SHOW CREATE TABLE, before the channel ran)."""
    schema = make_schema(
        source, target, "CREATE TABLE `{schema}`.a (x INT NOT NULL, y INT, note TEXT, "
        "UNIQUE KEY k (x), KEY i (y)) DEFAULT CHARSET=latin1")
    t = f"`{schema}`"
    pipeline_id = f"ddl-alike2-{schema}.forward"
    loader = Loader(pipeline_id, {"target": target_endpoint(sandbox)}, PipelineParams(),
                    epoch=5)
    try:
        for pos, statement in enumerate([
                "CREATE TABLE {t}.a (x INT NOT NULL, y INT, note TEXT, UNIQUE KEY k (x), "
                "KEY i (y)) DEFAULT CHARSET=latin1",
                "ALTER TABLE {t}.a ADD COLUMN note TEXT", "ALTER TABLE {t}.a ADD UNIQUE k (x)",
                "CREATE INDEX i ON {t}.a (y)",
                "CREATE TABLE {t}.c (id INT PRIMARY KEY, a INT, CONSTRAINT fk FOREIGN KEY (a) "
                "REFERENCES {t}.a (x) ON DELETE CASCADE, KEY (a))"], 1):
            if "{t}.c" in statement:
                target.execute(statement.format(t=t))
            assert loader.load(ddl_batch(pos, pos * 100),
                               [ddl_change(schema, "a", statement.format(t=t))]) == 0
    finally:
        loader.close()


def test_a_ddl_the_check_cannot_try_or_a_target_further_along_is_taken_as_applied(
        sandbox, source, target):
    """A CREATE TABLE replayed onto a target whose copy was made from the source's table as
    it is now (a column added later there too) is as the statement makes it, its later
    column aside; a partitioned table cannot be tried on a temporary one (nor can any table
    without the CREATE TEMPORARY TABLES grant): taken as applied as before, with a warning.
    Both stopped the pipeline for nothing."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.a (x INT NOT NULL, y INT)")
    t = f"`{schema}`"
    target.script(f"CREATE TABLE {t}.b (id INT PRIMARY KEY, v INT, later TEXT)",
                  f"CREATE TABLE {t}.p (id INT PRIMARY KEY, v INT) PARTITION BY HASH (id) "
                  "PARTITIONS 2")
    pipeline_id = f"ddl-alike3-{schema}.forward"
    loader = Loader(pipeline_id, {"target": target_endpoint(sandbox)}, PipelineParams(),
                    epoch=5)
    try:
        for pos, (table, statement) in enumerate([
                ("b", "CREATE TABLE {t}.b (id INT PRIMARY KEY, v INT)"),
                ("p", "CREATE TABLE {t}.p (id INT PRIMARY KEY, v INT) PARTITION BY HASH (id) "
                 "PARTITIONS 2"),
                ("p", "ALTER TABLE {t}.p ADD COLUMN v INT")], 1):
            assert loader.load(ddl_batch(pos, pos * 100),
                               [ddl_change(schema, table, statement.format(t=t))]) == 0
    finally:
        loader.close()

