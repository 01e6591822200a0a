"""DDL sync on real servers: table DDL replayed on the target with names mapped through the
pairs, schema changes mid-stream with rows before and after, and DDL filtered when off."""

from __future__ import annotations

from shared.devcluster import Cluster, Database, make_schema, wait_for


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


def test_ddl_sync_replays_mapped_ddl_and_mid_stream_schema_changes(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target,
                         "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(10))")
    copy = f"{schema}_copy"
    target.execute(f"CREATE DATABASE `{copy}`")
    target.execute(f"CREATE TABLE `{copy}`.items_copy (id INT PRIMARY KEY, name VARCHAR(10))")
    cluster.apply([channel("ddl-on", schema, copy, True)])
    cluster.set_status("ddl-on", "START")
    cluster.wait_running("ddl-on")
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
    assert target.table(copy, "items_copy") == source.table(schema, "items") == [
        (1, "before"), (2, "after add"), (3, "a name longer than ten"), (4, "after drop")]
    assert target.table(copy, "t_2") == [(1, "x"), (2, "y"), (3, "z")]
    cluster.set_status("ddl-on", "STOP")


def test_ddl_is_filtered_when_ddl_sync_is_off(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target,
                         "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(10))")
    copy = f"{schema}_copy"
    target.execute(f"CREATE DATABASE `{copy}`")
    target.execute(f"CREATE TABLE `{copy}`.items_copy (id INT PRIMARY KEY, name VARCHAR(10))")
    cluster.apply([channel("ddl-off", schema, copy, False)])
    cluster.set_status("ddl-off", "START")
    cluster.wait_running("ddl-off")
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
