"""DDL sync on real servers: table DDL replayed on the target with names mapped through the
pairs, schema changes mid-stream with rows before and after, and DDL filtered when off."""

from __future__ import annotations

import time

import pymysql
import pytest

from node.changes import Batch, ChangeType, TargetChange, Transaction
from node.target.mysql.ddlapply import INTENT_DDL, apply_ddl, fingerprint, ran_before, tables_of
from node.target.mysql.loader import Loader
from shared.model import BinlogPosition, PipelineParams
from tests.devcluster import Cluster, Database, make_schema, wait_for
from tests.integration.test_load import target_endpoint


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
