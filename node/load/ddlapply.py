"""A replicated DDL run on a target, inside Load's batch transaction (it commits
implicitly: the position follows it). A replay after a crash between the DDL and its
position finds it done — the table exists, the column is there — and takes it as applied."""

from __future__ import annotations

import logging
from typing import Any

import pymysql

from node.changes import TargetChange
from node.ddl import kind_of, on_database
from node.ddl import parse as parse_ddl
from node.ddlsession import run_under, sql_mode
from shared.identifiers import quote

log = logging.getLogger("setl.node.load.loader")
# Errors that prove a replayed DDL's effect is already there, by statement: the table
# exists, the table is gone, the column or index is there (or gone). Any other error — a
# missing table behind CREATE … LIKE, a missing table to ALTER — is a failure, not proof.
DDL_ALREADY_APPLIED = {"CREATE": {1007, 1050}, "DROP": {1051}, "ALTER": {1060, 1061, 1091}}
MISSING_TABLE = 1146
RENAME_ERRORS = {1050, MISSING_TABLE}  # a replayed RENAME: applied if the target shows it


def apply_ddl(cursor: Any, change: TargetChange, pipeline_id: str, process_id: int) -> int:
    """Run one DDL; a replay after a crash between the DDL and its position finds it
    done (the table exists, the column is there …): logged and taken as applied."""
    mode = sql_mode(change.session)
    kind = kind_of(change.ddl, mode)
    database = on_database(change.ddl, mode)
    try:
        if database == "ALTER":  # a database setl has not made yet: made, then changed
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS {quote(change.schema)}")
        elif not database:
            if kind == "CREATE":
                cursor.execute(f"CREATE DATABASE IF NOT EXISTS {quote(change.schema)}")
            cursor.execute(f"USE {quote(change.schema)}")
        run_under(cursor, change.session, change.ddl)  # as the source's session ran it
    except pymysql.MySQLError as exc:
        code = exc.args[0] if exc.args else 0
        done = code in DDL_ALREADY_APPLIED.get(kind, ()) or (
            kind == "RENAME" and code in RENAME_ERRORS and _renamed(cursor, change))
        if not done and kind == "CREATE" and code == MISSING_TABLE:
            raise type(exc)(code, (
                f"{change.ddl!r} needs a table target {change.datasource} does not have "
                f"({exc.args[-1]}): it copies (LIKE) or references a table this channel "
                f"does not replicate. Create {change.schema}.{change.table} on the target "
                "by hand (SHOW CREATE TABLE on the source gives the definition), then "
                "start the channel again: a CREATE TABLE of a table that exists is taken "
                "as applied")) from None
        if not done:
            raise
        log.warning("event=ddl_already_applied pipeline=%s process_id=%d target=%s "
                    "ddl=%r error=%r", pipeline_id, process_id,
                    change.datasource, change.ddl, exc.args[-1])
        return 0
    log.info("event=ddl_applied pipeline=%s process_id=%d target=%s table=%s.%s ddl=%r",
             pipeline_id, process_id, change.datasource, change.schema,
             change.table, change.ddl)
    return 1


def _renamed(cursor: Any, change: TargetChange) -> bool:
    """Whether the target already shows a RENAME: the old table gone, the new one there."""
    parsed = parse_ddl(change.ddl, change.schema, sql_mode(change.session))
    if parsed is None or not parsed.renames:
        return False
    old, new = parsed.renames[0]
    cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE "
                   "(TABLE_SCHEMA = %s AND TABLE_NAME = %s) OR (TABLE_SCHEMA = %s AND "
                   "TABLE_NAME = %s)", (*old.pair, *new.pair))
    return {tuple(row) for row in cursor.fetchall()} == {new.pair}
