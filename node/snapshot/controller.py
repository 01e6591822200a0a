"""Snapshots in the stream (DBLog's watermarks, seed 001): a pipeline copies tables while it
streams, chunk by chunk, without locks and without pausing the stream.

For each *window* the controller writes a low watermark (a row of ``retl.retl_signal``),
reads a few chunks — in Spark tasks, in parallel — and writes a high watermark. Both rows
come back through the binlog; Select keeps the window inside one batch and cuts the batch
right after the high watermark (:mod:`node.select.selector`). Extract then drops from the
chunks every key the stream changed between the watermarks (that change is as new or
newer) and puts the other rows in at the high watermark (:mod:`node.extract.reads`), where
Load writes them with the batch: one transaction, with the position. So a copied row is the
row as it was at the high watermark, never older than what the stream wrote before it, and
a reader of the target sees whole source transactions throughout — rows not copied yet are
simply not there yet. A chunk is done once its batch is loaded (:mod:`node.snapshot.state`
keeps that in ZooKeeper), so a restart goes on with the chunks not done.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from node.changes import Batch, RowChange
from node.extract import chunks
from node.extract.etl import CompiledPipeline
from node.extract.freedoor import Note
from node.extract.reads import Read
from node.snapshot.door import DoorQueue
from node.snapshot.moved import failed_by
from node.snapshot.plan import plan
from node.snapshot.progress import Rate, progress
from node.snapshot.state import (
    SnapshotStore,
    TableCopy,
    failed_problem,
    pruned,
)
from node.snapshot.watermarks import WINDOWS_IN_FLIGHT, Window, signal, stopped
from node.snapshot.windowreads import LinesPlanner, WindowReads, Work, label
from node.spark import SparkRunner
from shared.errors import ConfigError, CoordinationError, FencedError, SetlError
from shared.model import DataSource, PipelineParams

log = logging.getLogger("setl.node.snapshot")
RETRY_S = 2.0


class Snapshots:
    """The copies of one pipeline (one attempt of its runner)."""

    def __init__(self, pipeline_id: str, source: DataSource, compiled: CompiledPipeline,
                 params: PipelineParams, spark: SparkRunner, store: SnapshotStore,
                 door: DoorQueue, clock: Callable[[], float] = time.monotonic,
                 lines: LinesPlanner | None = None) -> None:
        self.pipeline_id, self.source, self.compiled = pipeline_id, source, compiled
        self.params, self.spark, self.store, self.clock = params, spark, store, clock
        self.door = door
        self.copies: list[TableCopy] = []
        self.started = False  # the copies loaded: until then the store says where they are
        self.error = ""  # the loop's last failure, until a turn of it goes through
        self.save_error = ""  # the copies' state could not be saved (ZooKeeper), until it is
        self._queue: deque[Work] = deque()
        # the tables of the copies asked for, as last read (not started yet, or just started)
        self._requested: frozenset[tuple[str, str]] = frozenset()
        self._pending: dict[int, Window] = {}
        self._lock = threading.Lock()
        # self.copies is appended to, pruned and saved from three threads (Load's: loaded;
        # this one's: requests, cancels; Select's: ddl): one at a time, or a save that pruned
        # the list before a new copy went in would put back the list without it (lost from
        # memory and ZooKeeper, its request deleted). Taken before the store's own lock, never
        # while holding self._lock (and self._lock is never taken under it)
        self._copies_lock = threading.RLock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._rate = Rate()
        self._reads = WindowReads(pipeline_id, source, compiled, spark,
                                  params.snapshot_parallelism, lines)
        self._thread = threading.Thread(target=self._run, name=f"snapshot-{pipeline_id}",
                                        daemon=True)

    # -- lifecycle ----------------------------------------------------------------------------
    def load(self) -> None:
        """The copies as saved, before Select runs: a DDL batch it reads fails the copies
        whose table it takes away (:meth:`ddl`), those saved too."""
        if self.started:
            return
        self.copies = self.store.load()
        try:  # (the copies asked for and not started: their tables are being copied too)
            self._requests()
        except SetlError as exc:  # the loop reads them again
            log.warning("event=snapshot_requests_unread pipeline=%s error=%s",
                        self.pipeline_id, exc)
        for copy in self.copies:
            if copy.state == "copying":
                self._queue.extend(Work(copy, chunk) for chunk in copy.chunks
                                   if chunk.index not in copy.done)
        self.started = True

    def start(self) -> None:
        self.load()
        self.door.start()
        self._thread.start()

    def halt(self) -> None:
        """Take no request and open no window from now on (at once, without waiting): the
        runner is stopping, and a request it would take may be for the definition that
        replaces it. Windows open go on to their end; :meth:`stop` waits for the thread."""
        self._stop.set()
        self._wake.set()

    def stop(self) -> None:
        self.halt()
        if self._thread.ident is not None:
            self._thread.join(10)
        self._reads.close()

    @property
    def busy(self) -> bool:
        return bool(self._queue or self._pending or self.door.waiting)

    def ask(self, requests: list[RowChange]) -> None:
        """Free-door requests the stream carried: served in a coming window."""
        if requests:
            self.door.ask(requests)
            self._wake.set()

    # -- what Select asks (node.select.selector.Watermarks) -----------------------------------
    def expects(self, window_id: int) -> bool:
        with self._lock:
            return window_id in self._pending

    def abandoned(self, window_id: int) -> None:
        with self._lock:
            window = self._pending.pop(window_id, None)
        if window is not None:
            log.warning("event=snapshot_window_abandoned pipeline=%s window=%d chunks=%d",
                        self.pipeline_id, window_id, len(window.work))
            self._again(window.work)
            self._wake.set()

    def _again(self, work: list[Work]) -> None:
        self._queue.extendleft(reversed([one for one in work if one.chunk is not None
                                         and not stopped(one)]))
        self.door.again([one.asked for one in work if one.asked is not None])

    # -- what the runner asks ------------------------------------------------------------------
    def reads_for(self, batch: Batch) -> list[Read]:
        """The rows read in the windows the batch closed."""
        found: list[Read] = []
        with self._lock:
            for window_id, _, _ in batch.windows:
                window = self._pending.get(window_id)
                if window is not None and window.reads is not None:
                    window.batch = batch.process_id
                    # a copy a DDL before this batch failed (:meth:`ddl`): its reads, made
                    # after the DDL by the table's name, may be another table's rows
                    window.drop_stopped(self.pipeline_id)
                    found += window.reads
        return found

    def copying(self) -> Callable[[str, str], bool]:
        """Which source tables have a copy unfinished now (Select's thread, for a batch's
        job): a snapshot copying or asked for, free-door requests waiting or in a window not
        loaded (or any table, while requests wait that the node has not read). The stream's
        rows into their target tables go with the displaced step
        (:mod:`node.target.mysql.displaced`)."""
        with self._copies_lock:
            tables = {(copy.schema, copy.table) for copy in self.copies
                      if copy.state == "copying"} | self._requested
        with self._lock:
            tables |= {(work.asked.schema, work.asked.table)
                       for window in self._pending.values() for work in window.work
                       if work.asked is not None}
        asked = self.door.tables()
        if asked is None:
            return lambda schema, table: True
        tables |= asked
        return lambda schema, table: (schema, table) in tables

    def ddl(self, changes: list[RowChange]) -> None:
        """A DDL batch Select read, before it goes on (Select's thread, in binlog order): a
        copy under way of a table it renames, drops or replaces (:mod:`node.snapshot.moved`)
        fails, with the statement, its position and what to do. Its chunks left are never
        read again by the name, and the reads of windows still open are dropped when their
        batch comes (:meth:`reads_for`: their low watermark, after this DDL in the binlog,
        may have come after it on the source too). The failure is saved before the batch
        goes on: loaded, with the copy still saved as copying, a restart would go on
        reading the name (CoordinationError when ZooKeeper does not take it: the batch is
        read again, and fails the copy again)."""
        with self._copies_lock:
            self._ddl(changes)

    def _ddl(self, changes: list[RowChange]) -> None:
        failed = failed_by(changes, self.copies, self.compiled, self.pipeline_id)
        if not failed:
            return
        if not self._save():
            raise CoordinationError(
                f"pipeline {self.pipeline_id}: the failed copy of "
                f"{', '.join(f'{copy.schema}.{copy.table}' for copy in failed)} cannot be "
                f"saved to ZooKeeper ({self.save_error}); the DDL batch waits for it (the "
                "pipeline starts again before it)")

    def loaded(self, batch: Batch) -> None:
        """The batch is on the target: its windows' chunks are done."""
        if not batch.windows:
            return
        with self._lock:
            windows = [self._pending.pop(window_id, None) for window_id, _, _ in batch.windows]
        notes: list[Note] = []
        for window in windows:
            if window is None or window.reads is None:
                continue
            for work, read in zip(window.work, window.reads, strict=True):
                if work.asked is not None:
                    notes += work.asked.notes(read)
                    continue
                copy, chunk = work.copy, work.chunk
                assert copy is not None and chunk is not None
                copy.done.add(chunk.index)
                copy.read_rows += read.count
                if copy.state == "copying" and len(copy.done) == copy.total:
                    copy.state, copy.finished = "done", time.time()
                    log.info("event=snapshot_table_done pipeline=%s table=%s.%s rows=%d "
                             "chunks=%d seconds=%.1f", self.pipeline_id, copy.schema,
                             copy.table, copy.read_rows, copy.total,
                             copy.finished - copy.started)
            self._rate.add(sum(read.count for work, read in zip(window.work, window.reads,
                                                                strict=True)
                               if work.chunk is not None))
        if notes:
            self.door.noted(notes)
        self._wake.set()
        # saved at once: a restart reads again only the chunks of windows in flight (a window
        # is tens of milliseconds or more; one write of a few hundred bytes each)
        self._save()

    def progress(self) -> list[dict[str, object]]:
        """Per table: chunks done of all, rows, rows/s, and an ETA."""
        return progress(self.copies, self._rate.per_s())

    def problem(self) -> str:
        """What is wrong with the copies, for the pipeline's last error in status ("" for
        nothing): a state not saved, the loop failing, a copy that failed."""
        return self.save_error or self.error or failed_problem(self.pipeline_id, self.copies,
                                                               time.time())

    # -- the loop ------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._take_requests()
                control = self.store.control()
                self._cancel(control.get("cancelled") or {})
                copying = bool(self._queue) and not control.get("paused")
                if len(self._pending) >= WINDOWS_IN_FLIGHT or not (
                        copying or self.door.waiting) or not self._window(copying):
                    self.error = ""
                    self._wake.wait(0.2)
                    self._wake.clear()
                    continue
                self.error = ""
            except SetlError as exc:
                self.error = str(exc)
                log.error("event=snapshot_failed pipeline=%s error=%s", self.pipeline_id, exc)
                self._stop.wait(RETRY_S)
            except Exception as exc:  # a Python error says where it happened, and goes on
                self.error = f"{type(exc).__name__}: {exc}"
                log.exception("event=snapshot_failed pipeline=%s", self.pipeline_id)
                self._stop.wait(RETRY_S)

    def _window(self, copying: bool) -> bool:
        """Read a window (requests first, then chunks); False when there was nothing."""
        most = self.params.snapshot_parallelism
        work = [Work(asked=asked) for asked in self.door.take(most)]
        while copying and self._queue and len(work) < most:
            one = self._queue.popleft()  # (only this thread takes from the queue)
            if not stopped(one):  # a DDL failed its copy (ddl): not read by the name
                work.append(one)
        if not work:
            return False
        window = Window(random.getrandbits(62), work)
        with self._lock:
            self._pending[window.id] = window
        try:
            self._signal("L", window.id)
            # columns and keys read after the low watermark: a DDL before it is in them, one
            # after it abandons the window (a cache kept across windows missed an ALTER
            # between them)
            self._reads.columns.clear()
            self.door.keyed([one.asked for one in work if one.asked is not None])
            work = [one for one in work if one.asked is None or one.asked.requests]
            with self._lock:  # (none left: the window closes empty)
                window.work = work
            reads = self._reads.read([self._reads.task(window.id, one) for one in work], work)
        except BaseException:
            with self._lock:
                self._pending.pop(window.id, None)
            self._again(work)
            self._try_signal("A", window.id)
            raise
        with self._lock:
            window.reads = reads
        self._signal("H", window.id)
        log.info("event=snapshot_window pipeline=%s window=%d chunks=%s rows=%d as_lines=%d",
                 self.pipeline_id, window.id, ",".join(label(one) for one in work),
                 sum(read.count for read in reads),
                 sum(read.lines is not None for read in reads))
        return True

    def _signal(self, kind: str, window_id: int) -> None:
        signal(self.source, self.pipeline_id, kind, window_id)

    def _try_signal(self, kind: str, window_id: int) -> None:
        try:
            self._signal(kind, window_id)
        except SetlError as exc:
            log.warning("event=snapshot_signal_failed pipeline=%s window=%d error=%s",
                        self.pipeline_id, window_id, exc)

    def _cancel(self, cancelled: dict[str, float]) -> None:
        """Stop the copies cancelled since they started (the rows copied stay)."""
        stopped = [copy for copy in self.copies if copy.state == "copying" and max(
            float(cancelled.get(f"{copy.schema}.{copy.table}", 0)),
            float(cancelled.get("*", 0))) > copy.started]
        if not stopped:
            return
        for copy in stopped:
            copy.state, copy.finished = "cancelled", time.time()
            log.info("event=snapshot_table_cancelled pipeline=%s table=%s.%s chunks_done=%d "
                     "chunks=%d", self.pipeline_id, copy.schema, copy.table, len(copy.done),
                     copy.total)
        self._queue = deque(work for work in self._queue
                            if work.copy is not None and work.copy.state == "copying")
        self._save()

    # -- tables asked for -----------------------------------------------------------------------
    def _take_requests(self) -> None:
        """Start the copies asked for. A request is deleted only once its copy is saved (a
        restart finds it again otherwise); one for a newer definition than this runner's is
        left to the runner of that one (this one is being replaced)."""
        found = self._requests()
        for znode, request in found:
            if int(request.get("version") or 0) > self.compiled.version:
                continue
            schema, table = self.compiled.stored(str(request["schema"]), str(request["table"]))
            where = str(request.get("where") or "")
            asked = f"{znode}@{request.get('asked')}"
            if any(copy.request == asked for copy in self.copies):
                self.store.taken(znode)  # its copy saved before, the delete failed
                continue
            try:
                copy = self._plan(schema, table, where)
            except ConfigError as exc:  # the table cannot be copied: said, and not asked again
                copy = TableCopy(f"{schema}.{table}@{int(time.time() * 1000)}", schema, table,
                                 where, chunks.SplitKey(schema, table, (), ""), [], 0,
                                 state="failed", error=str(exc), finished=time.time())
                log.error("event=snapshot_table_failed pipeline=%s table=%s.%s error=%s",
                          self.pipeline_id, schema, table, exc)
            if self._stop.is_set():  # halted while it split (minutes for a large table):
                # the request is the next attempt's, which may have loaded the state already
                log.info("event=snapshot_plan_dropped pipeline=%s table=%s.%s reason=halted",
                         self.pipeline_id, schema, table)
                return
            copy.request = asked
            if copy.state == "copying":  # its chunks, once, before the state names it
                self.store.write_plan(copy)
            with self._copies_lock:  # (no save of another thread between the two)
                self.copies.append(copy)
                saved = self._save()
                if not saved:
                    self.copies.remove(copy)
                    self.store.forget(copy)
            if not saved:
                raise CoordinationError(
                    f"pipeline {self.pipeline_id}: the copy of {schema}.{table} waits: its "
                    f"state cannot be saved to ZooKeeper ({self.save_error}); it starts once "
                    "ZooKeeper takes it (the request is kept)")
            self.store.taken(znode)
            if copy.state != "copying":
                continue
            self._queue.extend(Work(copy, chunk) for chunk in copy.chunks)
            log.info("event=snapshot_table_started pipeline=%s table=%s.%s rows=%d chunks=%d "
                     "method=%s where=%r", self.pipeline_id, copy.schema, copy.table, copy.rows,
                     copy.total, "split", copy.where)

    def _requests(self) -> list[tuple[str, dict[str, Any]]]:
        """The copies asked for, their tables kept for :meth:`copying`."""
        found = self.store.requests()
        self._requested = frozenset(self.compiled.stored(str(request["schema"]),
                                                         str(request["table"]))
                                    for _, request in found)
        return found

    def _plan(self, schema: str, table: str, where: str) -> TableCopy:
        return plan(self.pipeline_id, self.source, self.compiled,
                    self.params.snapshot_chunk_size, schema, table, where)

    def _save(self) -> bool:
        """Save the copies' state (finished copies kept only as long as :func:`pruned`
        says); False when it could not be saved, which status shows until a save goes
        through (progress is saved again with the next chunk done)."""
        with self._copies_lock:
            return self._save_now()

    def _save_now(self) -> bool:
        self.copies = pruned(self.copies, time.time())
        try:
            self.store.save(self.copies)
        except FencedError as exc:  # another owner's copies: this runner's stop
            self.save_error = str(exc)
            log.error("event=snapshot_fenced pipeline=%s error=%s", self.pipeline_id, exc)
            self.halt()
            return False
        except Exception as exc:  # ZooKeeper away, or the document past its size
            self.save_error = (f"pipeline {self.pipeline_id}: the table copies' state cannot "
                               f"be saved to ZooKeeper: {type(exc).__name__}: {exc}; a restart "
                               "now would read again the chunks done since the last save")
            log.warning("event=snapshot_save_failed pipeline=%s error=%r", self.pipeline_id,
                        exc)
            return False
        self.save_error = ""
        return True
