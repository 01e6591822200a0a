"""A replayed DDL runs under the source session's settings on real servers (node.ddlsession):
here ``explicit_defaults_for_timestamp``, which MariaDB logs in the query event's flags2."""

from __future__ import annotations

from tests.devcluster import Cluster, Database, make_schema, wait_for
from tests.integration.test_ddl import channel, copied, running


def timestamps(db: Database, schema: str, table: str) -> list[tuple[str, str, str, str]]:
    """Each TIMESTAMP column's name, nullability, default and extra (ON UPDATE …)."""
    return db.rows("SELECT COLUMN_NAME, IS_NULLABLE, COLUMN_DEFAULT, EXTRA FROM "
                   "information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                   "AND DATA_TYPE = 'timestamp' ORDER BY ORDINAL_POSITION", (schema, table))


def test_a_bare_timestamp_column_is_made_as_the_source_made_it(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The source makes a bare TIMESTAMP with explicit_defaults_for_timestamp ON (NULL
    DEFAULT NULL); the target's global is OFF: replayed under it, the column became NOT NULL
    DEFAULT CURRENT_TIMESTAMP ON UPDATE …, and the NULL the source wrote became the load's
    time on the target, silently."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY)")
    copy = copied(target, schema, "id INT PRIMARY KEY")
    [(own,)] = target.rows("SELECT @@GLOBAL.explicit_defaults_for_timestamp")
    target.execute("SET GLOBAL explicit_defaults_for_timestamp = 0")
    try:  # the load connection, opened when the pipeline starts, takes the global
        running(cluster, channel("tsdef-explicit", schema, copy, True))
        s = f"`{schema}`.t_1"
        source.script("SET SESSION explicit_defaults_for_timestamp = 1",
                      f"CREATE TABLE {s} (id INT PRIMARY KEY, ts TIMESTAMP, ts2 TIMESTAMP, "
                      "note VARCHAR(10))",
                      f"INSERT INTO {s} VALUES (1, NULL, NULL, 'a'), "
                      "(2, '2020-01-02 03:04:05', NULL, 'b')",
                      f"UPDATE {s} SET note = 'c' WHERE id = 2")
        wait_for(lambda: target.rows(f"SELECT note FROM `{copy}`.t_1 WHERE id = 2") ==
                 [("c",)], 60, "the created table and its rows on the target")
        assert timestamps(target, copy, "t_1") == timestamps(source, schema, "t_1") == [
            ("ts", "YES", "NULL", ""), ("ts2", "YES", "NULL", "")]
        assert target.table(copy, "t_1") == source.table(schema, "t_1")
        assert target.rows(f"SELECT ts, ts2 FROM `{copy}`.t_1 WHERE id = 1") == [(None, None)]
    finally:
        target.execute(f"SET GLOBAL explicit_defaults_for_timestamp = {int(own)}")
        cluster.set_status("tsdef-explicit", "STOP")
