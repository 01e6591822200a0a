"""Select's thread of each attempt of a pipeline runner: batches cut from the stream and
handed to E/T in order, a DDL batch's E/T submitted alone and the batches after it held until
it is loaded (their tables' columns and keys read again, the source checked again), free-door
requests the stream carried kept for a coming window. After a DDL (or a run of them) the
source's keys are read as soon as the next batch of rows is cut, while the DDL and the
batches before it load (the source ran it before logging it): that batch waits for the
DDL's load, not for the read after it too (200-270 ms a DDL in a catch-up, four times in a
bulk load of four tables each made by CREATE TABLE: docs/performance.md). The attempt that
starts this thread is :meth:`node.pipeline.PipelineRunner._run_from`; Load takes what it
hands over there."""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from node import etjob, start
from node.changes import RowChange
from node.cursor import Cursor
from node.extract import freedoor
from node.extract.etl import CompiledPipeline
from node.extract.job import Planner
from node.jobs import Failed
from node.select.selector import Selector
from node.snapshot.controller import Snapshots
from node.target import kinds
from node.window import Window
from shared.model import DataSource

T = TypeVar("T")

log = logging.getLogger("setl.node.pipeline")


def in_background(name: str, function: Callable[..., T], *args: Any) -> Future[T]:
    """``function(*args)`` on a daemon thread of its own. A stop abandons it: run in the
    attempt's executor, whose end waits for what runs there, a read of a source that stopped
    answering mid-query would hold the pipeline's stop until TCP gives up."""
    future: Future[T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(function(*args))
        except BaseException as exc:  # (raised where the result is asked for)
            future.set_exception(exc)
    threading.Thread(target=run, name=name, daemon=True).start()
    return future


class RunnerSelect:
    """The Select half of :class:`node.pipeline.PipelineRunner` (its attributes are the
    runner's)."""

    ctx: Any
    pipeline_id: str
    stop_event: threading.Event
    cursor: Cursor | None
    source: DataSource | None
    target_kind: str
    two_way: bool
    batches_selected: int
    _in_flight: deque[tuple[int, int]]
    _progress: threading.Event

    def _select_loop(self, selector: Selector, compiled: CompiledPipeline, planner: Planner,
                     executor: ThreadPoolExecutor, handoff: queue.Queue[Any],
                     stop: threading.Event, window: Window, snapshots: Snapshots) -> None:
        """Select's thread of one attempt: its window and copies are this attempt's (a loop
        that outlives its attempt must not count batches in the next one's window, which
        would stay saturated and never cut a batch on time again)."""
        after_ddl = 0  # a DDL batch's processId: later batches wait until it is loaded
        try:
            while not stop.is_set() and not self.stop_event.is_set():
                batch = selector.next_batch(stop)
                if batch is None:
                    continue
                self._in_flight.append((batch.process_id, batch.transactions[0].commit_ts_ms
                                        if batch.transactions else batch.commit_ts_ms))
                window.extracting()
                if batch.has_ddl:
                    # a copy of a table it renames, drops or replaces fails first (saved):
                    # its chunks left would be read from whatever holds the name after it
                    snapshots.ddl(batch.changes())
                    future = executor.submit(etjob.run_ddl, self.ctx.spark, window,
                                             compiled, batch.changes())
                    after_ddl = batch.process_id
                else:
                    if after_ddl:
                        keys = self._keys_read(compiled)  # while the DDL loads
                        if not self._wait_loaded(after_ddl, stop):
                            break
                        planner.forget()  # its tables' columns and keys may have changed
                        start.keys_again(compiled, self.source, self.ctx.pipeline,
                                         fresh=keys.result())
                        # what the start refuses (a cascading key added unseen: ddl_sync off)
                        kinds.check_source(self.target_kind, compiled, self.source,
                                           after_ddl=True, two_way=getattr(
                                               planner.facts, "targets", None)
                                           if self.two_way else None)
                        after_ddl = 0
                    self._ask(snapshots, [change for change in batch.changes()
                                          if freedoor.is_request(change)])
                    reads = snapshots.reads_for(batch) if batch.windows else []
                    future = executor.submit(etjob.run, self.ctx.spark, window,
                                             compiled, planner, batch, reads, self.two_way,
                                             # (a two-way pipeline's door refuses re-asks
                                             # its conflict rule would: nothing deleted)
                                             None if self.two_way else snapshots.copying())
                self.batches_selected += 1
                handoff.put((batch, future))
        except BaseException as exc:  # handed to Load, which reports it in order
            handoff.put(Failed(exc))
        finally:
            handoff.put(None)

    def _ask(self, snapshots: Any, requests: list[RowChange]) -> None:
        """Free-door requests the stream carried, kept to be served in a coming window; a
        subscription's reader gets the binlog's changes only, so the requests another
        channel of its source serves (a per-instance backfill) are not its own: taken, they
        paused it at every resume. Nor does a two-way channel take them (it reads no rows:
        :data:`~shared.model.TWO_WAY_COPY`): kept in ``retl_pending``, one failed its batch
        again at every resume, whatever was done to the buffer row."""
        if not requests:
            return
        if self.target_kind == "subscription":
            log.info("event=free_door_not_taken pipeline=%s requests=%d reason=a subscription "
                     "takes no rows read from the tables", self.pipeline_id, len(requests))
            return
        if self.two_way:
            log.warning("event=free_door_not_taken pipeline=%s requests=%d reason=a two-way "
                        "channel takes no rows read from the tables: the requests are left in "
                        "retl.retl_buffer for a one-way channel of the source (delete them if "
                        "none is meant to serve them)", self.pipeline_id, len(requests))
            return
        snapshots.ask(requests)

    def _keys_read(self, compiled: CompiledPipeline) -> Future[CompiledPipeline]:
        """The source's keys read again after a DDL (:func:`node.start.keys_read`), begun
        now, before the DDL is loaded: the source ran it before logging it."""
        return in_background(f"keys-{self.pipeline_id}", start.keys_read, compiled,
                             self.source, self.ctx.pipeline, self.target_kind == "delta",
                             self.target_kind == "subscription")

    def _wait_loaded(self, process_id: int, stop: threading.Event) -> bool:
        """Wait until batch ``process_id`` is loaded; False when stopped first."""
        while not stop.is_set() and not self.stop_event.is_set():
            if self.cursor is not None and self.cursor.process_id >= process_id:
                return True
            self._progress.wait(0.1)
            self._progress.clear()
        return False
