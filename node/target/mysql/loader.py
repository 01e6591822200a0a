"""Load: write a merged batch into each target database in one transaction.

In the same transaction the pipeline's applied position is written to
``retl.retl_position`` on that target, so a batch that was already applied (a replay after a
crash between commit and cursor publish) is recognised and skipped: the effect on the target
is exactly once, and a target row never goes back to an older value.

The row also carries the owner epoch (the czxid of the owner's ``mainstem`` znode, which
grows with every new owner). A writer whose epoch is lower than the stored one is a stale
owner (a zombie after a ZooKeeper session loss): its transaction is refused (fencing).

After the position row is locked, the batch's statements, the position and the COMMIT go
to the target together as one multi-statement query (:mod:`node.target.mysql.together`); a ``LOAD
DATA``, a statement whose row count is checked or one that needs a lenient sql_mode goes
alone (:mod:`node.target.mysql.alone`).

With ``skip_load_exception`` a batch the target refuses is written again statement by
statement in one transaction; rows the server refuses (``owners.ROW_REFUSED``: duplicate,
foreign key, bad value, CHECK) are logged (key, error, row) and skipped — a row written by
several statements (a big value's pieces) with all of them — and the rest and the position
commit together. Any other error (one that rolls back the whole transaction, or
interrupts it) is never taken for a bad row: the batch is retried or the pipeline stops.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pymysql

from node.changes import Batch, ChangeType, TargetChange
from node.cursor import Cursor
from node.jobs import PartResult, in_order
from node.target.mysql import alone, displaced, duplicate, localdata, owners, sessions
from node.target.mysql.copies import Copies
from node.target.mysql.ddlapply import INTENTS_DONE, apply_ddl
from node.target.mysql.facts import TargetFacts
from node.target.mysql.owners import (
    LOCK_WAIT_TIMEOUT,
    RETRYABLE,
    ROW_REFUSED,
)
from node.target.mysql.together import Together
from node.target.mysql.twoway import LoopGuard
from node.target.mysql.writes import Writes
from shared import endpoint as endpoints
from shared.errors import FencedError, LoadError
from shared.model import BinlogPosition, DataSource, PipelineParams
from shared.retl import loop_comment
from shared.retry import RetryPolicy

log = logging.getLogger("setl.node.target.mysql.loader")
localdata.install()  # LOAD DATA LOCAL INFILE sends only our statements' rows


class Loader:
    """Writes batches of one pipeline; one connection per target data source."""

    def __init__(self, pipeline_id: str, targets: dict[str, DataSource],
                 params: PipelineParams, epoch: int = 0, loop: LoopGuard | None = None,
                 stop: threading.Event | None = None, run: str = "") -> None:
        self.pipeline_id, self.targets, self.params = pipeline_id, targets, params
        self.epoch, self.loop = epoch, loop
        self.stop = stop or threading.Event()  # set: a retry's wait ends at once
        self.retry = RetryPolicy(max_tries=5, delay_s=0.1, max_delay_s=1.0)
        self.run = run  # the pipeline's life, written into every position row
        self.written: dict[str, BinlogPosition] = {}  # each target's position row, as written
        self.rows_skipped = 0  # rows skip_load_exception skipped in committed transactions
        self._claimed: set[str] = set()  # targets whose row this owner's claim wrote
        self._connections: dict[str, pymysql.Connection] = {}
        self._unchecked: set[str] = set()  # targets whose session may have checks off
        self.facts = TargetFacts(targets, self._connection, self._discard)  # batches rendered here
        # snapshot lines, loaded right after a batch's transaction, several at once
        self.copies = Copies(pipeline_id, targets, params, epoch, self.stop, sessions.COPY_SESSION)
        # the free door's hook: keys of rows removed for rows read in a window, copied again
        self.displaced: displaced.Displaced | None = None
        self.sources: duplicate.Sources | None = None  # a target table's source tables

    def take_skipped(self) -> int:
        """The rows skipped (refused by a target, ``skip_load_exception``) in transactions
        committed since the last call."""
        skipped, self.rows_skipped = self.rows_skipped, 0
        return skipped

    def _connection(self, name: str) -> pymysql.Connection:
        conn = self._connections.get(name)
        if conn is None or not conn.open:
            conn = sessions.connect(self.targets[name], self.pipeline_id, self.epoch,
                                    self.loop is not None)
            self._connections[name] = conn
        return conn

    def close(self) -> None:
        self.copies.close()
        for conn in self._connections.values():
            try:
                conn.close()
            except pymysql.MySQLError:
                pass
        self._connections.clear()

    def claim(self) -> dict[str, Cursor | None]:
        """Fence every target, then read what it holds: this owner's epoch goes into the
        pipeline's position row (a row without a position where there is none yet), so an
        older owner that wakes finds a newer epoch and commits nothing; then the row's
        position and processId (None where nothing was loaded)."""
        found = {name: self._claim(name) for name in self.targets}
        owners.one_server(self.pipeline_id, {name: self._connection(name)
                                             for name in self.targets})
        return found

    def _claim(self, name: str) -> Cursor | None:
        # an older owner's connections are ended first: a frozen one's open transaction
        # holds the row, and is not waited for (LOCK_WAIT_S) before it is ended
        self._end_stale(name)
        attempt, reconnected = 0, False
        while True:
            attempt += 1
            try:
                row = owners.claim(self._connection(name), self.pipeline_id, self.epoch,
                                   self.run, name)
                self._claimed.add(name)
                # an older owner connected since is ended now, not when it blocks a load:
                # it may be about to run a DDL, which no row lock holds back
                self._end_stale(name)
            except pymysql.MySQLError as exc:
                self._discard(name)
                code = exc.args[0] if exc.args else 0
                if code == LOCK_WAIT_TIMEOUT:  # a stale owner's transaction holds the row
                    self._end_stale(name)
                if sessions.again(exc, reconnected, "claim", self.pipeline_id, name, self.stop):
                    reconnected = True  # (a claim made twice is made once: owners.claim)
                    continue
                if code in RETRYABLE and attempt < 3 and not self.stop.is_set():
                    continue
                raise LoadError(f"pipeline {self.pipeline_id}, target {name}: cannot claim "
                                f"the position row: {exc.args[-1] if exc.args else exc}"
                                ) from None
            log.info("event=target_claimed pipeline=%s target=%s epoch=%d position=%s "
                     "process_id=%s", self.pipeline_id, name, self.epoch,
                     f"{row[0]}:{row[1]}" if row and row[0] else "-", row[3] if row else "-")
            if not row or not row[0]:
                return None
            found = Cursor(owners.row_position(row), int(row[3]), run=str(row[4] or ""))
            self.written[name] = found.position
            return found

    def take_over(self, name: str, found: int) -> list[int] | None:
        """Move target ``name``'s position row from epoch ``found`` to the next when no
        connection of that owner is there, and write under it from now on (None); else the
        live connections ([]: the row moved meanwhile): :func:`owners.adopt`. A second
        owner doing the same waits for the lock, then finds this owner's epoch and
        connection: it never adopts beside it."""
        for again in (False, True):
            try:
                live = owners.adopt(self._connection(name), self.pipeline_id, found)
                break
            except pymysql.MySQLError as exc:
                self._discard(name)
                if sessions.again(exc, again, "take_over", self.pipeline_id, name, self.stop):
                    continue  # a compare-and-set: one that committed is not made twice
                raise LoadError(f"pipeline {self.pipeline_id}, target {name}: cannot take "
                                "the position row over: "
                                f"{exc.args[-1] if exc.args else exc}") from None
        if live is not None:
            return live
        self.epoch = self.copies.epoch = found + 1
        for other, conn in list(self._connections.items()):
            try:
                with conn.cursor() as cursor:
                    owners.register(cursor, self.pipeline_id, self.epoch)
                conn.commit()
            except pymysql.MySQLError:  # registered under the new epoch when it opens again
                self._discard(other)
        return None

    def load(self, batch: Batch, changes: list[TargetChange]) -> int:
        """Write a batch given as target changes (a DDL, a two-way channel's batch, whose
        conflicts are checked against the target's rows first); merged and rendered here.
        Return the rows written (0 for an already applied batch)."""
        ddl = [change for change in changes if change.type is ChangeType.DDL]
        if ddl:  # Select puts a DDL in a batch of its own
            return self._load_ddl(batch, ddl)
        by_target: dict[str, list[TargetChange]] = {}
        for change in changes:
            by_target.setdefault(self._known(change.datasource, batch), []).append(change)
        off = sessions.unchecked(batch)
        return self._load_all(batch, {name: Writes(changes=found, unchecked=off)
                                      for name, found in by_target.items()})

    def load_units(self, batch: Batch, results: list[PartResult],
                   redo: Callable[[], list[PartResult]] | None = None) -> int:
        """Write a batch as Extract/Transform rendered it (statements per target table);
        ``redo`` renders it again one statement a row (skip_load_exception's second try).
        Return the rows written (0 for an already applied batch)."""
        by_target: dict[str, Writes] = {}
        apart = [unit for result in results for unit in result.units if unit.apart]
        for unit in in_order(results):
            if not unit.apart:
                by_target.setdefault(self._known(unit.datasource, batch),
                                     Writes()).units.append(unit)
        for unit in apart:  # the batch's transaction moves the position the copies check
            by_target.setdefault(self._known(unit.datasource, batch), Writes())
        if redo is not None:
            for writes in by_target.values():
                writes.redo = redo
        written = self._load_all(batch, by_target)
        if not apart:
            return written
        if self.params.dry_run:
            return written + sum(unit.rows for unit in apart)
        return written + self.copies.load(batch, apart)

    def _known(self, datasource: str, batch: Batch) -> str:
        if datasource not in self.targets:
            raise LoadError(f"pipeline {self.pipeline_id} processId {batch.process_id}: "
                            f"unknown target data source {datasource}")
        return datasource

    def _load_all(self, batch: Batch, by_target: dict[str, Writes]) -> int:
        # A batch with nothing to write (a stretch of tables the pipeline does not replicate)
        # still moves every target's position: a restart then starts after the stretch.
        if not by_target:
            if batch.echo_only:
                return 0
            by_target = {name: Writes() for name in self.targets}
        if self.params.dry_run:
            rows = sum(writes.rows(self) for writes in by_target.values())
            if rows:
                log.info("event=batch_dry_run pipeline=%s process_id=%d rows=%d position=%s",
                         self.pipeline_id, batch.process_id, rows, batch.end)
            return rows
        return sum(self._load_target(name, batch, writes) for name, writes in by_target.items())

    def _load_ddl(self, batch: Batch, ddl: list[TargetChange]) -> int:
        if self.params.dry_run:
            log.info("event=batch_dry_run pipeline=%s process_id=%d ddl=%d position=%s",
                     self.pipeline_id, batch.process_id, len(ddl), batch.end)
            return len(ddl)
        by_target: dict[str, list[TargetChange]] = {}
        for change in ddl:
            by_target.setdefault(change.datasource, []).append(change)
        self.facts.forget()  # tables change shape
        return sum(self._load_target(name, batch, Writes(ddl=found))
                   for name, found in by_target.items())

    def _load_target(self, name: str, batch: Batch, writes: Writes) -> int:
        one_by_one = reconnected = False
        waits = self.retry.delays()  # lock waits and deadlocks: again, after these
        tried = 0  # of those waits
        for _ in range(len(waits) + 3):  # (+ the first, row by row, on a new connection)
            try:
                writes.prepare(self)  # facts of its tables, read before the transaction
                return self._transaction(name, batch, writes, one_by_one)
            except pymysql.MySQLError as exc:
                self._discard(name)
                code = exc.args[0] if exc.args else 0
                where = (f"stage load, pipeline {self.pipeline_id}, processId "
                         f"{batch.process_id}, position {batch.end}, target {name}")
                if code == LOCK_WAIT_TIMEOUT:  # a stale owner's transaction holds the row?
                    self._end_stale(name)
                # the connection is gone (a server's wait_timeout while the pipeline was
                # quiet): once more on a new one. What it sent rolled back, or committed (the
                # COMMIT went with the last statements): the new transaction then finds the
                # position row at the batch's end (read first, locked) and writes nothing.
                if endpoints.lost(exc) and not reconnected and not self.stop.is_set():
                    reconnected = True
                    log.info("event=load_reconnect pipeline=%s process_id=%d target=%s "
                             "error=%r", self.pipeline_id, batch.process_id, name, exc.args[-1])
                    continue
                if code in RETRYABLE and tried < len(waits) and not self.stop.is_set():
                    tried += 1
                    log.warning("event=load_retry pipeline=%s process_id=%d target=%s "
                                "attempt=%d error=%r", self.pipeline_id, batch.process_id, name,
                                tried, exc.args[-1])
                    if not self.stop.wait(waits[tried - 1]):
                        continue
                if self.params.skip_load_exception and not one_by_one and code in ROW_REFUSED:
                    one_by_one = True  # again, row by row, skipping what the target refuses
                    continue
                text = str(exc.args[-1]) if exc.args else str(exc)
                if code in duplicate.DUPLICATE:  # what is wrong, and what to do
                    text = duplicate.explained(self.pipeline_id, text, name, self.sources,
                                               two_way=self.loop is not None)
                raise LoadError(f"{where}: {text}") from None
        raise AssertionError("unreachable")

    def _end_stale(self, name: str) -> None:
        try:
            conn = self._connection(name)
            with conn.cursor() as cursor:
                owners.end_stale(cursor, self.pipeline_id, self.epoch, name)
            conn.commit()
        except pymysql.MySQLError as exc:  # the retry reports what stays wrong
            self._discard(name)  # (a lost connection is not used again)
            log.warning("event=stale_owner_check_failed pipeline=%s target=%s error=%r",
                        self.pipeline_id, name, exc)

    def _discard(self, name: str) -> None:
        self._unchecked.discard(name)  # a new connection starts with SESSION's
        conn = self._connections.pop(name, None)
        if conn is not None:
            try:
                conn.close()
            except pymysql.MySQLError:
                pass

    def _transaction(self, name: str, batch: Batch, writes: Writes,
                     one_by_one: bool = False) -> int:
        """One target transaction: position check, (two-way) conflicts, the batch's
        statements or its DDL, the loop mark and the position."""
        conn = self._connection(name)
        with conn.cursor() as cursor:
            row = self._locked(conn, cursor, name, batch)
            if row and owners.applied(row, batch, f"stage load, pipeline {self.pipeline_id}, "
                                f"processId {batch.process_id}, target {name}"):
                log.info("event=batch_skipped pipeline=%s process_id=%d target=%s "
                         "reason=already_applied applied=%s:%s", self.pipeline_id,
                         batch.process_id, name, row[0], row[1])
                conn.rollback()
                self.written[name] = owners.row_position(row)  # (a retry after its commit)
                return 0
            together, written, skipped = Together(cursor), 0, [0]
            checks = 0 if name in self._unchecked else 1  # the session's foreign_key_checks

            def skip() -> None:  # counted once the transaction commits (a retry skips again)
                skipped[0] += 1
            for unit in writes.for_attempt(self, batch, cursor, one_by_one):
                if unit.ordered and checks != (not unit.unchecked):  # (see node.merge)
                    checks = 0 if unit.unchecked else 1
                    sessions.set_checks(self._unchecked, name, together, checks)
                if one_by_one:  # a row at a time, each alone: one the target refuses skipped
                    together.send()
                    written += sum(self._displaced(cursor, unit, row[0], batch)
                                   if displaced.marked(row[0]) else
                                   alone.write_row(cursor, unit, row, batch, self.pipeline_id,
                                                   skip) for row in alone.rows(unit.sqls))
                    continue
                for sql in unit.sqls:
                    if sql.rows == 0 and displaced.marked(sql):
                        together.send()
                        written += self._displaced(cursor, unit, sql, batch)
                    elif sql.data is not None or sql.lenient or sql.matches_one:
                        together.send()  # what came before, then this one alone
                        written += alone.write(cursor, unit, sql, batch, self.pipeline_id)
                    else:
                        together.add(unit, sql.text)
                        written += sql.rows
            if not checks:  # the session's own again (a DDL sets its source session's)
                sessions.set_checks(self._unchecked, name, together, 1)
            if writes.ddl or self.loop is not None:
                together.send()
            for seq, change in enumerate(writes.ddl):  # DDL commits implicitly
                written += self._execute_ddl(cursor, change, batch, seq)
            if writes.ddl:  # the position follows it, under the lock and the fence again
                self._locked(conn, cursor, name, batch)
                cursor.execute(INTENTS_DONE, (self.pipeline_id,))
            if self.loop is not None:
                self.loop.mark(cursor, batch.process_id)
            end = batch.end
            together.add(None, cursor.mogrify(owners.POSITION_WRITE, (
                self.pipeline_id, batch.process_id, end.file, end.pos, end.gtid, self.epoch,
                self.run, end.server)))
            together.add(None, "COMMIT")
            together.send()
        self.written[name] = end
        self.rows_skipped += skipped[0]
        self._unchecked.discard(name)  # (set back to 1 before the COMMIT)
        return written

    def _displaced(self, cursor: Any, unit: Any, sql: Any, batch: Batch) -> int:
        return displaced.write(cursor, unit, sql, self.pipeline_id, batch.process_id,
                               self.displaced)

    def _locked(self, conn: Any, cursor: Any, name: str, batch: Batch) -> Any:
        """Lock the pipeline's position row and check no newer owner wrote it, nor removed
        it after this owner's claim wrote it; the row."""
        cursor.execute(owners.position_lock(conn), (self.pipeline_id,))
        row = cursor.fetchone()
        if row is None and name in self._claimed:  # written again here, it would carry
            conn.rollback()  # this owner's epoch over whatever replaced the pipeline
            raise FencedError(
                f"stage load, pipeline {self.pipeline_id}, processId {batch.process_id}: "
                f"target {name} no longer has the pipeline's position row, which this "
                "owner's claim wrote (removed by setl channel delete --purge-positions, or "
                "by hand): the pipeline is no longer this node's to write, and it stops. "
                "If the channel is still wanted, apply and start it again")
        if row and int(row[2]) > self.epoch:
            conn.rollback()
            raise FencedError(
                f"stage load, pipeline {self.pipeline_id}, processId {batch.process_id}: "
                f"target {name} is written by a newer owner (epoch {row[2]} > "
                f"{self.epoch}); this node lost the pipeline and stops")
        return row

    def _execute_ddl(self, cursor: Any, change: TargetChange, batch: Batch, seq: int) -> int:
        self.facts.forget()  # tables change shape
        mark = loop_comment(self.loop.channel) if self.loop is not None else ""
        return apply_ddl(cursor, change, self.pipeline_id, batch.process_id, batch.end, seq,
                         mark)
