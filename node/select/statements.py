"""What a query event of the binlog is to Select: a transaction's start or end, a savepoint
inside one, the opposite pipeline's DDL on a two-way channel, a DDL, or something Select
must stop at (an XA transaction, a statement inside a transaction). Plain text in, a kind
out: tested without a server (tests/unit/test_statements.py)."""

from __future__ import annotations

import re

from node import sqllex
from node.ddl import kind_of, tables_named
from shared.retl import loop_comment

BEGIN, END, SAVEPOINT, XA, INSIDE, ECHO, DDL = (
    "begin", "end", "savepoint", "xa", "inside", "echo", "ddl")
# statements a transaction may hold in the binlog besides its rows (Django's nested atomic(),
# SQLAlchemy's begin_nested() and Spring's NESTED propagation issue them): what a rollback to
# a savepoint undid is mostly not in the binlog; where it is, node.select.rollbacks drops it
_SAVEPOINT = re.compile(r"(SAVEPOINT|ROLLBACK\s+(WORK\s+)?TO|RELEASE\s+SAVEPOINT)\s",
                        re.IGNORECASE)
# DDL that MariaDB may log inside a transaction's group (CREATE TABLE … SELECT: the statement,
# then its rows)
_DDL_WORDS = {"CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE"}


def kind(query: str, in_transaction: bool, loop_channel: str | None) -> str:
    """The kind of a query event's (stripped) text, read inside a transaction or not; a
    ROLLBACK that ends a binlog transaction ends it like a COMMIT, its transactional rows
    dropped (node.select.rollbacks: its non-transactional changes stay)."""
    upper = query.upper()
    if upper == "BEGIN":
        return BEGIN
    if upper in ("COMMIT", "ROLLBACK"):
        return END
    if upper.startswith("XA "):
        return XA
    if in_transaction and upper.split(None, 1)[0] not in _DDL_WORDS:
        return SAVEPOINT if _SAVEPOINT.match(query + " ") else INSIDE
    if loop_channel is not None and query.startswith(loop_comment(loop_channel)):
        return ECHO
    return DDL


def copies_rows(query: str, sql_mode: int = 0) -> bool:
    """Whether a DDL is a CREATE TABLE … SELECT of a table that is not temporary, as its text
    (no other part of a CREATE TABLE may hold a query: not a DEFAULT, nor a CHECK). Written in
    ROW format the server logs the table's CREATE TABLE (no SELECT), then its rows; in
    STATEMENT or MIXED format the statement alone."""
    words = sqllex.statement_code(query, sql_mode)
    head = [word for word in words[:5] if word.is_word("CREATE", "OR", "REPLACE", "TABLE",
                                                          "TEMPORARY")]
    return bool(words) and words[0].is_word("CREATE") and \
        any(word.is_word("TABLE") for word in head) and \
        not any(word.is_word("TEMPORARY") for word in head) and \
        any(word.is_word("SELECT") for word in words)


def temporary(query: str, sql_mode: int = 0) -> bool:
    """Whether a DDL makes or drops a temporary table (nothing a pipeline replicates)."""
    words = sqllex.statement_code(query, sql_mode)
    return bool(words) and words[0].is_word("CREATE", "DROP") and \
        any(word.is_word("TEMPORARY") for word in words[1:4])


class DropEchoes:
    """A two-way channel's own DROP TABLE on this server, known by its intent. The server
    writes a DROP TABLE to the binlog as text of its own (``DROP TABLE `s`.`t` /* generated
    by server */``), without the loop comment setl put before it, so the opposite pipeline
    took it for the users' and ran it back on the first side: a table made again there
    meanwhile was dropped, and a ``DROP TABLE IF EXISTS`` went back and forth for ever.
    Before a DDL, the loader commits its intent on this server (``retl.retl_ddl``, in the
    binlog just before the DDL): a DROP of the same tables after the intent of this channel's
    other pipeline is its echo. The loader deletes its intents with the position it writes
    after the DDL, so an intent whose row is deleted before its DROP came is forgotten: that
    DROP never ran here (its table was gone: taken as applied), and kept, the intent took
    the users' own DROP of the name, any time later, for its echo."""

    KEEP = 64  # intents of DROPs not seen yet (a bound: each one ends with its row)

    def __init__(self, channel: str, pipeline_id: str) -> None:
        self._prefix, self._mine = f"{channel}.", pipeline_id
        self._pending: list[tuple[tuple[str, ...], frozenset[tuple[str, str]]]] = []

    def _theirs(self, row: dict[str, object]) -> bool:
        pipeline, ddl = str(row.get("pipeline_id") or ""), row.get("ddl")
        return pipeline.startswith(self._prefix) and pipeline != self._mine and \
            isinstance(ddl, str) and kind_of(ddl) == "DROP"

    def intent(self, row: dict[str, object]) -> None:
        """An intent row the binlog holds."""
        if self._theirs(row):
            self._pending = [*self._pending[-(self.KEEP - 1):],
                             (_intent_key(row), frozenset(tables_named(str(row["ddl"]), "")))]

    def done(self, row: dict[str, object]) -> None:
        """An intent row deleted (its DDL's position written): its DROP, if not seen by
        now, never ran."""
        if self._theirs(row):
            key = _intent_key(row)
            self._pending = [pending for pending in self._pending if pending[0] != key]

    @property
    def due(self) -> bool:
        """Whether an intent's DROP is still to come."""
        return bool(self._pending)

    def echo(self, query: str, schema: str) -> bool:
        """Whether a DDL statement is the echo of a DROP an intent announced (taken once)."""
        if not self._pending or kind_of(query) != "DROP":
            return False
        names = frozenset(tables_named(query, schema))
        for at, (_, named) in enumerate(self._pending):
            if named == names:
                del self._pending[at]
                return True
        return False


def _intent_key(row: dict[str, object]) -> tuple[str, ...]:
    """Which intent a row of ``retl.retl_ddl`` is (its primary key)."""
    return tuple(str(row.get(name)) for name in ("pipeline_id", "binlog_file", "binlog_pos",
                                                 "seq"))
