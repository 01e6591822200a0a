"""What Select does with a query event of the binlog (:class:`QueryEvents`, a part of
:class:`node.select.binlog.BinlogReader`): a transaction's start and end, a savepoint or a
rollback inside one, and a DDL statement, replayed (``ddl_sync``) or only cutting a batch of
its own. Whatever else a query event holds inside a transaction stops the pipeline with its
text and position: dropping it, or the rows around it, would lose changes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from node import ddlsession
from node.changes import ChangeType, Event, RowChange
from node.ddl import concerns, tables_named
from node.ddltypes import OldType
from node.select import libevents, statements
from node.select.framing import estimate, uncommitted
from shared.errors import SourceError

if TYPE_CHECKING:
    from node.select.binlog import BinlogReader


class QueryEvents:
    """The query-event half of the binlog reader; its state is the reader's."""

    def _query(self: BinlogReader, data: bytes, events: list[Event], event_rows: int,
               decoded: list[RowChange], state: str, before: str = "") -> bool:
        """BEGIN, COMMIT, a savepoint inside a transaction, or a DDL statement; True when it
        ended a transaction. Anything else inside a transaction stops the pipeline with its
        text and position: dropping it, or the rows around it, would lose changes. A DDL
        statement inside a group (CREATE TABLE … SELECT, its rows follow) is at ``before``,
        the GTID state before the group: a resume by GTID after it must read the rows."""
        event = self._library_event(data)
        query = event.query.strip()
        found = statements.kind(query, self._in_txn, self.loop_channel)
        if (events or decoded) and not self._in_txn and found != statements.END:
            uncommitted(self)  # rows outside any transaction: cleared below, they were lost
        if found == statements.SAVEPOINT:  # what it undid is mostly not in the binlog
            self._rollbacks.statement(query, events, decoded, self.layouts,
                                      f"binlog of {self.source.name} at {self._position(state)}")
            return False
        if found == statements.BEGIN:
            self._in_txn = True
            self.reading_since_ms = int.from_bytes(data[1:5], "little") * 1000
            return True
        if found == statements.END:
            self._in_txn = False
            if query.upper() == "ROLLBACK":  # a non-transactional table's rows stay
                self._rollbacks.undo(events, decoded, (0, 0), self.layouts,
                                     f"binlog of {self.source.name} at {self._position(state)}")
                event_rows = sum(estimate(len(event), self.row_bytes[number])
                                 for number, event in events)
            self._commit(events, event_rows, decoded, state, data)
            return True
        where = f"binlog of {self.source.name} at {self._position(state)}"
        if found == statements.XA:
            raise SourceError(
                f"{where}: an XA transaction ({query[:120]!r}); setl does not replicate XA "
                "transactions (their prepare and commit are apart in the binlog): commit such "
                "changes as ordinary transactions, then copy the changed tables again")
        if found == statements.INSIDE:
            raise SourceError(
                f"{where}: a statement inside a transaction that setl cannot replicate: "
                f"{query[:300]!r}; row-based replication logs rows, not statements (is a "
                "session writing with binlog_format=STATEMENT?): write it in ROW format, then "
                "copy the changed tables again")
        if self._in_txn and statements.temporary(query):  # a MIXED session's, in a
            return False  # transaction: nothing replicated; the transaction goes on
        if self._in_txn and (events or decoded):  # (CREATE … SELECT: the DDL comes first)
            raise SourceError(
                f"{where}: a DDL statement inside a transaction after its rows: "
                f"{query[:300]!r}; setl would lose the rows before it (is a session writing "
                "with binlog_format=MIXED or STATEMENT?): write in ROW format, then copy the "
                "changed tables again")
        self._tables.clear()  # parsed once per table id: none survives DDL
        self._rollbacks.forget()
        if self._altered is not None:
            for named in tables_named(query, _schema(event), getattr(event, "sql_mode", 0) or 0):
                self._altered(*named)
        if self._in_txn:
            state = before  # a file/pos resume on this server reads the group's GTID there
        if found == statements.ECHO or self._echoes.echo(query, _schema(event)):
            self._commit([], 0, [], state, data, echo=True)  # the opposite pipeline's DDL
            return True
        if statements.copies_rows(query):  # (logged as rows, its text holds no SELECT)
            self._statement_copy(query, _schema(event), getattr(event, "sql_mode", 0) or 0,
                                 where)
        self._ddl(event, state, data)
        return True

    def _statement_copy(self: BinlogReader, query: str, schema: str, mode: int, where: str) -> None:
        """A CREATE TABLE … SELECT logged as its text (in ROW format the server logs the
        table's CREATE TABLE, then its rows) of a table the pipeline takes stops: the rows it
        copied are in no rows event, and its text, replayed, would copy the target's rows,
        not the source's."""
        tables = [f"{name[0]}.{name[1]}" for name in tables_named(query, schema, mode)
                  if self._wants_schema(name[0]) and self._wants(*name)]
        if tables:
            raise SourceError(
                f"{where}: {query[:200]!r} was logged as a statement (a session writing with "
                "binlog_format=STATEMENT or MIXED), so the rows it copied into "
                f"{', '.join(tables)} are in no rows event and the target would lack them. "
                "Write such statements in ROW format. Then make the table on the target if "
                "ddl_sync is on (by hand), move the pipeline past this statement (setl "
                "position set … the next transaction's position) and copy the table (setl "
                "snapshot … --table)")

    def _ddl(self: BinlogReader, event: Any, state: str, data: bytes) -> None:
        # a two-phase ALTER runs at its commit: at its start it may yet fail (and be rolled
        # back: replayed then, the target kept what the source undid)
        schema = _schema(event)
        later = event.alter_phase & (libevents.ALTER_STARTED | libevents.ALTER_ROLLED_BACK)
        mode = getattr(event, "sql_mode", 0) or 0
        # (ddl_sync off: a column's type not known otherwise is the target's)
        before = self._last_maps.before(event.query, schema, mode, settled=not later,
                                        target=not self.ddl)
        at = self._position(state)  # after the statement: were the keys read before it?
        where = ((ddlsession.POSITION, (at.file, at.pos, at.server, at.gtid)),)
        if not self.ddl or later:
            # not replayed (ddl_sync off); one on a replicated table still cuts a batch of its
            # own, after which the pipeline reads the tables' keys again (an ALTER may have
            # changed them); Extract drops it, or pauses on one that removes rows or may
            # have rounded values in place (by the types before it, where known)
            session: tuple[tuple[str, Any], ...] = (("sql_mode", mode),) + (
                (("columns", before),) if before else ()) + where
            changes = [RowChange(schema, "", ChangeType.DDL, ddl=event.query,
                                 session=session)] if not later and concerns(
                event.query, schema, mode, self._wants, self._wants_schema) else []
            self._commit([], 0, changes, state, data)
            return
        try:
            statement, session = ddlsession.of_event(
                event, self._facts, {name: OldType(*rest) for name, *rest in before})
        except SourceError as exc:
            raise SourceError(f"binlog of {self.source.name} at {self._position(state)}: "
                              f"{exc}") from None
        change = RowChange(schema, "", ChangeType.DDL, ddl=statement,
                           commit_ts_ms=int(event.timestamp) * 1000,
                           session=self._databases.follow(statement, schema, session) + where)
        self._commit([], 0, [change], state, data)


def _schema(event: Any) -> str:
    """A query event's default database."""
    return event.schema.decode() if isinstance(event.schema, bytes) else str(event.schema)
