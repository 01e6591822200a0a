"""A statement Load sends on its own, not in the batch's multi-statement query: a ``LOAD
DATA`` (its rows served from memory), a statement whose row count must be exactly one (a
keyless table's), one that needs a lenient sql_mode (an empty ENUM value), or any statement
of a batch written again statement by statement (``skip_load_exception``), where a row the
target refuses is logged and skipped — all of its statements — and nothing else ever is."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pymysql

from node.changes import Batch
from node.jobs import Unit
from node.target.mysql import loaddata, localdata
from node.target.mysql.owners import ROW_REFUSED
from node.target.mysql.sqltext import Sql
from node.target.mysql.together import first, in_table
from shared.errors import LoadError, SetlError

log = logging.getLogger("setl.node.target.mysql.loader")
# The target session writes what the source holds, whatever the target's own sql_mode: a row
# with AUTO_INCREMENT 0 keeps 0 (a source with NO_AUTO_VALUE_ON_ZERO), an impossible date
# (ALLOW_INVALID_DATES) and zero dates go in as they are, and a value that does not fit the
# target's column is an error, never silently cut (strict).
SQL_MODE = "STRICT_ALL_TABLES,NO_AUTO_VALUE_ON_ZERO,ALLOW_INVALID_DATES,NO_ENGINE_SUBSTITUTION"
# for a row whose ENUM holds the empty value (the source's for an invalid one): see _lenient
LENIENT_SQL_MODE = SQL_MODE.replace("STRICT_ALL_TABLES,", "")
DATA_TRUNCATED = 1265
ROW_SAVEPOINT = "setl_row"  # before a row of several statements, in one-by-one mode


def write(cursor: Any, unit: Unit, sql: Sql, batch: Batch, pipeline_id: str) -> int:
    """One statement on its own: a LOAD DATA, a lenient or a count-checked one."""
    try:
        return _written(cursor, unit, sql, batch, pipeline_id)
    except pymysql.MySQLError as exc:
        raise in_table(exc, unit) from None


def rows(sqls: list[Sql]) -> Iterator[list[Sql]]:
    """A one-by-one unit's statements a row at a time: a statement and those that continue
    its row (a big value's pieces)."""
    row: list[Sql] = []
    for sql in sqls:
        if row and not sql.continues:
            yield row
            row = []
        row.append(sql)
    if row:
        yield row


def write_row(cursor: Any, unit: Unit, row: list[Sql], batch: Batch, pipeline_id: str,
              skipped: Callable[[], None] = lambda: None) -> int:
    """One row's statements in one-by-one mode, inside the batch's transaction: all of
    them, or none when the target refuses one (logged, ``skipped()`` called, and the row
    skipped). A refused
    statement is undone by the server; a row of several statements (an INSERT with its big
    values empty, then their pieces appended) is undone to a savepoint taken before it, so
    no piece goes on a row its INSERT did not write (the target's old value)."""
    several = len(row) > 1
    if several:
        cursor.execute(f"SAVEPOINT {ROW_SAVEPOINT}")
    written = 0
    for sql in row:
        try:
            written += _written(cursor, unit, sql, batch, pipeline_id)
        except pymysql.MySQLError as exc:
            code = exc.args[0] if exc.args else 0
            if code not in ROW_REFUSED:  # not the row's fault: never skip
                raise in_table(exc, unit) from None
            if several:
                cursor.execute(f"ROLLBACK TO SAVEPOINT {ROW_SAVEPOINT}")
            log.warning("event=row_skipped channel=%s pipeline=%s process_id=%d position=%s "
                        "table=%s.%s key=%s error=%r statement=%r",
                        pipeline_id.partition(".")[0], pipeline_id, batch.process_id,
                        batch.end, unit.schema, unit.table,
                        first(sql.what, unit.keys).strip(), exc.args[-1], sql.text[:2000])
            skipped()
            return 0
    return written


def _written(cursor: Any, unit: Unit, sql: Sql, batch: Batch, pipeline_id: str) -> int:
    """Execute it; the rows it writes. The target's error as it is."""
    try:
        if sql.data is not None:  # LOAD DATA: its rows sent from memory
            count = localdata.load(cursor, loaddata.FILE, sql.text, sql.data)
        else:
            count = _lenient(cursor, sql, unit, batch, pipeline_id) if sql.lenient \
                else cursor.execute(sql.text)
    except (pymysql.MySQLError, SetlError):
        raise
    except Exception as exc:  # a Python error names where it happened, as every error
        raise LoadError(
            f"stage load, pipeline {pipeline_id}, processId {batch.process_id}, "
            f"position {batch.end}, target {unit.datasource}, table "
            f"{unit.schema}.{unit.table}: {type(exc).__name__}: {exc}") from exc
    if sql.matches_one and count != 1:
        raise LoadError(
            f"stage load, pipeline {pipeline_id}, processId {batch.process_id}, "
            f"position {batch.end}, target {unit.datasource}, table "
            f"{unit.schema}.{unit.table}: the target has no row equal to the source's "
            f"before image{first(sql.what, ())}, so the tables differ; make the target "
            "equal to the source (copy the table again), then resume")
    return sql.rows


def _lenient(cursor: Any, statement: Sql, unit: Unit, batch: Batch, pipeline_id: str) -> int:
    """A one-row statement giving ENUM columns the empty value (which strict mode
    refuses) under a sql_mode without STRICT_ALL_TABLES; any warning but "Data truncated"
    of exactly those columns fails it, so nothing else is let through."""
    cursor.execute("SET SESSION sql_mode = %s", (LENIENT_SQL_MODE,))
    try:
        count = cursor.execute(statement.text)
        cursor.execute("SHOW WARNINGS")
        warnings = [(int(row[1]), str(row[2])) for row in cursor.fetchall()]
    finally:
        cursor.execute("SET SESSION sql_mode = %s", (SQL_MODE,))
    allowed = {f"Data truncated for column '{name}' at row 1" for name in statement.lenient}
    other = [w for w in warnings if w[0] != DATA_TRUNCATED or w[1] not in allowed]
    if other:
        raise LoadError(
            f"stage load, pipeline {pipeline_id}, processId {batch.process_id}, "
            f"position {batch.end}, target {unit.datasource}, table "
            f"{unit.schema}.{unit.table}: a row with an empty ENUM value was refused "
            f"in more than that: {other}; make the target's columns the source's")
    return int(count)
