"""DDL a pipeline does not replay, on real servers: filtered with ddl_sync off, or a pause
naming what to do (a TRUNCATE or a lossy ALTER without ddl_sync, a key added behind the
start, a DROP DATABASE)."""

from __future__ import annotations

import pytest

from tests.devcluster import Cluster, Database, make_schema, wait_for
from tests.integration.test_ddl import channel, columns, copied, running, tables


def test_ddl_is_filtered_when_ddl_sync_is_off(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target,
                         "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(10))")
    copy = copied(target, schema, "id INT PRIMARY KEY, name VARCHAR(10)")
    running(cluster, channel("ddl-off", schema, copy, False))
    s = f"`{schema}`"
    source.script(f"ALTER TABLE {s}.items ADD COLUMN note TEXT",
                  f"CREATE TABLE {s}.t_1 (id INT PRIMARY KEY)",
                  f"INSERT INTO {s}.items (id, name) VALUES (1, 'rows go on')")
    # the row carries the new column, which the target does not have: Load refuses it (and
    # retries) rather than dropping data; the DDL itself was not replayed
    wait_for(lambda: "Unknown column 'note'" in cluster.pipeline_state("ddl-off").last_error,
             60, "the load error on the missing column")
    assert target.table(copy, "items_copy") == []
    assert tables(target, copy) == ["items_copy"]
    assert columns(target, copy, "items_copy") == [("id", "int(11)"), ("name", "varchar(10)")]
    cluster.set_status("ddl-off", "STOP")


def ddl_off(cluster: Cluster, source: Database, target: Database, name: str, columns: str,
            copy_columns: str) -> tuple[str, str, str]:
    """A new schema's ``items`` (``columns``) on the source, copied into ``items_copy``
    (``copy_columns``) of another schema on the target by channel ``name`` running without
    ddl_sync: (schema, the copy's schema, the source table's name)."""
    schema = make_schema(source, target, f"CREATE TABLE `{{schema}}`.items ({columns})")
    copy = copied(target, schema, copy_columns)
    running(cluster, channel(name, schema, copy, False))
    return schema, copy, f"`{schema}`.items"


def test_without_ddl_sync_a_truncate_pauses_and_ddl_sync_then_replays_it(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A TRUNCATE (a log table's rotation) was dropped without a word: the new rows' ids
    started again at 1 and were written over the old rows, the rest stayed. It pauses the
    pipeline with the statement and what to do, the target untouched; ddl_sync turned on
    (what the message offers) replays it and the rows after it."""
    schema, copy, s = ddl_off(cluster, source, target, "ddl-truncate",
                              "id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(10)",
                              "id INT PRIMARY KEY, name VARCHAR(10)")
    source.script(f"INSERT INTO {s} (name) VALUES ('old1'), ('old2')")
    wait_for(lambda: target.table(copy, "items_copy") == [(1, "old1"), (2, "old2")], 60,
             "the rows before the TRUNCATE")
    source.script(f"TRUNCATE TABLE {s}", f"INSERT INTO {s} (name) VALUES ('new1')")
    wait_for(lambda: cluster.channel_status("ddl-truncate") == "PAUSE", 90, "the pause")
    error = cluster.pipeline_state("ddl-truncate").last_error
    assert "with ddl_sync off it is not replayed" in error, error
    assert f"`{schema}`.`items`" in error and "TRUNCATE TABLE" in error
    assert "setl position set ddl-truncate/forward" in error
    assert target.table(copy, "items_copy") == [(1, "old1"), (2, "old2")]
    running(cluster, channel("ddl-truncate", schema, copy, True))
    wait_for(lambda: target.table(copy, "items_copy") == [(1, "new1")], 60,
             "the TRUNCATE replayed, then the new row")
    cluster.set_status("ddl-truncate", "STOP")


def test_without_ddl_sync_an_alter_that_cut_values_in_a_lax_session_pauses(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A MODIFY in a session without a strict sql_mode cut the source's values in place with
    no row event ('abcdefgh' kept as 'abcde'): it passed unseen, the target kept the old
    value. It pauses; the same kind of ALTER in a strict session (where a cut fails it) goes
    on, as does the row after it."""
    schema, copy, s = ddl_off(cluster, source, target, "ddl-lax-modify",
                              "id INT PRIMARY KEY, name VARCHAR(10)",
                              "id INT PRIMARY KEY, name VARCHAR(20)")
    source.script(f"INSERT INTO {s} VALUES (1, 'abcdefgh')",
                  "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'",
                  f"ALTER TABLE {s} MODIFY name VARCHAR(20)", f"INSERT INTO {s} VALUES (2, 'b')")
    wait_for(lambda: len(target.table(copy, "items_copy")) == 2, 60, "the rows past a strict "
             "ALTER")
    source.script("SET SESSION sql_mode = ''", f"ALTER TABLE {s} MODIFY name VARCHAR(5)",
                  "SET SESSION sql_mode = DEFAULT")
    wait_for(lambda: cluster.channel_status("ddl-lax-modify") == "PAUSE", 90, "the pause")
    error = cluster.pipeline_state("ddl-lax-modify").last_error
    assert "may have rewritten the values" in error and "MODIFY name VARCHAR(5)" in error, error
    assert source.table(schema, "items") == [(1, "abcde"), (2, "b")]
    assert target.table(copy, "items_copy") == [(1, "abcdefgh"), (2, "b")]
    cluster.set_status("ddl-lax-modify", "STOP")


def test_without_ddl_sync_a_strict_alter_that_rounded_values_pauses(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A strict sql_mode does not fail a DECIMAL's scale reduced: MariaDB rounds the values
    in place (1.255 kept as 1.3, a note) with no row event, and the target kept 1.255. It
    pauses, naming the clause."""
    schema, copy, s = ddl_off(cluster, source, target, "ddl-strict-round",
                              "id INT PRIMARY KEY, price DECIMAL(10,3)",
                              "id INT PRIMARY KEY, price DECIMAL(10,3)")
    source.script(f"INSERT INTO {s} VALUES (1, 1.255)")
    wait_for(lambda: len(target.table(copy, "items_copy")) == 1, 60, "the row")
    source.script("SET SESSION sql_mode = 'STRICT_TRANS_TABLES'",
                  f"ALTER TABLE {s} MODIFY price DECIMAL(10,1)",
                  "SET SESSION sql_mode = DEFAULT")
    wait_for(lambda: cluster.channel_status("ddl-strict-round") == "PAUSE", 90, "the pause")
    error = cluster.pipeline_state("ddl-strict-round").last_error
    assert "may have rewritten the values" in error, error
    assert "MODIFY price DECIMAL(10,1)" in error and f"`{schema}`.`items`" in error, error
    assert "setl position set ddl-strict-round/forward" in error, error
    assert [str(price) for _, price in source.table(schema, "items")] == ["1.3"]
    assert [str(price) for _, price in target.table(copy, "items_copy")] == ["1.255"]
    cluster.set_status("ddl-strict-round", "STOP")


def test_a_key_added_behind_the_start_stops_rather_than_merge_the_changes_before_it(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A table with no key, two rows of one code; stopped, the source changes them and adds
    a UNIQUE key on code; started again, the pipeline read that key and merged the changes
    before the ALTER by it (the two rows taken for one). It stops at the ALTER, saying the
    target's rows may differ and to copy the table again."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT NOT NULL, "
                         "name VARCHAR(10))")
    copy = copied(target, schema, "id INT NOT NULL, name VARCHAR(10)")
    name = "ddl-key-later"
    running(cluster, channel(name, schema, copy, False))
    s = f"`{schema}`.items"
    source.script(f"INSERT INTO {s} VALUES (1, 'a')")
    wait_for(lambda: target.table(copy, "items_copy") == [(1, "a")], 60, "the first row")
    cluster.set_status(name, "STOP")
    wait_for(lambda: cluster.pipeline_state(name).state == "not running", 30, "the stop")
    source.script(f"INSERT INTO {s} VALUES (1, 'b')", f"UPDATE {s} SET name = 'c' WHERE "
                  "name = 'a'", f"DELETE FROM {s} WHERE name = 'b'",
                  f"ALTER TABLE {s} ADD UNIQUE KEY uk (id)")
    cluster.set_status(name, "START")
    wait_for(lambda: cluster.channel_status(name) == "PAUSE", 90, "the pause")
    error = cluster.pipeline_state(name).last_error
    assert "merged by a key it did not have then" in error, error
    assert "setl snapshot" in error and f"`{schema}`.`items`" in error
    cluster.set_status(name, "STOP")


@pytest.mark.parametrize("sync", [True, False], ids=["sync-on", "sync-off"])
def test_a_drop_database_of_replicated_tables_pauses(
        cluster: Cluster, source: Database, target: Database, sync: bool) -> None:
    """DROP DATABASE is never replayed: the CREATE TABLE after it met the target's old table
    (1050, taken as applied) and the new rows mixed with the old ones."""
    ddl = "CREATE TABLE `{schema}`.items (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(10))"
    schema = make_schema(source, target, ddl)
    name = f"ddl-dropdb-{'on' if sync else 'off'}"
    running(cluster, {"name": name, "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "ddl_sync": sync,
        "pairs": [{"source": f"{schema}.items", "target": f"{schema}.items"}]}]})
    source.script(f"INSERT INTO `{schema}`.items (name) VALUES ('old1'), ('old2')")
    wait_for(lambda: len(target.table(schema, "items")) == 2, 60, "the rows before the drop")
    source.script(f"DROP DATABASE `{schema}`", f"CREATE DATABASE `{schema}`", ddl.format(
        schema=schema), f"INSERT INTO `{schema}`.items (name) VALUES ('new1')")
    wait_for(lambda: cluster.channel_status(name) == "PAUSE", 90, "the pause")
    error = cluster.pipeline_state(name).last_error
    assert "setl never replays DROP DATABASE" in error and f"DROP DATABASE `{schema}`" in error
    assert target.table(schema, "items") == [(1, "old1"), (2, "old2")]
    cluster.set_status(name, "STOP")



@pytest.mark.parametrize("default, how", [
    ("NEXTVAL(`{schema}`.sq)", "NEXTVAL()"),  # the target's sequence is the target's
    ("(DATABASE())", "DATABASE()"),  # the target's database is another: {schema}_copy
], ids=["sequence", "database"])
def test_with_ddl_sync_a_column_added_with_a_default_made_where_it_runs_pauses(
        cluster: Cluster, source: Database, target: Database, default: str, how: str) -> None:
    """Replayed, ADD COLUMN … DEFAULT NEXTVAL(sq) filled the target's rows from the target's
    own sequence (1, 2 where the source had 4, 5), DEFAULT (DATABASE()) with the target's
    database name, without a word: each existing row's value is made where the statement
    runs, with no row event. A default of the statement's clock is still replayed (under
    the source's timestamp); one setl does not know to repeat pauses, the target's table
    left as it was."""
    name = f"ddl-unrep-{how[:4].lower()}"
    schema = make_schema(source, target, "CREATE SEQUENCE `{schema}`.sq START WITH 1",
                         "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, v INT)")
    copy = copied(target, schema, "id INT PRIMARY KEY, v INT")
    running(cluster, channel(name, schema, copy, True))
    s = f"`{schema}`.items"
    source.script(f"INSERT INTO {s} VALUES (1, 1), (2, 2)",
                  *[f"SELECT NEXTVAL(`{schema}`.sq)" for _ in range(3)],
                  f"ALTER TABLE {s} ADD COLUMN at DATETIME(6) DEFAULT NOW(6)")
    wait_for(lambda: target.table(copy, "items_copy") == source.table(schema, "items"), 60,
             "the column of the statement's clock replayed, with the source's values")
    source.script(f"ALTER TABLE {s} ADD COLUMN n VARCHAR(64) DEFAULT "
                  + default.format(schema=schema),
                  f"INSERT INTO {s} (id, v) VALUES (3, 3)")
    wait_for(lambda: cluster.channel_status(name) == "PAUSE", 90, "the pause")
    error = cluster.pipeline_state(name).last_error
    assert f"adds column n with {how}" in error, error
    assert "setl snapshot" in error and "setl position set" in error, error
    assert [column for column, _ in columns(target, copy, "items_copy")] == ["id", "v", "at"]
    assert [row[:2] for row in target.table(copy, "items_copy")] == [(1, 1), (2, 2)]
    cluster.set_status(name, "STOP")


def test_with_ddl_sync_columns_added_with_defaults_setl_knows_to_repeat_are_replayed(
        cluster: Cluster, source: Database, target: Database) -> None:
    """DEFAULT (FROM_UNIXTIME(0)), a geometry made of literals (POINT(1, 2),
    ST_GeomFromText('…')) and a column with an inline REFERENCES t_1 (id) paused as
    defaults setl did not know to repeat (the last: its table's name read as a call). They
    are replayed, the target's existing rows getting the source's values."""
    name = "ddl-repeat-defaults"
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, "
                         "v INT)", "CREATE TABLE `{schema}`.t_1 (id INT PRIMARY KEY)")
    copy = copied(target, schema, "id INT PRIMARY KEY, v INT")
    target.execute(f"CREATE TABLE `{copy}`.t_1 (id INT PRIMARY KEY)")
    running(cluster, channel(name, schema, copy, True))
    s = f"`{schema}`.items"
    source.script(f"INSERT INTO `{schema}`.t_1 VALUES (5)",
                  f"INSERT INTO {s} VALUES (1, 1), (2, 2)",
                  f"ALTER TABLE {s} ADD COLUMN at DATETIME DEFAULT (FROM_UNIXTIME(86400))",
                  f"ALTER TABLE {s} ADD COLUMN p POINT DEFAULT (POINT(1, 2)), ADD COLUMN g "
                  "GEOMETRY DEFAULT (ST_GeomFromText('LINESTRING(0 0, 1 1)'))",
                  f"ALTER TABLE {s} ADD COLUMN r INT DEFAULT 5 REFERENCES t_1 (id) ON DELETE "
                  "SET NULL", f"INSERT INTO {s} (id, v) VALUES (3, 3)")
    shown = ("SELECT id, v, at, ST_AsText(p), ST_AsText(g), r FROM `{}`.{} ORDER BY id")
    wait_for(lambda: cluster.channel_status(name) == "PAUSE" or len(target.rows(
        shown.format(copy, "items_copy"))) == 3, 90, "the columns replayed and the row after "
        "them")
    assert cluster.channel_status(name) != "PAUSE", cluster.pipeline_state(name).last_error
    assert target.rows(shown.format(copy, "items_copy")) == \
        source.rows(shown.format(schema, "items"))
    assert [row[3:] for row in target.rows(shown.format(copy, "items_copy"))] == [
        ("POINT(1 2)", "LINESTRING(0 0,1 1)", 5)] * 3
    cluster.set_status(name, "STOP")


def test_a_sequence_a_pair_takes_pauses_and_is_refused_at_a_start(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Under a catch-all pair a CREATE SEQUENCE was not replayed (ddl_sync on), and the
    sequence's own row events were retried forever on "Table 'sq' doesn't exist". It pauses
    before them, naming the sequence; at a start, a sequence the pairs take is refused."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.a (id INT PRIMARY KEY, v INT)")

    def catch_all(name: str) -> dict:
        return {"name": name, "pipelines": [{
            "name": "forward", "source": "source", "target": "target", "ddl_sync": True,
            "pairs": [{"source": {"namespace": schema, "table": "re:.*"},
                       "target": {"namespace": schema, "table": "{table}"}}]}]}

    running(cluster, catch_all("ddl-seq"))
    s = f"`{schema}`"
    source.script(f"INSERT INTO {s}.a VALUES (1, 1)", f"CREATE SEQUENCE {s}.sq START WITH 100",
                  f"INSERT INTO {s}.a VALUES (NEXTVAL({s}.sq), 2)")
    said = f"{schema}.sq is a SEQUENCE"
    wait_for(lambda: cluster.channel_status("ddl-seq") == "PAUSE", 90, "the pause")
    error = cluster.pipeline_state("ddl-seq").last_error
    assert said in error and "Narrow the pipeline's pairs" in error, error
    assert target.table(schema, "a") == [(1, 1)]
    assert tables(target, schema) == ["a"]
    cluster.set_status("ddl-seq", "STOP")
    cluster.apply([catch_all("ddl-seq-again")])  # the sequence there at the start
    cluster.set_status("ddl-seq-again", "START")
    wait_for(lambda: said in cluster.pipeline_state("ddl-seq-again").last_error, 60,
             "the start refused")
    cluster.set_status("ddl-seq-again", "STOP")
