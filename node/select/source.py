"""The checks a replication source must pass (connections: :mod:`shared.endpoint`)."""

from __future__ import annotations

import logging
from typing import Any

from shared.endpoint import connect, connection_settings
from shared.errors import PositionLostError, SourceError
from shared.model import BinlogPosition, DataSource
from shared.positions import current_position
from shared.preflight import REQUIRED, replica_server_id

__all__ = ["check_source", "connect", "connection_settings", "current_position",
           "replica_server_id"]
log = logging.getLogger("setl.node.select.source")


LOST_POSITION_REMEDY = (
    "The changes since are lost to this pipeline (the binlog was purged, or the position "
    "was never there): copy the paired tables again, then set where the pipeline starts "
    "(setl channel stop CHANNEL --wait; setl position set CHANNEL/PIPELINE --latest "
    "--replay)")


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
        cursor.execute("SHOW SLAVE HOSTS")
        for row in cursor.fetchall():
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


def gtid_start(server_version: str, gtid: str) -> dict[str, Any]:
    """The library's arguments for a dump from ``gtid``: MariaDB's domain-server-sequence
    position or MySQL's executed GTID set, told apart by the server's version string."""
    return {"auto_position": gtid, "is_mariadb": "mariadb" in server_version.lower()}
