"""Select: the serial head of a pipeline. It cuts the stream of committed transactions into
batches at commits, numbers them with the next processId and waits for a window slot before
each one.

A batch is cut when any of these holds, checked after every transaction and whenever the
stream is quiet, so a busy stream cuts as surely as an idle one:
- it holds ``batch_size`` rows;
- it spans ``MAX_TRANSACTIONS`` transactions, with rows or without (a backlog on tables the
  pipeline does not replicate still moves the position, in batches of bounded size);
- ``batch_timeout_ms`` passed since its first transaction and it has rows. While
  Extract/Transform is saturated (``window.saturated()``) or transactions already read wait
  to be taken (a backlog: a catch-up) the timeout waits: each Spark job has a fixed cost, so
  under load small timed batches would only queue behind each other; batches then grow with
  the load (up to ``batch_size``);
- it has rows, no batch before it is still on its way (the window holds only this one)
  and no transaction is waiting to be taken: waiting for the timeout would only add delay.
  So a caught-up pipeline sends each transaction as soon as the last batch is loaded, and a
  busy one gathers what arrives while a batch is on its way (a group commit). Meanwhile it
  sleeps on the window, not on each transaction, and takes what queued when it wakes;
- it has no rows (a position-only batch) and ``IDLE_BATCH_INTERVAL_S`` passed.

A transaction is never split: one larger than ``batch_size`` makes one large batch. DDL
travels in a batch of its own.

**Cuts** (:func:`node.cursor.resume`): after a restart, a batch also ends at each target's
position row ahead of the start, so no batch straddles what a target holds. A transaction
that ends past a cut without ending at it means the row is not a transaction boundary of
this binlog (another server's position, a reset binlog): Select stops and says so.

**Watermark windows** (:mod:`node.snapshot`): between a low and a high watermark of this
pipeline (rows of ``retl.retl_signal``) rows were read from the source for a snapshot chunk
or a free-door request; the batch is never cut inside such a window, and it is cut right
after its high watermark, which is where the rows read go into the stream. A window is
abandoned — the batch goes on without it and its rows are read again in a later window — when
its abandon mark comes (``A``: the snapshot's read failed after its low watermark), when it
meets a DDL, when it stays open ``WINDOW_TIMEOUT_S`` (its high watermark never came: checked
as transactions keep coming, so a busy source does not keep it open), or when the batch it
holds open reaches ``WINDOW_BATCH_FACTOR`` times ``batch_size`` rows or ``MAX_TRANSACTIONS``
transactions (a batch never grows without bound).

**A DROP's echo** (two-way channels, :class:`node.select.statements.DropEchoes`): between
the opposite pipeline's intent of a DROP and its DROP (or the intent's deletion: it never
ran) the batch is not cut either, so no position rests between them: resumed there, Select
would not know the intent and would send the DROP back to the side it came from. The
stretch is short (the loader runs the DROP right after committing its intent); a DDL still
cuts a batch inside it, and a stretch open ``WINDOW_TIMEOUT_S`` (its loader stopped between
the two) or grown to the limits above is cut, and logged (``event=drop_echo_unguarded``),
and not held again until it ends (an intent left over would hold every batch a minute).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from node.changes import Batch, Transaction
from node.window import Window
from shared import gtid
from shared.errors import PositionConflictError, PositionLostError
from shared.model import BinlogPosition, PipelineParams

log = logging.getLogger("setl.node.select.selector")
IDLE_BATCH_INTERVAL_S = 1.0  # batches without rows (position only) at most this often
WINDOW_TIMEOUT_S = 60.0  # a watermark window open longer is abandoned
MAX_TRANSACTIONS = 20_000  # transactions one batch spans at most
WINDOW_BATCH_FACTOR = 10  # a batch a window holds open grows to this many batch_size at most
POLL_S = 0.1  # the longest wait for a transaction before the cut rules are checked again
OVERDUE_POLL_S = 0.01  # the same for a batch kept open past its timeout while E/T is busy
PENDING_POLL_S = 0.005  # the same for a batch with rows while the one before is on its way


class TransactionSource(Protocol):
    """Where Select reads committed transactions from (the binlog reader, or a test's)."""

    def begin(self) -> None: ...

    def stop(self) -> None: ...

    @property
    def backlog(self) -> int: ...

    @property
    def reading_since_ms(self) -> int: ...  # a transaction read, not yet committed: since

    def take(self, timeout_s: float) -> Transaction | None: ...


class Watermarks(Protocol):
    """The windows this pipeline opened (:class:`node.snapshot.controller.Snapshots`)."""

    def expects(self, window_id: int) -> bool: ...

    def abandoned(self, window_id: int) -> None: ...


class _NoWindows:
    def expects(self, window_id: int) -> bool:
        return False

    def abandoned(self, window_id: int) -> None:
        pass


class Selector:
    def __init__(self, pipeline_id: str, transactions: TransactionSource,
                 start: BinlogPosition, next_process_id: int, params: PipelineParams,
                 window: Window,
                 clock: Callable[[], float] = time.monotonic,
                 watermarks: Watermarks | None = None,
                 cuts: tuple[BinlogPosition, ...] = ()) -> None:
        self.pipeline_id, self.params, self.window, self.clock = pipeline_id, params, window, clock
        self._cuts = sorted(cuts, key=gtid.order_key)  # targets' rows ahead: cut there
        self.watermarks = watermarks or _NoWindows()
        self.next_process_id = next_process_id
        self.position = self._start = start
        self.transactions = transactions
        self._held: Transaction | None = None  # a DDL waiting for its own batch
        self._open: dict[int, tuple[int, float]] = {}  # window → (first place, opened at)
        self._drop_due: float | None = None  # since when a DROP's echo is due (see above)
        self._unguarded = False  # cut inside that stretch: not held again until it ends
        # the commit time of the first transaction with rows of the batch being gathered (0:
        # none): status counts those rows as behind while the batch is open (a watermark
        # window or a DROP's echo keeps it open up to WINDOW_TIMEOUT_S)
        self.open_since_ms = 0

    def begin(self) -> None:
        self.transactions.begin()

    def stop(self) -> None:
        self.transactions.stop()

    @property
    def backlog(self) -> int:
        return self.transactions.backlog

    @property
    def reading_since_ms(self) -> int:
        return self.transactions.reading_since_ms

    @property
    def queued_since_ms(self) -> int:
        """The commit time of the first transaction read and not taken yet (0: none, or a
        source that does not say)."""
        return getattr(self.transactions, "queued_since_ms", 0)

    def next_batch(self, stop: threading.Event) -> Batch | None:
        """The next batch once a window slot is free; None when stopped first."""
        if not self.window.acquire(stop):
            return None
        batch = self._collect(stop)
        if batch is None:
            self.window.release()
            return None
        self.window.hold(batch.size)
        self.next_process_id += 1
        self.position = batch.end
        return batch

    def _take(self, timeout_s: float) -> Transaction | None:
        if self._held is not None:
            held, self._held = self._held, None
            return held
        return self.transactions.take(timeout_s)

    def _collect(self, stop: threading.Event) -> Batch | None:
        self.open_since_ms = 0  # the batch before is in the runner's hands
        batch = Batch(self.pipeline_id, self.next_process_id, start=self.position)
        first_at: float | None = None
        owed = 0  # transactions that queued while it slept on the window: taken before a cut
        while not stop.is_set():
            wait = POLL_S if first_at is None else first_at + self._timeout_s(batch) - self.clock()
            if batch.rows and wait > 0 and not self._holding and not self.window.alone() and \
                    not self.transactions.backlog:
                # the batch before is on its way and nothing is waiting: this one is cut
                # when that one is loaded (or at its timeout), so sleep on the window, not on
                # each transaction (a wake-up of this thread per transaction, 1,000 a second
                # at 1,000 tx/s); what arrives meanwhile is taken at once after
                if not self.window.wait_alone(min(wait, POLL_S)):
                    owed = self.transactions.backlog
                elif not self.transactions.backlog:
                    return batch
                continue
            if batch.rows:  # (the window may empty meanwhile: see _due)
                wait = min(wait, PENDING_POLL_S)
            txn = self._take(POLL_S if self._holding else
                             min(wait, POLL_S) if wait > 0 else OVERDUE_POLL_S)
            if txn is None:
                self._expire()
                owed = 0
                if first_at is None:
                    continue
            elif txn.is_ddl:
                self._abandon_all()  # a window's rows may have another shape than the stream's
                self._unguard(batch, "a DDL travels in a batch of its own")
                if batch.rows:
                    self._held = txn
                else:  # the position-only stretch before it rides along
                    batch.add(txn)
                    self._at_cut(batch)
                return batch
            else:
                closed = self._signals(batch, txn) if txn.signals else False
                self._follow_drops(txn)
                batch.add(txn)
                if not self.open_since_ms and batch.rows:
                    self.open_since_ms = txn.commit_ts_ms
                if first_at is None:
                    first_at = self.clock()
                if self._cuts and self._at_cut(batch):
                    return batch  # a target's position row: the batch ends exactly there
                if closed and not self._holding:
                    return batch  # the rows read in the window go in here, at its end
                if self._holding:  # never cut inside a window, while it is one
                    self._expire()
                if self._holding:
                    if batch.rows < self.params.batch_size * WINDOW_BATCH_FACTOR and \
                            batch.spanned < MAX_TRANSACTIONS:
                        continue
                    self._abandon_all()  # its rows are read again in a later window
                    self._unguard(batch, "the batch reached its limits")
                    return batch
                if batch.rows >= self.params.batch_size or batch.spanned >= MAX_TRANSACTIONS:
                    return batch
                owed = max(owed - 1, 0)
                if owed:
                    continue
            if not self._holding and self._due(batch, first_at):
                return batch
        return None

    def _at_cut(self, batch: Batch) -> bool:
        """Whether the batch now ends at the next cut; a batch that passes one without
        ending at it would straddle a target's row, so that stops the pipeline."""
        if not self._cuts:
            return False
        cut = self._cuts[0]
        try:
            order = gtid.compare(batch.end, cut)
        except PositionConflictError:  # (two states, each past the other in a domain)
            if cut.server == batch.end.server:
                raise  # (one server's two histories: the error says it)
            raise _cut_missed(self.pipeline_id, cut, batch.end, self._start) from None
        if order < 0:
            return False
        if order > 0:
            raise _cut_missed(self.pipeline_id, cut, batch.end, self._start)
        del self._cuts[0]
        return True

    def _signals(self, batch: Batch, txn: Transaction) -> bool:
        """Open and close this pipeline's watermark windows; True when one closed."""
        closed = False
        for kind, window_id in txn.signals:
            if kind == "L" and self.watermarks.expects(window_id):
                self._open[window_id] = (batch.events, self.clock())
            elif kind == "H" and window_id in self._open:
                first, _ = self._open.pop(window_id)
                batch.windows.append((window_id, first, batch.events + len(txn.events)))
                closed = True
            elif kind == "A" and window_id in self._open:  # its read failed
                del self._open[window_id]
                self.watermarks.abandoned(window_id)
        return closed

    @property
    def _holding(self) -> bool:
        """Whether the batch may not be cut here: inside a watermark window, or between a
        DROP's intent and its DROP."""
        return bool(self._open) or self._drop_due is not None

    def _follow_drops(self, txn: Transaction) -> None:
        if not txn.drop_due:
            self._drop_due, self._unguarded = None, False
        elif self._drop_due is None and not self._unguarded:
            self._drop_due = self.clock()

    def _unguard(self, batch: Batch, why: str) -> None:
        """Cut between a DROP's intent and its DROP after all (a restart here would send
        that DROP back): said in the log."""
        if self._drop_due is not None:
            log.warning("event=drop_echo_unguarded pipeline=%s process_id=%d position=%s "
                        "reason=%r: the opposite pipeline's DROP after its intent is not "
                        "seen yet; if this pipeline restarts before it comes, it runs that "
                        "DROP on its target", self.pipeline_id, batch.process_id, batch.end,
                        why)
            self._drop_due, self._unguarded = None, True

    def _expire(self) -> None:
        now = self.clock()
        if self._drop_due is not None and now - self._drop_due > WINDOW_TIMEOUT_S:
            self._drop_due, self._unguarded = None, True
            log.warning("event=drop_echo_unguarded pipeline=%s reason=%r: the opposite "
                        "pipeline's DROP after its intent did not come; if this pipeline "
                        "restarts before it comes, it runs that DROP on its target",
                        self.pipeline_id, f"open longer than {WINDOW_TIMEOUT_S:.0f} s")
        for window_id, (_, opened) in list(self._open.items()):
            if now - opened > WINDOW_TIMEOUT_S:
                del self._open[window_id]
                self.watermarks.abandoned(window_id)

    def _abandon_all(self) -> None:
        for window_id in list(self._open):
            del self._open[window_id]
            self.watermarks.abandoned(window_id)

    def _timeout_s(self, batch: Batch) -> float:
        timeout_s = self.params.batch_timeout_ms / 1000
        return timeout_s if batch.rows else max(timeout_s, IDLE_BATCH_INTERVAL_S)

    def _due(self, batch: Batch, first_at: float | None) -> bool:
        if first_at is None:
            return False
        if batch.rows and self.window.alone() and not self.transactions.backlog:
            return True  # nothing on its way, nothing waiting: see the module's list
        if self.clock() - first_at < self._timeout_s(batch):
            return False
        return not (batch.rows and (self.window.saturated() or self.transactions.backlog))


def _cut_missed(pipeline_id: str, cut: BinlogPosition, end: BinlogPosition,
                start: BinlogPosition) -> PositionLostError:
    """The stop for a target's row (``cut``) no transaction of the binlog read ends at (one
    ends at ``end``; the stream started at ``start``). Of another server read since a
    switch, by GTID state: that server applied the transactions of several GTID domains in
    another order than the old primary logged them (a target holds some it has after ones
    the target lacks), and no start there gives the target exactly what it lacks."""
    step, channel = pipeline_id.replace(".", "/"), pipeline_id.partition(".")[0]
    if cut.server and end.server and cut.server != end.server and cut.gtid and end.gtid \
            and start.gtid:
        return PositionLostError(
            f"pipeline {pipeline_id}: a target holds the source's transactions up to GTID "
            f"state {cut.gtid} (of server {cut.server}), and {end.server}, read since the "
            f"switch, has no transaction that ends at that state (one ends at {end.gtid}): "
            "it holds the transactions of the GTID domains in another order than the old "
            "primary logged them (each domain applied as it came: parallel replication, or "
            "writers of their own), so that target holds some that come after ones it lacks "
            "here, and no place in this binlog gives it exactly what it lacks. Nothing of "
            f"this batch was loaded. To go on, stop the channel (setl channel stop {channel} "
            f"--wait) and set every target to the state the pipeline started from: setl "
            f"position set {step} --gtid {start.gtid} --replay (what a target holds past it "
            "is loaded again: keyed tables come out the same; keyless ones take those rows "
            f"twice: see --keyless-duplicates, then setl verify {channel} --repair); then "
            f"setl channel start {channel}")
    return PositionLostError(
        f"pipeline {pipeline_id}: a target's position row says {cut}, but no "
        f"transaction of the source's binlog ends there (one ends at {end}): "
        "the row was written from another server or before the binlog was reset, so "
        "what the target holds cannot be told: set where the pipeline starts (setl "
        f"position set {step} --latest --replay), start it, then copy the paired tables "
        "again while it runs (setl snapshot)")
