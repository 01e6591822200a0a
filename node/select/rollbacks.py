"""What a source transaction undid that is still in its binlog.

A ``ROLLBACK TO SAVEPOINT`` of a transaction that wrote transactional tables only takes its
undone events out of the binlog, and the binlog shows nothing of it. A transaction that also
wrote a non-transactional table (MyISAM, Aria) or a temporary table keeps them: the server
writes the undone rows and then the ``ROLLBACK TO`` statement (or, for the whole transaction,
a closing ``ROLLBACK``), and a replica that runs them undoes the transactional part itself.
Select does what that replica does: the rows of transactional tables since the savepoint (or
in the whole transaction) go, the rows of the others stay, as they stayed on the source.
Which tables roll back is read from the source when a rollback is met (a rare event).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from node.changes import Event, RowChange
from node.extract.decode import TableSchema
from shared.errors import SourceError

_STATEMENT = re.compile(r"\s*(SAVEPOINT|RELEASE\s+SAVEPOINT|ROLLBACK\s+(?:WORK\s+)?TO"
                        r"(?:\s+SAVEPOINT)?)\s+(.+?)\s*;?\s*\Z", re.IGNORECASE | re.DOTALL)
Mark = tuple[int, int]  # a savepoint: the transaction's events and decoded rows before it


class Rollbacks:
    """The savepoints of the transaction being read, and what its rollbacks undo.
    ``transactional(schema, table)``: whether the table's engine rolls back (None when the
    source no longer has the table)."""

    def __init__(self, transactional: Callable[[str, str], bool | None]) -> None:
        self._transactional = transactional
        self._known: dict[tuple[str, str], bool] = {}
        self._marks: dict[str, Mark] = {}
        self._events: list[Event] | None = None  # the transaction the marks are of

    def forget(self) -> None:
        """Ask again what engines tables have: after DDL (an ALTER TABLE … ENGINE=)."""
        self._known.clear()

    def _of(self, events: list[Event]) -> dict[str, Mark]:
        """The savepoints of the transaction whose events are ``events`` (Select gathers
        each transaction's in a list of its own): none yet for a new one. Nothing is done
        per transaction that has no savepoint."""
        if events is not self._events:
            self._events, self._marks = events, {}
        return self._marks

    def statement(self, query: str, events: list[Event], decoded: list[RowChange],
                  layouts: dict[int, TableSchema], where: str) -> None:
        """A SAVEPOINT, RELEASE SAVEPOINT or ROLLBACK TO statement inside a transaction; a
        rollback's undone rows are taken out of ``events`` and ``decoded`` in place."""
        found = _STATEMENT.match(query)
        if found is None:
            raise SourceError(f"{where}: a savepoint statement setl cannot read: "
                              f"{query[:200]!r}; copy the changed tables again once it is "
                              "fixed")
        verb, name, marks = found.group(1).split()[0].upper(), _name(found.group(2)), \
            self._of(events)
        if verb == "SAVEPOINT":
            marks[name] = (len(events), len(decoded))
        elif verb == "RELEASE":
            marks.pop(name, None)
        else:
            mark = marks.get(name)
            if mark is None:
                raise SourceError(
                    f"{where}: {query[:200]!r} rolls back to a savepoint the transaction's "
                    "binlog never set, so which of its rows the source undid cannot be "
                    "told; the pipeline stops rather than guess: copy the changed tables "
                    "again, then set where the pipeline goes on (setl position set)")
            self.undo(events, decoded, mark, layouts, where)
            self._marks = {key: at for key, at in marks.items() if at <= mark}

    def undo(self, events: list[Event], decoded: list[RowChange], mark: Mark,
             layouts: dict[int, TableSchema], where: str) -> None:
        """Take the rows of transactional tables since ``mark`` out (the free door's and the
        loop marks' rows, setl's own InnoDB tables, among them); keep the others."""
        at, at_decoded = mark
        events[at:] = [event for event in events[at:]
                       if not self._rolls_back(layouts[event[0]], where)]
        del decoded[at_decoded:]

    def _rolls_back(self, layout: TableSchema, where: str) -> bool:
        table = (layout.schema, layout.table)
        known = self._known.get(table)
        if known is None:
            found = self._transactional(*table)
            if found is None:
                raise SourceError(
                    f"{where}: a rollback undid rows of {table[0]}.{table[1]}, which the "
                    "source no longer has, so whether its rows stayed (a non-transactional "
                    "engine keeps them) cannot be told; the pipeline stops rather than "
                    "guess: copy the changed tables again, then set where the pipeline goes "
                    "on (setl position set)")
            known = self._known[table] = found
        return known


def transactional(connect: Callable[[], Any]) -> Callable[[str, str], bool | None]:
    """Whether a source table's engine rolls back, asked of the source (None: no such
    table)."""
    def ask(schema: str, table: str) -> bool | None:
        with connect() as conn, conn.cursor() as cursor:
            cursor.execute("SELECT e.TRANSACTIONS FROM information_schema.TABLES t JOIN "
                           "information_schema.ENGINES e ON e.ENGINE = t.ENGINE WHERE "
                           "t.TABLE_SCHEMA = %s AND t.TABLE_NAME = %s", (schema, table))
            row = cursor.fetchone()
        return None if row is None else str(row[0]).upper() == "YES"
    return ask


def _name(text: str) -> str:
    """A savepoint's name as the server matches it: unquoted, case-insensitive."""
    text = text.strip()
    if len(text) > 1 and text[0] == text[-1] == "`":
        text = text[1:-1].replace("``", "`")
    return text.lower()
