"""The tables a DDL statement takes away from under their names, for the copies under way
(:meth:`node.snapshot.controller.Snapshots.ddl`), and how such a copy fails (:func:`fail`,
:func:`failed_by`).

A copy reads its chunks by the table's name (``SELECT … FROM schema.table WHERE <bounds>``),
so a statement that gives that name to another table, or takes the table away, ends what the
copy can do honestly: the chunks left would be read from whatever holds the name now. A
gh-ost/pt-osc cut-over (``RENAME TABLE t TO t_old, t_new TO t``) made such a copy read the
new ``t``, whose rows the stream had brought already, and end "done" while the old table's
rows not copied yet never reached the target's ``t_old``; a plain rename or a drop made
later windows fail again and again with a misleading error.

What takes a table away: RENAME TABLE (either side), ALTER TABLE … RENAME, DROP TABLE,
CREATE OR REPLACE TABLE, DROP DATABASE, CREATE OR REPLACE DATABASE (not a rename that gives
the name back to its table: ``a TO tmp, tmp TO a``). TRUNCATE keeps the table (its rows go, and with
``ddl_sync`` on the target's too; the chunks left read what the source holds now, as the
target does; without it the statement pauses the pipeline), as do ALTERs of columns (a window
reads the columns after its low watermark; one open across the DDL is abandoned).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import NamedTuple

from node import ddlsession
from node.changes import ChangeType, RowChange
from node.ddlparse import dropped_database, parse
from node.extract.etl import CompiledPipeline
from node.snapshot.state import TableCopy, ran_before_planned
from node.sqllex import NAME, WORD, identifier
from node.sqllex import statement_code as code

log = logging.getLogger("setl.node.snapshot")


class Moved(NamedTuple):
    """A table a statement takes from its name: as typed in the statement."""

    schema: str
    table: str  # "" for every table of the schema (DROP DATABASE)
    how: str  # renamed | dropped | replaced | dropped with its database
    to: tuple[str, str] | None = None  # a rename's new name


def moved(statement: str, default_schema: str, sql_mode: int = 0) -> list[Moved]:
    """The tables ``statement`` renames, drops or replaces (none for any other statement)."""
    ddl = parse(statement, default_schema, sql_mode)
    if ddl is None:
        dropped = dropped_database(statement, sql_mode)
        schema = dropped.schema if dropped else _replaced_database(statement, sql_mode)
        return [Moved(schema, "", "dropped with its database")] if schema else []
    found: list[Moved] = []
    # RENAME TABLE, ALTER TABLE … RENAME: each table to where the statement leaves it (a
    # swap a TO tmp, b TO a, tmp TO b leaves a at b); a name a table is renamed onto was
    # free or freed before in the statement, so its table is among the ones moved
    now: dict[tuple[str, str], tuple[str, str]] = {}  # its name now → its name before
    for old, new in ddl.renames:
        now[new.pair] = now.pop(old.pair, old.pair)
    # (a name given back to its table in the statement, ``a TO tmp, tmp TO a`` or ``ALTER
    # TABLE t RENAME TO t``, holds the same table: nothing moved)
    found += [Moved(*before, "renamed", name) for name, before in now.items()
              if name != before]
    if ddl.kind == "DROP":
        found += [Moved(*name.pair, "dropped") for name in ddl.names]
    if ddl.kind == "CREATE" and ddl.replaces:
        found += [Moved(*name.pair, "replaced") for name in ddl.names]
    return found


def _replaced_database(statement: str, sql_mode: int) -> str:
    """The database of MariaDB's ``CREATE OR REPLACE DATABASE`` (its tables dropped with it,
    as by DROP DATABASE), or ""."""
    tokens = code(statement, sql_mode)
    if len(tokens) < 5 or not (tokens[0].is_word("CREATE") and tokens[1].is_word("OR")
                               and tokens[2].is_word("REPLACE")
                               and tokens[3].is_word("DATABASE", "SCHEMA")
                               and tokens[4].kind in (NAME, WORD)):
        return ""
    return identifier(tokens[4]) or ""


def fail(copy: TableCopy, one: Moved, change: RowChange,
         stored: Callable[[str, str], tuple[str, str]], pipeline_id: str) -> None:
    """Fail ``copy``, whose table ``one`` (of the DDL ``change``) took away: the error says
    the statement, its position and what to copy now (``stored`` maps a source table to
    the stored one: the compiled pipeline's, for a rename's new name)."""
    channel = pipeline_id.partition(".")[0]
    at = ddlsession.position(change.session)
    where = f" at {at.file}:{at.pos}" if at is not None else ""
    table = f"{copy.schema}.{copy.table}"
    if one.to is not None:
        copy.again = ".".join(stored(*one.to))
        then = (f"the rows of the table not copied yet are missing under its new name "
                f"{copy.again}: copy it again under that name: setl snapshot {channel} "
                f"--table {copy.again}")
    elif one.how == "replaced":
        then = (f"{table} is another table now: copy it again: setl snapshot {channel} "
                f"--table {table}")
    else:
        then = (f"nothing is left to copy; if {table} is made again, copy the new one: "
                f"setl snapshot {channel} --table {table}")
    copy.state, copy.finished = "failed", time.time()
    copy.error = (
        f"pipeline {pipeline_id}: {table} was {one.how}"
        + (f" to {copy.again}" if copy.again else "")
        + f" by a DDL in the source's binlog{where} ({change.ddl[:200]!r}) while it was "
        f"being copied ({len(copy.done)} of {copy.total} chunks copied); the copy reads "
        f"its chunks by the table's name, which no longer holds that table (the chunks "
        f"left would copy another table's rows, or none), so it stops here; {then}")
    log.error("event=snapshot_table_failed pipeline=%s table=%s error=%s",
              pipeline_id, table, copy.error)


def failed_by(changes: list[RowChange], copies: list[TableCopy], compiled: CompiledPipeline,
              pipeline_id: str) -> list[TableCopy]:
    """The copies under way whose table a DDL of ``changes`` takes away, failed
    (:func:`fail`)."""
    failed: list[TableCopy] = []
    for change in changes:
        if change.type != ChangeType.DDL or not change.ddl:
            continue
        ran = ddlsession.position(change.session)
        for one in moved(change.ddl, change.schema, ddlsession.sql_mode(change.session)):
            for copy in copies:
                # (a copy planned after the DDL ran, Select behind: it reads the table
                # that has the name after it, as it should)
                if copy.state == "copying" and _takes(compiled, one, copy) and \
                        not ran_before_planned(copy, ran):
                    fail(copy, one, change, compiled.stored, pipeline_id)
                    failed.append(copy)
    return failed


def _takes(compiled: CompiledPipeline, one: Moved, copy: TableCopy) -> bool:
    if not one.table:
        return compiled.stored_schema(one.schema) == copy.schema
    return compiled.stored(one.schema, one.table) == (copy.schema, copy.table)
