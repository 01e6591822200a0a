"""Source DDL that pauses a pipeline, ``ddl_sync`` or not, because the target cannot be left
without what it did and setl cannot replay it (:func:`node.ddl.extract_ddl` asks): rows
moved between tables by a partition swap, values rewritten in place by an ALTER that is not
replayed, a key added behind the start, a tablespace imported from a file, a table made
system-versioned."""

from __future__ import annotations

from typing import Protocol

from node.changes import RowChange
from node.ddlclauses import STRICT_MODES, added_keys, adds_versioning, rewriting
from node.ddlparse import TableDdl
from node.ddlsession import position, sql_mode
from node.ddltypes import OldType
from shared.errors import ConfigError
from shared.identifiers import qualified, quote
from shared.model import BinlogPosition


class Replicated(Protocol):
    """What these checks need of a compiled pipeline (node.ddl.DdlPipeline has it)."""

    # the key of each table without a primary key, as the source showed it when read
    table_keys: dict[tuple[str, str], tuple[str, ...]]
    # the source's binlog end read just after them (None: not known)
    keys_read_at: BinlogPosition | None

    def wants(self, schema: str, table: str) -> bool: ...
    def stored(self, schema: str, table: str) -> tuple[str, str]: ...


def swapped(compiled: Replicated, ddl: TableDdl, ran: str, past: str) -> None:
    """An EXCHANGE or CONVERT of a partition (:data:`node.ddlparse.SWAPS`) that moves rows of
    a replicated table pauses, ``ddl_sync`` or not: its rows come with no row event, a retry
    of a replayed EXCHANGE swaps them back, and the other table may go to another target
    or to none."""
    tables = [qualified(*pair) for pair in dict.fromkeys(
        name.pair for name in (*ddl.names, *ddl.swapped)) if compiled.wants(*pair)]
    if not tables:
        return
    between = " and ".join(qualified(*name.pair) for name in (*ddl.names, *ddl.swapped))
    raise ConfigError(
        f"{ran}, which moves rows between {between} ({ddl.rows}) without row events; "
        f"{', '.join(tables)} is replicated by this pipeline, and setl does not replay it, "
        "ddl_sync or not (a retried EXCHANGE swaps the rows back; the other table may go to "
        "another target or none). Do on the target what it did (by hand: where the other "
        "table is not there, copy the replicated one again: setl snapshot), then move the "
        f"pipeline past this statement: {past}")


def rewritten(compiled: Replicated, ddl: TableDdl, change: RowChange, ran: str,
              past: str) -> None:
    """An ALTER not replayed (``ddl_sync`` off) that may have rewritten the values of a
    replicated table in place, with no row event (:func:`node.ddlclauses.rewriting_clause`: a
    session that cuts what a new type cannot hold, or in any session a type that rounds
    values, such as a DECIMAL of a smaller scale) pauses: the target would keep the old
    values, and a keyless table's later changes would find no row to match."""
    session = dict(change.session)
    carried = session.get("sql_mode")
    before = {name: OldType(kind, digits, fraction)
              for name, kind, digits, fraction in session.get("columns", ())}
    found = rewriting(change.ddl, None if carried is None else int(carried), before)
    tables = [qualified(*name.pair) for name in ddl.names if compiled.wants(*name.pair)]
    if found is None or not tables:
        return
    clause, column = found
    what = f"column {quote(column)} of {', '.join(tables)}" if column else ", ".join(tables)
    strict = carried is not None and bool(int(carried) & STRICT_MODES)  # (else any MODIFY)
    known = "" if not (strict and column) or column.lower() in before else (
        f" ({quote(column)}'s type before it is not known: no row of the table was read "
        "since the node started, no earlier ALTER of this run set it, and its target's "
        "column was not read; any number or time type pauses then)")
    ended = position(change.session)
    at = f" (the statement ends at binlog {ended})" if ended is not None and (
        ended.file or ended.gtid) else ""
    raise ConfigError(
        f"{ran}{at}, which may have rewritten the values of {what} ({clause!r}: "
        "in a session whose sql_mode is not strict, or ALTER IGNORE, a value the new type "
        "cannot hold is cut or replaced; in any session, a DECIMAL, FLOAT, DOUBLE, DATE or "
        "time type with fewer digits rounds the values it gets, with at most a note; "
        f"either way with no row event){known}; with ddl_sync off it is not replayed, and "
        "the target would keep the old values. Run the same ALTER on the target (by hand, "
        "under the same sql_mode: it rewrites the values alike), then move the "
        f"pipeline past this statement: {past}; or turn ddl_sync on for this pipeline "
        "(setl apply) and resume, and it is replayed")


def keyed_before(compiled: Replicated, ddl: TableDdl, change: RowChange, ran: str,
                  past: str) -> None:
    """A statement that gives a replicated table the very unique key its changes are merged
    by (a table with no primary key in its table maps is keyed by the key the source's
    schema showed when the pipeline read it: at its start, or after a DDL) stops: that key
    was read after this statement ran, so the table's changes before it, since the read,
    were merged by a key the table did not have then (two rows of one key value taken for
    one, a DELETE of one removing both on the target). An added primary key is not checked
    (:func:`node.ddlclauses.added_keys`). A statement logged past the binlog end read just
    after the keys passes: it ran after the read, which showed the key, so the table had it
    already (a redundant ``ADD UNIQUE``, an ``IF NOT EXISTS`` of a key it has); a DDL of
    the table between the two had no rows of it after it (they would have read the keys
    again)."""
    if _read_before(compiled.keys_read_at, position(change.session)):
        return
    added = added_keys(change.ddl, sql_mode(change.session))
    for name in ddl.names:
        used = compiled.table_keys.get(compiled.stored(*name.pair)) \
            if compiled.wants(*name.pair) else None
        if not used or tuple(column.lower() for column in used) not in added:
            continue
        raise ConfigError(
            f"{ran}, which gives {qualified(*name.pair)} the key ({', '.join(used)}) this "
            "pipeline merges its changes by; the pipeline read the table's keys after the "
            "statement ran (it started, or read them again, behind it), so the table's "
            "changes before it were merged by a key it did not have then, and the target's "
            "rows may differ from the source's (rows of one key value taken for one). Do on "
            "the target what the statement did (by hand, where ddl_sync is on), move the "
            f"pipeline past this statement: {past}; then copy the table again (setl snapshot)")


def _read_before(read_at: BinlogPosition | None, ran: BinlogPosition | None) -> bool:
    """Whether keys read where the binlog ended at ``read_at`` were read before the
    statement that ends at ``ran`` was logged: both of one server's binlog, ``ran`` past
    it (anything else, or not known, is taken for after)."""
    return read_at is not None and ran is not None and bool(read_at.server) and \
        read_at.server == ran.server and ran.order() > read_at.order()


def imported(compiled: Replicated, ddl: TableDdl, ran: str, past: str) -> None:
    """An IMPORT TABLESPACE of a replicated table pauses with ``ddl_sync`` too: the rows it
    brings in are a file on the source's host, with no row events, and replayed on the
    target it imports nothing of theirs (it fails, or takes a stale file found there)."""
    tables = [qualified(*name.pair) for name in ddl.names if compiled.wants(*name.pair)]
    if not tables:
        return
    raise ConfigError(
        f"{ran}, which brings in the rows of {', '.join(tables)} from a tablespace file "
        "(IMPORT TABLESPACE) without row events; setl does not replay it: the file is on the "
        "source's host, and the target would import none of those rows (or a stale file of "
        "its own). Move the pipeline past this statement: "
        f"{past}; then copy the table to the target again (setl snapshot; where the "
        "target's tablespace was discarded, make the table there again first, as SHOW CREATE "
        "TABLE on the source shows it)")


def versioned_problem(table: str) -> str:
    """Why a system-versioned table cannot be replicated (the start's check says it too)."""
    return (f"{table} is a system-versioned table (WITH SYSTEM VERSIONING), which setl does "
            "not replicate: its binlog logs a DELETE as an UPDATE of row_end and each "
            "UPDATE's old version as an INSERT, so the target would keep deleted rows and "
            "gain every old version")


def versioned(compiled: Replicated, ddl: TableDdl, change: RowChange, ran: str,
              past: str) -> None:
    """A statement that makes a replicated table system-versioned pauses, ``ddl_sync`` or
    not, whatever the source's schema shows when the pipeline reads it: the versioning may
    be dropped again by then (the node down meanwhile), and the row events logged while it
    lasted carry ``row_start``/``row_end`` and its old versions (Load would retry them
    forever on an unknown column, or keep deleted rows)."""
    tables = [".".join(name.pair) for name in ddl.names if compiled.wants(*name.pair)]
    if not tables or not adds_versioning(change.ddl, sql_mode(change.session)):
        return
    raise ConfigError(
        f"{ran}: {versioned_problem(', '.join(tables))}. Leave the table out of the "
        "pipeline's pairs, or drop its versioning on the source (ALTER TABLE … DROP SYSTEM "
        f"VERSIONING); then move the pipeline past this statement: {past}, and copy the "
        "table again (setl snapshot) once the pipeline is past the changes logged while it "
        "was versioned")


def sequence_problem(name: str) -> str:
    """Why a sequence cannot be replicated (the start's check says it too)."""
    return (f"{name} is a SEQUENCE, and a pair of this pipeline takes it (a pattern matching "
            "its name): setl does not replicate sequences (CREATE SEQUENCE is not replayed, "
            "ddl_sync or not, and its row events would find no table on the target, or "
            "write a sequence's row as a table's); a target's sequence is its own")
