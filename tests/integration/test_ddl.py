"""DDL sync on real servers: table DDL replayed on the target with names mapped through the
pairs, schema changes mid-stream with rows before and after. DDL not replayed (filtered or
paused on): test_ddl_pauses.py; the load's DDL against what the target holds:
test_ddl_apply.py."""

from __future__ import annotations

import time

import pymysql
import pytest

from tests.devcluster import Cluster, Database, make_schema, wait_for


def columns(db: Database, schema: str, table: str) -> list[tuple[str, str]]:
    return db.rows("SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE "
                   "TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                   (schema, table))


def tables(db: Database, schema: str) -> list[str]:
    return [row[0] for row in db.rows("SELECT TABLE_NAME FROM information_schema.TABLES WHERE "
                                      "TABLE_SCHEMA = %s ORDER BY 1", (schema,))]


def channel(name: str, schema: str, copy: str, ddl_sync: bool) -> dict:
    return {"name": name, "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "ddl_sync": ddl_sync,
        "pairs": [{"source": f"{schema}.items", "target": f"{copy}.items_copy"},
                  {"source": {"namespace": schema, "table": "t_[1-3]"},
                   "target": {"namespace": copy, "table": "t_[1-3]"}}]}]}


def copied(target: Database, schema: str, columns: str) -> str:
    """The target database ``{schema}_copy`` with ``items_copy`` of ``columns`` in it."""
    copy = f"{schema}_copy"
    target.execute(f"CREATE DATABASE `{copy}`")
    target.execute(f"CREATE TABLE `{copy}`.items_copy ({columns})")
    return copy


def running(cluster: Cluster, definition: dict) -> None:
    """Apply a channel and start it; back once its pipeline runs."""
    cluster.apply([definition])
    cluster.set_status(definition["name"], "START")
    cluster.wait_running(definition["name"])


def test_ddl_sync_replays_mapped_ddl_and_mid_stream_schema_changes(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, "
                         "name VARCHAR(10), UNIQUE KEY uk_name (name))")
    copy = copied(target, schema, "id INT PRIMARY KEY, name VARCHAR(10), UNIQUE KEY uk_name "
                                  "(name)")
    running(cluster, channel("ddl-on", schema, copy, True))
    s = f"`{schema}`"
    source.script(
        f"INSERT INTO {s}.items VALUES (1, 'before')",
        f"ALTER TABLE {s}.items ADD COLUMN qty INT NOT NULL DEFAULT 0",
        f"INSERT INTO {s}.items VALUES (2, 'after add', 5)",
        f"UPDATE {s}.items SET qty = 7 WHERE id = 1",
        f"ALTER TABLE {s}.items MODIFY name VARCHAR(40)",
        f"INSERT INTO {s}.items VALUES (3, 'a name longer than ten', 1)",
        f"ALTER TABLE {s}.items DROP COLUMN qty",
        f"INSERT INTO {s}.items VALUES (4, 'after drop')",
        # indexes as Django and Rails make and drop them: the row after the drop holds a
        # name another row has (with the unique index left on the target, the upsert found
        # the other row and row 6 never came)
        f"DROP INDEX uk_name ON {s}.items",
        f"CREATE INDEX ix_name ON {s}.items (name)",
        f"INSERT INTO {s}.items VALUES (6, 'after drop')",
        f"CREATE TABLE {s}.t_1 (id INT PRIMARY KEY, v VARCHAR(5))",
        f"INSERT INTO {s}.t_1 VALUES (1, 'x'), (2, 'y')",
        f"CREATE TABLE {s}.t_3 (id INT PRIMARY KEY)",
        f"RENAME TABLE {s}.t_1 TO {s}.t_2",
        f"INSERT INTO {s}.t_2 VALUES (3, 'z')",
        f"TRUNCATE TABLE {s}.t_3",
        f"DROP TABLE {s}.t_3",
    )
    wait_for(lambda: tables(target, copy) == ["items_copy", "t_2"], 60,
             "the created, renamed and dropped tables on the target")
    wait_for(lambda: len(target.table(copy, "t_2")) == 3, 30, "rows of the new table")
    assert columns(target, copy, "items_copy") == [("id", "int(11)"), ("name", "varchar(40)")]
    wait_for(lambda: len(target.table(copy, "items_copy")) == 5, 30, "the row after the index")
    assert {row[2] for row in target.rows(f"SHOW INDEX FROM `{copy}`.items_copy")} == \
        {"PRIMARY", "ix_name"}
    assert target.table(copy, "items_copy") == source.table(schema, "items") == [
        (1, "before"), (2, "after add"), (3, "a name longer than ten"), (4, "after drop"),
        (6, "after drop")]
    assert target.table(copy, "t_2") == [(1, "x"), (2, "y"), (3, "z")]
    cluster.set_status("ddl-on", "STOP")


def test_a_replayed_ddl_runs_at_the_sources_time_and_auto_increment_step(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The channel is stopped while the source adds columns that existing rows fill from
    the statement's clock and AUTO_INCREMENT step: replayed later, every target row got the
    replay's time (not the source's), and ids 1, 2, 3 where the source (step 2) had 1, 3, 5."""
    ddl = "CREATE TABLE `{schema}`.items (code INT PRIMARY KEY, name VARCHAR(10))"
    schema = make_schema(source, target, ddl)
    copy = copied(target, schema, "code INT PRIMARY KEY, name VARCHAR(10)")
    running(cluster, channel("ddl-clock", schema, copy, True))
    s = f"`{schema}`.items"
    source.script(f"INSERT INTO {s} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    wait_for(lambda: len(target.table(copy, "items_copy")) == 3, 30, "the rows")
    cluster.set_status("ddl-clock", "STOP")
    wait_for(lambda: cluster.pipeline_state("ddl-clock").state == "not running", 30, "stop")
    try:
        source.script("SET SESSION auto_increment_increment = 2",
                      f"ALTER TABLE {s} ADD created_at TIMESTAMP NOT NULL "
                      "DEFAULT CURRENT_TIMESTAMP, ADD made DATETIME(6) DEFAULT NOW(6)",
                      f"ALTER TABLE {s} DROP PRIMARY KEY, ADD id INT AUTO_INCREMENT "
                      "PRIMARY KEY FIRST")
    finally:
        source.execute("SET SESSION auto_increment_increment = 1")
    time.sleep(2.5)  # the replay's clock is seconds past the source's
    cluster.set_status("ddl-clock", "START")
    wait_for(lambda: len(columns(target, copy, "items_copy")) == 5, 60, "the added columns")
    assert target.table(copy, "items_copy") == source.table(schema, "items")
    first, second, third = (row[0] for row in source.table(schema, "items"))
    assert second - first == third - second == 2  # the source's step
    cluster.set_status("ddl-clock", "STOP")


def test_a_table_created_in_a_target_database_of_other_defaults_takes_the_sources(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The target database was made by hand with utf8mb4_general_ci, the source's is
    utf8mb4_bin: a replayed CREATE TABLE gave its columns the target's collation, so 'Bob'
    and 'bob' were one key there and the second row was written over the first."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY)")
    source.execute(f"ALTER DATABASE `{schema}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    copy = f"{schema}_copy"
    target.execute(f"CREATE DATABASE `{copy}` CHARACTER SET utf8mb4 "
                   "COLLATE utf8mb4_general_ci")
    running(cluster, channel("ddl-collation", schema, copy, True))
    s = f"`{schema}`"
    source.script(f"CREATE TABLE {s}.t_1 (id INT PRIMARY KEY, login VARCHAR(20), "
                  "UNIQUE KEY (login))",
                  f"INSERT INTO {s}.t_1 VALUES (1, 'Bob'), (2, 'bob')")
    wait_for(lambda: len(target.table(copy, "t_1")) == 2, 30, "both rows on the target")
    assert target.table(copy, "t_1") == source.table(schema, "t_1")
    assert target.rows("SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE "
                       "TABLE_SCHEMA = %s AND TABLE_NAME = 't_1' AND COLUMN_NAME = 'login'",
                       (copy,)) == [("utf8mb4_bin",)]
    assert target.rows("SELECT DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA "
                       "WHERE SCHEMA_NAME = %s", (copy,)) == [("utf8mb4_general_ci",)]
    cluster.set_status("ddl-collation", "STOP")


@pytest.mark.parametrize("sync", [True, False], ids=["ddl_sync", "ddl-by-hand"])
def test_keys_are_read_again_after_a_ddl_lets_them_take_null(
        cluster: Cluster, source: Database, target: Database, sync: bool) -> None:
    """A table without a primary key, keyed by a unique key over a NOT NULL column (read at
    the start): an ALTER lets the column take NULL, and two rows with NULL there follow.
    With the start's key they were merged as one key, and one was lost — with ddl_sync, and
    without it, the target's ALTER made by hand."""
    ddl = "CREATE TABLE `{schema}`.t_1 (code INT NOT NULL, v INT, UNIQUE KEY (code))"
    schema = make_schema(source, target, ddl)
    copy = f"{schema}_copy"
    target.execute(f"CREATE DATABASE `{copy}`")
    target.execute(ddl.format(schema=copy))
    name = f"ddl-keys-{'on' if sync else 'off'}"
    running(cluster, channel(name, schema, copy, sync))
    if not sync:
        target.execute(f"ALTER TABLE `{copy}`.t_1 MODIFY code INT NULL")
    s = f"`{schema}`"
    source.script(f"INSERT INTO {s}.t_1 VALUES (1, 1)",
                  f"ALTER TABLE {s}.t_1 MODIFY code INT NULL",
                  f"INSERT INTO {s}.t_1 VALUES (NULL, 1), (NULL, 2)",
                  f"UPDATE {s}.t_1 SET v = 3 WHERE code IS NULL AND v = 2")
    wait_for(lambda: sorted(target.table(copy, "t_1"), key=str) ==
             sorted(source.table(schema, "t_1"), key=str), 30, "the three rows on the target")
    cluster.set_status(name, "STOP")


def test_a_column_a_pair_includes_renamed_on_the_source_stops_the_pipeline(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The pair includes (id, price); the source renames price: the rows after it had no
    price, and the target's price was never written again, without a word."""
    ddl = "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, price INT, note VARCHAR(9))"
    schema = make_schema(source, target, ddl)
    running(cluster, {"name": "ddl-include", "pipelines": [{
        "name": "forward", "source": "source", "target": "target",
        "pairs": [{"source": f"{schema}.items", "target": f"{schema}.items",
                   "columns": {"include": ["id", "price"]}}]}]})
    s = f"`{schema}`.items"
    source.script(f"INSERT INTO {s} VALUES (1, 10, 'a')",
                  f"ALTER TABLE {s} RENAME COLUMN price TO unit_price",
                  f"UPDATE {s} SET unit_price = 11 WHERE id = 1")
    wait_for(lambda: "includes column(s) price, which" in
             cluster.pipeline_state("ddl-include").last_error, 60, "the pipeline's stop")
    assert target.table(schema, "items") == [(1, 10, None)]  # the row before the rename
    cluster.set_status("ddl-include", "STOP")


def test_a_two_phase_alter_runs_once_at_its_commit_and_not_when_rolled_back(
        cluster: Cluster, source: Database, target: Database) -> None:
    """With ``binlog_alter_two_phase`` MariaDB logs an ALTER at its start and again at its
    commit or rollback. Replayed at its start, an ALTER the source then rolled back (here:
    past max_statement_time) stayed on the target — a unique key the source does not have,
    so a later row took another row's place — and a committed ALTER of two clauses ran
    twice, the second time stopping the pipeline. An ALTER under ``SET STATEMENT … FOR``
    (how DBAs bound an online DDL's wait) was not replayed at all."""
    schema = make_schema(source, target,
                         "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(9))",
                         "CREATE TABLE `{schema}`.big (id INT PRIMARY KEY, w INT)",
                         "INSERT INTO `{schema}`.big SELECT seq, seq "
                         "FROM `{schema}`.seq_1_to_200000")
    running(cluster, {"name": "ddl-two-phase", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "ddl_sync": True,
        "pairs": [{"source": f"{schema}.{t}", "target": f"{schema}.{t}"}
                  for t in ("items", "big")]}]})
    s = f"`{schema}`"
    try:
        source.script("SET SESSION binlog_alter_two_phase = 1",
                      f"ALTER TABLE {s}.items ADD COLUMN z INT, ADD INDEX (z)",
                      f"INSERT INTO {s}.items VALUES (1, 'a', 1)",
                      "SET SESSION max_statement_time = 0.01")
        with pytest.raises(pymysql.OperationalError, match="max_statement_time"):
            source.execute(f"ALTER TABLE {s}.big ADD UNIQUE (w), ALGORITHM=COPY")
    finally:
        source.script("SET SESSION max_statement_time = 0",
                      "SET SESSION binlog_alter_two_phase = 0")
    source.script(f"SET STATEMENT lock_wait_timeout = 30 FOR ALTER TABLE {s}.items "
                  "ADD COLUMN q INT",
                  f"INSERT INTO {s}.big VALUES (200001, 5)",  # w as row 5's
                  f"INSERT INTO {s}.items VALUES (2, 'b', 2, 3)")
    wait_for(lambda: target.table(schema, "items") == source.table(schema, "items"), 60,
             "the items on the target, with both columns added")
    assert columns(target, schema, "items") == columns(source, schema, "items")
    totals = "SELECT COUNT(*), SUM(id), SUM(w) FROM `{}`.big"
    wait_for(lambda: target.rows(totals.format(schema)) == source.rows(totals.format(schema)),
             60, "big's rows on the target")
    assert target.rows(f"SELECT * FROM {s}.big WHERE w = 5 ORDER BY id") == [(5, 5),
                                                                            (200001, 5)]
    assert {row[2] for row in target.rows(f"SHOW INDEX FROM {s}.big")} == {"PRIMARY"}
    cluster.set_status("ddl-two-phase", "STOP")


def test_a_create_select_logged_as_a_statement_stops_and_one_logged_as_rows_replicates(
        cluster: Cluster, source: Database, target: Database) -> None:
    """In ROW format a CREATE TABLE … SELECT is the statement and its rows in one group:
    replayed, then its rows. Written by a session in MIXED format it is the statement alone:
    replayed on the target it copied the target's rows (none here: t_3 got an empty table),
    without ddl_sync the rows never came. It stops now, naming the table."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, "
                         "name VARCHAR(10))")
    copy = copied(target, schema, "id INT PRIMARY KEY, name VARCHAR(10)")
    running(cluster, channel("ctas", schema, copy, True))
    s = f"`{schema}`"
    source.script(f"INSERT INTO {s}.items VALUES (1, 'a'), (2, 'b')",
                  f"CREATE TABLE {s}.t_1 (PRIMARY KEY (id)) SELECT id, name FROM {s}.items")
    wait_for(lambda: "t_1" in tables(target, copy) and
             target.table(copy, "t_1") == [(1, "a"), (2, "b")], 60, "t_1 with its rows")
    try:
        source.script("SET SESSION binlog_format = 'MIXED'",
                      f"CREATE TABLE {s}.t_3 (PRIMARY KEY (id)) SELECT id FROM {s}.items")
    finally:
        source.execute("SET SESSION binlog_format = 'ROW'")
    wait_for(lambda: f"so the rows it copied into {schema}.t_3 are in no rows event" in
             cluster.pipeline_state("ctas").last_error, 60, "the pipeline to stop")
    assert "t_3" not in tables(target, copy)
    cluster.set_status("ctas", "STOP")
