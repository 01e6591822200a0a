"""The checks a replication source must pass (connections: :mod:`shared.endpoint`)."""

from __future__ import annotations

import logging
from typing import Any

import pymysql

from shared import gtid
from shared.endpoint import connect, connection_settings, server_answered
from shared.errors import PositionConflictError, PositionLostError, SourceError
from shared.model import BinlogPosition, DataSource
from shared.positions import current_position, server_identity
from shared.preflight import REQUIRED, replica_server_id

__all__ = ["after_quiet_purge", "check_source", "connect", "connection_settings",
           "current_position", "replica_server_id"]
log = logging.getLogger("setl.node.select.source")
_NOT_ALLOWED = 1227  # ER_SPECIFIC_ACCESS_DENIED_ERROR: "you need the … privilege(s)"


LOST_POSITION_REMEDY = (
    "The changes since are lost to this pipeline (the binlog was purged, or the position "
    "was never there): set where the pipeline starts (setl channel stop CHANNEL --wait; "
    "setl position set CHANNEL/PIPELINE --latest --replay; setl channel start CHANNEL), "
    "then copy the paired tables again while it runs (setl snapshot CHANNEL --table "
    "SCHEMA.TABLE --wait: it races the stream and misses no write; a copy made outside setl "
    "before the position is set misses what is written between)")


def check_source(source: DataSource, pipeline_id: str, server_id: int,
                 start: BinlogPosition | None) -> None:
    """Refuse to replicate from a source whose settings would lose or garble changes."""
    with connect(source) as conn, conn.cursor() as cursor:
        cursor.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN "
                       "('log_bin','binlog_format','binlog_row_image','binlog_row_metadata',"
                       "'server_id','binlog_transaction_compression')")
        variables = {name.lower(): str(value) for name, value in cursor.fetchall()}
        where = f"pipeline {pipeline_id}: source {source.name} ({source.host}:{source.port})"
        if variables.get("log_bin", "OFF").upper() != "ON":
            raise SourceError(f"{where} has the binary log off; start it with log_bin enabled")
        for name, wanted in REQUIRED.items():
            actual = variables.get(name)
            if actual is None:
                raise SourceError(f"{where} has no {name} setting (server too old?); setl "
                                  f"needs {name}={wanted} (MariaDB ≥10.5 or MySQL ≥8.0)")
            if actual.upper() != wanted:
                raise SourceError(f"{where} has {name}={actual}; setl needs {name}={wanted}: "
                                  f"run SET GLOBAL {name}='{wanted}' and put it in my.cnf")
        if variables.get("binlog_transaction_compression", "OFF").upper() == "ON":
            raise SourceError(f"{where} has binlog_transaction_compression=ON, whose "
                              "compressed transactions setl cannot read: run SET GLOBAL "
                              "binlog_transaction_compression=OFF and put it in my.cnf")
        if int(variables.get("server_id", 0)) == server_id:
            raise SourceError(f"{where} uses server_id {server_id}, the id this pipeline "
                              "replicates with; give the source another server_id")
        for row in _replica_hosts(cursor, pipeline_id):
            if int(row[0]) == server_id:
                raise SourceError(f"{where}: another replica is connected with server_id "
                                  f"{server_id}; is this pipeline running on another node?")
        if start and start.file:
            cursor.execute("SHOW BINARY LOGS")
            files = [row[0] for row in cursor.fetchall()]
            if start.file not in files:
                raise PositionLostError(
                    f"{where}: binlog file {start.file} is not on the source any more "
                    f"(oldest is {files[0] if files else 'none'}). {LOST_POSITION_REMEDY}")


def _replica_hosts(cursor: Any, pipeline_id: str) -> list[tuple[Any, ...]]:
    """The replicas connected to the source (SHOW SLAVE HOSTS), or none when setl's user may
    not list them: MariaDB 10.5.2+ asks REPLICATION MASTER ADMIN, a right a replica's user
    needs for nothing else. The check is a courtesy (ZooKeeper's lease already keeps a
    pipeline on one node), so it is left out rather than stopping the pipeline."""
    try:
        cursor.execute("SHOW SLAVE HOSTS")
    except pymysql.MySQLError as exc:
        if not server_answered(exc) or exc.args[0] != _NOT_ALLOWED:
            raise
        log.debug("event=replica_hosts_not_listed pipeline=%s error=%r", pipeline_id, exc)
        return []
    return list(cursor.fetchall())


def after_quiet_purge(source: DataSource, pipeline_id: str,
                      at: BinlogPosition) -> BinlogPosition | None:
    """Where a start at ``at``, in a file the source purged, goes on when nothing was
    written between: the oldest kept file's start, or None (the start stays, and
    :func:`check_source` refuses it). A quiet source (no transaction since ``at``) rotates
    its binlog (FLUSH BINARY LOGS, a restart) and purges the old files; its kept files then
    begin after ``at``, and no change was lost. Told only where it is certain: a MariaDB
    position of this server with its GTID state, and the state at the oldest file's start
    (its Gtid_list event, as BINLOG_GTID_POS reads it) the very same, domain for domain:
    any transaction since would have moved a domain. MySQL's positions keep one GTID, not
    the executed set its files begin with (Previous_gtids), so they are refused as before."""
    if not at.file or not at.gtid or ":" in at.gtid or not at.server:
        return None
    try:
        stored = gtid.parse(at.gtid)
    except PositionConflictError:
        return None
    with connect(source) as conn, conn.cursor() as cursor:
        cursor.execute("SHOW BINARY LOGS")
        files = [str(row[0]) for row in cursor.fetchall()]
        if not files or at.file in files or server_identity(cursor) != at.server:
            return None
        oldest = BinlogPosition(files[0], 4)
        mine, first = BinlogPosition(at.file, 0).order(), oldest.order()
        if not mine[0] or mine[1] != first[1] or mine >= first:
            return None  # not an older file of this binlog: not purged, another one
        try:
            cursor.execute("SELECT BINLOG_GTID_POS(%s, 4)", (oldest.file,))
        except pymysql.MySQLError as exc:
            if not server_answered(exc):
                raise
            return None  # MySQL: no BINLOG_GTID_POS
        found = cursor.fetchone()[0]
    try:
        if found is None or not str(found) or gtid.parse(str(found)) != stored:
            return None
    except PositionConflictError:
        return None
    moved = BinlogPosition(oldest.file, 4, at.gtid, at.server)
    log.warning("event=start_after_purged_quiet_files pipeline=%s position=%s start=%s:4 "
                "gtid=%s reason=%r", pipeline_id, f"{at.file}:{at.pos}", oldest.file, at.gtid,
                "the files after the position were purged, and the oldest kept one begins "
                "at the very GTID state of the position: nothing was written between")
    return moved


def gtid_start(server_version: str, gtid: str) -> dict[str, Any]:
    """The library's arguments for a dump from ``gtid``: MariaDB's domain-server-sequence
    position or MySQL's executed GTID set, told apart by the server's version string."""
    return {"auto_position": gtid, "is_mariadb": "mariadb" in server_version.lower()}
