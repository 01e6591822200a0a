"""A replayed DDL runs under the source session's settings on real servers (node.ddlsession):
here ``explicit_defaults_for_timestamp``, which MariaDB logs in the query event's flags2, and
the ``time_zone`` it logs with a statement that used it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import QueryEvent

from node import ddlsession
from node.select import libevents
from shared.errors import SourceError
from shared.sandbox import free_port
from shared.sandbox_servers import MariaDBKind, ServerSpec, launch
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


def test_a_source_in_a_daylight_saving_system_zone_logs_it_and_such_an_alter_stops(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A MariaDB whose SYSTEM zone is Europe/Berlin (its process's TZ) logs ``SYSTEM`` with
    exactly the statements that converted rows between local time and instants; one that
    did so at each row's own date stops (a January row read in +01:00, replayed in July's
    +02:00, moved an hour), one that used the zone at its own instant runs under that
    instant's offset, and a plain CREATE TABLE logs no zone."""
    monkeypatch.setenv("TZ", "Europe/Berlin")  # the server started below takes it
    kind, datadir = MariaDBKind(), tmp_path / "berlin"
    server, port = launch(kind, ServerSpec("berlin", "mariadb", 43), datadir, "pw", "setl",
                          lambda attempt: free_port(), 60)
    settings = {"host": "127.0.0.1", "port": port, "user": "setl", "passwd": "pw"}

    def connect() -> pymysql.Connection:
        return pymysql.connect(host="127.0.0.1", port=port, user="setl", password="pw",
                               autocommit=True)
    try:
        with connect() as conn, conn.cursor() as cursor:
            for statement in ["CREATE DATABASE s",
                              "CREATE TABLE s.t (id INT PRIMARY KEY, d DATETIME)",
                              "INSERT INTO s.t VALUES (1, '2024-01-15 12:00:00'), "
                              "(2, '2024-07-15 12:00:00')",
                              "ALTER TABLE s.t MODIFY d TIMESTAMP NULL",
                              "ALTER TABLE s.t ADD COLUMN z DATETIME DEFAULT CURRENT_TIMESTAMP"]:
                cursor.execute(statement)
        libevents.install()
        reader = BinLogStreamReader(connection_settings=settings, server_id=943,
                                    blocking=False, only_events=[QueryEvent], is_mariadb=True)
        try:
            events = {event.query: event for event in reader
                      if event.query.startswith(("CREATE TABLE", "ALTER TABLE"))}
        finally:
            reader.close()
        facts = ddlsession.SourceFacts(connect, "source berlin")
        create, modify, add = events.values()
        assert [getattr(event, "time_zone", None) for event in events.values()] == [
            None, b"SYSTEM", b"SYSTEM"]
        assert "time_zone" not in dict(ddlsession.of_event(create, facts)[1])
        with pytest.raises(SourceError, match="offset changes with the date"):
            ddlsession.of_event(modify, facts)
        at = datetime.fromtimestamp(add.timestamp, ZoneInfo("Europe/Berlin"))
        offset = at.strftime("%z")
        assert dict(ddlsession.of_event(add, facts)[1])["time_zone"] == \
            f"{offset[:3]}:{offset[3:]}"
    finally:
        server.kill()
        server.wait(30)
