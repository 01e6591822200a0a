"""A replicated DDL run on a target, inside Load's batch transaction (it commits
implicitly: the position follows it, after the position row is locked and its epoch
checked again).

A DDL and the position row after it cannot commit together, so before it runs, an *intent*
is committed on the target (``retl.retl_ddl``: the DDL's binlog position and a fingerprint
of the tables it acts on as the target has them: each one's SHOW CREATE TABLE and InnoDB
table id, or its absence). A replay after a crash in between reads the target's schema: a
fingerprint that moved since the intent means the DDL ran (taken as applied, whatever its
kind: a renamed column, an unnamed index, a table swap by RENAME, a cut-over of an online
schema change); the same fingerprint means it did not, and it runs. On a first try, an
error that proves the effect is already there (a CREATE of a table that exists, …) is
still taken as applied, as before — for an ALTER only when it has one clause: a failed
ALTER changes nothing, so a column already there must not hide the clauses beside it; and
a table, column or index already there only when it is as the statement makes it (tried
on a temporary table: :func:`_check_alike`), else rows would load into another shape; so
is one with IF NOT EXISTS that did nothing there (a note, no error: :func:`_skipped`).
The fingerprint leaves out the table's ``AUTO_INCREMENT`` counter, which any other writer
moves (the DDL did not run because a row came)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pymysql

from node.changes import TargetChange
from node.ddl import kind_of, on_database, tables_named
from node.ddl import parse as parse_ddl
from node.ddlclauses import is_option
from node.ddlsession import database_defaults, moving_past, run_under, sql_mode
from node.sqllex import parts
from node.sqllex import statement_code as code
from node.target.mysql import ddlprobe
from shared.identifiers import qualified, quote
from shared.model import BinlogPosition

log = logging.getLogger("setl.node.target.mysql.loader")
# Errors that prove a replayed DDL's effect is already there, by statement: the table
# exists, the table is gone, the column or index is there (or gone). Any other error — a
# missing table behind CREATE … LIKE, a missing table to ALTER — is a failure, not proof.
DDL_ALREADY_APPLIED = {"CREATE": {1007, 1050, 1061}, "DROP": {1051, 1091},
                       "ALTER": {1060, 1061, 1091}}  # 1061, 1091: CREATE/DROP INDEX
MISSING_TABLE = 1146
# "exists" errors taken as applied only when the target's table is what the statement makes
# of it (:func:`_check_alike`): a table, a column, an index already there, maybe not alike
_EXISTS = {"CREATE": {1050, 1061}, "ALTER": {1060, 1061}}
RENAME_ERRORS = {1050, MISSING_TABLE}  # a replayed RENAME: applied if the target shows it
INTENT_DDL = """CREATE TABLE IF NOT EXISTS retl.retl_ddl (
  pipeline_id VARCHAR(191) NOT NULL,
  binlog_file VARCHAR(255) NOT NULL,
  binlog_pos BIGINT NOT NULL,
  seq INT NOT NULL,
  fingerprint CHAR(64) NOT NULL,
  ddl MEDIUMTEXT NOT NULL,
  PRIMARY KEY (pipeline_id, binlog_file, binlog_pos, seq)
) ENGINE=InnoDB"""
INTENTS_DONE = "DELETE FROM retl.retl_ddl WHERE pipeline_id = %s"
_COUNTER = re.compile(r" AUTO_INCREMENT=\d+")  # SHOW CREATE TABLE's table option


def tables_of(change: TargetChange) -> list[tuple[str, str]]:
    """The target tables a DDL acts on (a RENAME's both sides)."""
    found = tables_named(change.ddl, change.schema, sql_mode(change.session))
    if not found:
        return [(change.schema, change.table)] if change.table else []
    return sorted(set(found))


def clauses(statement: str, mode: int = 0) -> int:
    """How many clauses an ALTER TABLE has that change something (``ALGORITHM=…``,
    ``LOCK=…`` do not): the parts between its top-level commas."""
    return max(sum(not is_option(part) for part in parts(code(statement, mode))), 1)



def fingerprint(cursor: Any, tables: list[tuple[str, str]], counters: bool = False) -> str:
    """What the target's schema says of ``tables`` now: each one's definition and InnoDB
    table id (which follows a table through a RENAME), or that it is not there. Its
    AUTO_INCREMENT counter is left out (another writer's row moves it) unless ``counters``
    (how builds before 2026-12-05 wrote their intents)."""
    seen = []
    for schema, table in tables:
        try:
            cursor.execute(f"SHOW CREATE TABLE {qualified(schema, table)}")
            definition = str(cursor.fetchone()[1])
            definition = definition if counters else _COUNTER.sub("", definition)
        except pymysql.MySQLError:
            definition = None
        seen.append([schema, table, definition, _table_id(cursor, schema, table)])
    return hashlib.sha256(json.dumps(seen).encode()).hexdigest()


def _table_id(cursor: Any, schema: str, table: str) -> int | None:
    for view in ("INNODB_SYS_TABLES", "INNODB_TABLES"):  # MariaDB's, MySQL 8's
        try:
            cursor.execute(f"SELECT TABLE_ID FROM information_schema.{view} WHERE NAME = %s",
                           (f"{schema}/{table}",))
        except pymysql.MySQLError:
            continue
        row = cursor.fetchone()
        return int(row[0]) if row else None
    return None


def ran_before(cursor: Any, change: TargetChange, pipeline_id: str, at: BinlogPosition,
               seq: int) -> bool:
    """Whether an earlier try ran this DDL (its intent is there and the schema moved since);
    else its intent is committed now, before it runs."""
    now = fingerprint(cursor, tables_of(change))
    cursor.execute(INTENT_DDL)
    cursor.execute("SELECT fingerprint FROM retl.retl_ddl WHERE pipeline_id = %s AND "
                   "binlog_file = %s AND binlog_pos = %s AND seq = %s",
                   (pipeline_id, at.file, at.pos, seq))
    row = cursor.fetchone()
    if row is not None:  # an intent an older build wrote counted the AUTO_INCREMENT counter
        tables = tables_of(change)
        return str(row[0]) != now and str(row[0]) != fingerprint(cursor, tables, True)
    cursor.execute("INSERT INTO retl.retl_ddl VALUES (%s, %s, %s, %s, %s, %s)",
                   (pipeline_id, at.file, at.pos, seq, now, change.ddl))
    cursor.execute("COMMIT")
    return False


def apply_ddl(cursor: Any, change: TargetChange, pipeline_id: str, process_id: int,
              at: BinlogPosition, seq: int, mark: str = "") -> int:
    """Run one DDL (the ``seq``-th of the batch ending at ``at``) unless an earlier try ran
    it (the target's schema tells: see the module's text); ``mark`` goes before its text (a
    two-way channel's loop comment)."""
    if ran_before(cursor, change, pipeline_id, at, seq):
        log.warning("event=ddl_already_applied pipeline=%s process_id=%d target=%s ddl=%r "
                    "reason=schema_moved_since_intent", pipeline_id, process_id,
                    change.datasource, change.ddl)
        return 0
    mode = sql_mode(change.session)
    kind = kind_of(change.ddl, mode)
    database = on_database(change.ddl, mode)
    try:
        # every statement setl adds carries the mark too: the opposite pipeline of a
        # two-way channel would replay it on the origin as DDL of that server's own
        if database == "ALTER":  # a database setl has not made yet: made, then changed
            cursor.execute(f"{mark}CREATE DATABASE IF NOT EXISTS {quote(change.schema)}")
        elif not database:
            if kind == "CREATE":
                cursor.execute(f"{mark}CREATE DATABASE IF NOT EXISTS {quote(change.schema)}")
            cursor.execute(f"USE {quote(change.schema)}")
        with _source_defaults(cursor, change, kind, database, mark), \
                _skipped(cursor, change, kind, database) as skipped:
            run_under(cursor, change.session, mark + change.ddl)  # as the source's ran it
    except pymysql.MySQLError as exc:
        code = exc.args[0] if exc.args else 0
        done = code in DDL_ALREADY_APPLIED.get(kind, ()) or (
            kind == "RENAME" and code in RENAME_ERRORS and _renamed(cursor, change))
        if done and kind == "ALTER" and clauses(change.ddl, mode) > 1:
            raise type(exc)(code, (
                f"{change.ddl!r} failed on target {change.datasource} ({exc.args[-1]}): part "
                "of it is there already, and a failed ALTER runs none of its other clauses. "
                f"Make {change.schema}.{change.table} on the target match the source's "
                "(SHOW CREATE TABLE on both), then move the pipeline past this statement: "
                f"{moving_past(pipeline_id, change.session)}")) from None
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
        if code in _EXISTS.get(kind, ()):
            _check_alike(cursor, change, kind, database, exc, (pipeline_id, at, seq), mark)
        log.warning("event=ddl_already_applied pipeline=%s process_id=%d target=%s "
                    "ddl=%r error=%r", pipeline_id, process_id,
                    change.datasource, change.ddl, exc.args[-1])
        return 0
    if skipped:  # IF NOT EXISTS over a table, column or index there: alike, or it stops
        code, message = skipped[0]
        _check_alike(cursor, change, kind, database, pymysql.err.OperationalError(
            code, f"note {code}: {message}"), (pipeline_id, at, seq), mark, "did nothing on")
        log.warning("event=ddl_already_applied pipeline=%s process_id=%d target=%s "
                    "ddl=%r note=%r", pipeline_id, process_id,
                    change.datasource, change.ddl, message)
        return 0
    log.info("event=ddl_applied pipeline=%s process_id=%d target=%s table=%s.%s ddl=%r",
             pipeline_id, process_id, change.datasource, change.schema,
             change.table, change.ddl)
    return 1


@contextlib.contextmanager
def _source_defaults(cursor: Any, change: TargetChange, kind: str, database: str,
                     mark: str = "") -> Iterator[None]:
    """A CREATE TABLE runs while its target database has the source database's default
    charset and collation, which its columns without their own take (a target database made
    by hand with other defaults gave them its own: utf8mb4_general_ci where the source's was
    utf8mb4_bin, and 'Bob' and 'bob' became one key); the database's own come back after.
    Both ``ALTER DATABASE`` carry ``mark`` (a two-way channel's loop comment): replayed by
    the opposite pipeline, they would set the origin database's defaults to the target's."""
    wanted = database_defaults(change.session)
    if kind != "CREATE" or database or not wanted or not wanted[0]:
        yield
        return
    cursor.execute("SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM "
                   "information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (change.schema,))
    found = cursor.fetchone()
    own = (str(found[0]), str(found[1])) if found else wanted
    if own == tuple(wanted):
        yield
        return
    name = quote(change.schema)
    cursor.execute(f"{mark}ALTER DATABASE {name} CHARACTER SET {wanted[0]} "
                   f"COLLATE {wanted[1]}")
    try:
        yield
    finally:
        cursor.execute(f"{mark}ALTER DATABASE {name} CHARACTER SET {own[0]} COLLATE {own[1]}")


@contextlib.contextmanager
def _skipped(cursor: Any, change: TargetChange, kind: str, database: str
             ) -> Iterator[list[tuple[int, str]]]:
    """The notes of a table's statement with ``IF NOT EXISTS`` (CREATE TABLE, ADD COLUMN,
    ADD INDEX, CREATE INDEX) that says the target has its table, column or index already
    (1050, 1060, 1061: the statement did nothing there), filled in once it ran; the session's
    ``sql_notes`` is 1 meanwhile (with 0 the server keeps no notes), then put back. Such a
    statement is no error, but the target's object may differ from the one it makes, as
    for one without IF NOT EXISTS that fails (:func:`_check_alike` compares them)."""
    found: list[tuple[int, str]] = []
    words = code(change.ddl, sql_mode(change.session))
    if database or kind not in _EXISTS or not any(
            word.is_word("IF") and words[at + 1:at + 3] and words[at + 1].is_word("NOT")
            for at, word in enumerate(words)):
        yield found
        return
    cursor.execute("SELECT @@SESSION.sql_notes")
    own = cursor.fetchone()[0]
    cursor.execute("SET SESSION sql_notes = 1")
    try:
        yield found
        cursor.execute("SHOW WARNINGS")
        found.extend((int(row[1]), str(row[2])) for row in cursor.fetchall()
                     if int(row[1]) in _EXISTS[kind])
    finally:
        cursor.execute("SET SESSION sql_notes = %s", (own,))


def _renamed(cursor: Any, change: TargetChange) -> bool:
    """Whether the target already shows a RENAME of one table: the old table gone, the new
    one there (one of several — a swap, a cut-over — is not judged by its names: it fails)."""
    parsed = parse_ddl(change.ddl, change.schema, sql_mode(change.session))
    if parsed is None or len(parsed.renames) != 1:
        return False
    old, new = parsed.renames[0]
    cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE "
                   "(TABLE_SCHEMA = %s AND TABLE_NAME = %s) OR (TABLE_SCHEMA = %s AND "
                   "TABLE_NAME = %s)", (*old.pair, *new.pair))
    return {tuple(row) for row in cursor.fetchall()} == {new.pair}


def _check_alike(cursor: Any, change: TargetChange, kind: str, database: str,
                 exc: pymysql.MySQLError, intent: tuple[str, BinlogPosition, int],
                 mark: str, how: str = "failed on") -> None:
    """A CREATE TABLE, ADD COLUMN or index that failed because its table, column or index
    is there already is taken as applied only when the target's table is what the statement
    makes of it (so is one with IF NOT EXISTS that did nothing there, ``how`` says so): its
    columns (type, charset, NULL, default, generated) and unique keys, as
    the statement gives them to a temporary copy of the table (made by it, or copied from
    the target's with what the error says is there taken out). Else it stops (rows loaded
    into another shape than the source's change silently: a column of another type), its
    intent gone: the statement did not run, and a table changed by hand before the retry
    is no sign that it did (the retry runs it, and checks again). A statement that cannot
    be tried so (no CREATE TEMPORARY TABLES grant, a partitioned or FULLTEXT table) is taken
    as applied as before, with a warning."""
    pipeline_id, at, seq = intent
    mode = sql_mode(change.session)
    parsed = parse_ddl(change.ddl, change.schema, mode)
    schema, table = parsed.names[0].pair if parsed is not None and parsed.names else \
        (change.schema, change.table)
    where = f"{qualified(schema, table)} on target {change.datasource}"
    try:
        with _source_defaults(cursor, change, kind, database, mark):
            made = ddlprobe.run_on_probe(cursor, change, parsed, (schema, table), mode, mark)
        differ = ddlprobe.differences(ddlprobe.shape(cursor, qualified(schema, table)),
                                       ddlprobe.shape(cursor, qualified(schema, ddlprobe.PROBE)),
                                       whole=kind != "CREATE") if made else ""
    except pymysql.MySQLError as probe:
        made, differ = False, f"{probe.args[-1] if probe.args else probe}"
    finally:
        with contextlib.suppress(pymysql.MySQLError):
            cursor.execute(f"{mark}DROP TEMPORARY TABLE IF EXISTS "
                           f"{qualified(schema, ddlprobe.PROBE)}")
    if not made:  # not to be tried on a temporary table (no CREATE TEMPORARY TABLES grant;
        # a partitioned or FULLTEXT table, which a temporary one cannot be): as before
        log.warning("event=ddl_adoption_unchecked pipeline=%s target=%s ddl=%r reason=%r "
                    "note=\"taken as applied without comparing the table's shape\"",
                    pipeline_id, change.datasource, change.ddl, differ or "not triable")
        return
    if not differ:
        return
    cursor.execute("DELETE FROM retl.retl_ddl WHERE pipeline_id = %s AND binlog_file = %s "
                   "AND binlog_pos = %s AND seq = %s", (pipeline_id, at.file, at.pos, seq))
    cursor.execute("COMMIT")
    raise type(exc)(exc.args[0] if exc.args else 0, (
        f"{change.ddl!r} {how} target {change.datasource} ({exc.args[-1]}): {where} is "
        f"there already, and not as the statement makes it: {differ}; rows loaded into it "
        "would change silently. Make the target's table match the source's by hand (SHOW "
        "CREATE TABLE on both), and start the channel again: the statement is then taken "
        "as applied")) from None
