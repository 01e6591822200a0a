"""Select: the serial head of a pipeline. It cuts the binlog into batches at transaction
commits (after ``batch_size`` rows or ``batch_timeout_ms``), numbers them with the next
processId and waits for a window slot before each one.

A transaction is never split: one larger than ``batch_size`` makes one large batch. DDL
travels in a batch of its own.

The timeout cut waits while Extract/Transform is saturated (``busy()``): each Spark job has
a fixed cost of about 150 ms, so under load small timed batches would only queue behind each
other. Batches then grow with the load (up to ``batch_size``), and the delay stays near one
E/T job plus one load instead of growing with the queue.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from node.binlog import BinlogReader, StreamEnded
from node.changes import Batch, Transaction
from node.window import Window
from shared.errors import SourceError
from shared.model import BinlogPosition, DataSource, PipelineParams

log = logging.getLogger("setl.node.selector")
IDLE_BATCH_INTERVAL_S = 1.0  # batches without rows (position only) at most this often


class Selector:
    def __init__(self, pipeline_id: str, source: DataSource, server_id: int,
                 start: BinlogPosition, next_process_id: int, params: PipelineParams,
                 wants: Callable[[str, str], bool], window: Window,
                 busy: Callable[[], bool] = lambda: False,
                 clock: Callable[[], float] = time.monotonic,
                 loop_channel: str | None = None,
                 requests_waiting: Callable[[], bool] = lambda: False) -> None:
        self.pipeline_id, self.params, self.window, self.clock = pipeline_id, params, window, clock
        self.busy = busy
        self.requests_waiting = requests_waiting  # central free-door requests to carry
        self.next_process_id = next_process_id
        self.position = start
        self.transactions: queue.Queue[Transaction | StreamEnded] = queue.Queue(maxsize=10_000)
        self.reader = BinlogReader(source, server_id, start, wants, self.transactions,
                                   loop_channel)
        self._held: Transaction | None = None  # a DDL waiting for its own batch

    def begin(self) -> None:
        self.reader.begin()

    def stop(self) -> None:
        self.reader.stop()

    @property
    def backlog(self) -> int:
        return self.transactions.qsize()

    def next_batch(self, stop: threading.Event) -> Batch | None:
        """The next batch once a window slot is free; None when stopped first."""
        if not self.window.acquire(stop):
            return None
        batch = self._collect(stop)
        if batch is None:
            self.window.release()
            return None
        self.next_process_id += 1
        self.position = batch.end
        return batch

    def _take(self, timeout_s: float) -> Transaction | None:
        if self._held is not None:
            held, self._held = self._held, None
            return held
        try:
            item = self.transactions.get(timeout=max(timeout_s, 0.001))
        except queue.Empty:
            return None
        if isinstance(item, StreamEnded):
            self.transactions.put(item)  # stays the last word for any later call
            raise item.error or SourceError(f"pipeline {self.pipeline_id}: binlog reader stopped")
        return item

    def _collect(self, stop: threading.Event) -> Batch | None:
        batch = Batch(self.pipeline_id, self.next_process_id, start=self.position)
        timeout_s = self.params.batch_timeout_ms / 1000
        first_at: float | None = None
        while not stop.is_set():
            wait = 0.1 if first_at is None else first_at + timeout_s - self.clock()
            txn = self._take(min(wait, 0.1))
            if txn is None:
                if first_at is not None and self._due(batch, first_at, timeout_s):
                    return batch
                if first_at is None and self.requests_waiting():
                    return batch  # no binlog rows: a batch for the free-door requests alone
                continue
            if txn.is_ddl:
                if batch.transactions:
                    self._held = txn
                    return batch
                batch.transactions.append(txn)
                return batch
            batch.transactions.append(txn)
            if first_at is None:
                first_at = self.clock()
            if batch.rows >= self.params.batch_size:
                return batch
        return None

    def _due(self, batch: Batch, first_at: float, timeout_s: float) -> bool:
        waited = self.clock() - first_at
        if batch.rows:
            return waited >= timeout_s and not self.busy()
        return waited >= max(timeout_s, IDLE_BATCH_INTERVAL_S)
