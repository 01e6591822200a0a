"""What status shows of a pipeline runner: the state it publishes to ZooKeeper (the node's
refresh every few seconds, a pause at once) and what the manager, ``setl status`` and the
metrics read there."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from kazoo.exceptions import KazooException

from node.target.subscription.outbox import OUTBOXES
from shared import zk
from shared.model import BinlogPosition
from shared.rpc import manager_pb2

log = logging.getLogger("setl.node.pipeline")


def delay_ms(now_ms: int, busy: bool, loaded_ts_ms: int, pending_ts_ms: int,
             reading_ts_ms: int = 0) -> int:
    """How far behind the source a pipeline is: while it has work (batches in flight, a
    batch Select is gathering, read transactions waiting), the time since the commit of the
    oldest transaction not loaded yet (``pending_ts_ms``) — not since the last one loaded,
    which after an idle hour is an hour old while the new transaction is a second old (a
    transaction read and not taken by Select yet counts too). When that is not known, since
    the last one loaded. Else, while Select reads a transaction whose commit has not come
    yet (a huge one: nothing is selected for minutes), since that transaction's first
    event. The binlog
    keeps times in whole seconds: the middle of that second is the unbiased estimate
    (±500 ms); the benchmarks measure delay exactly with heartbeats."""
    since = (pending_ts_ms or loaded_ts_ms) if busy else 0
    since = since or reading_ts_ms
    return max(0, now_ms - since - 500) if since else 0


def pending_since_ms(in_flight: Any, selector: Any) -> int:
    """The commit time of the oldest transaction selected and not loaded: the first of the
    oldest batch in flight (``in_flight``: (processId, commit time) of each, oldest first),
    else of the batch Select is gathering (0: none)."""
    try:
        oldest = in_flight[0][1]  # (read while Load pops: maybe gone meanwhile)
    except IndexError:
        oldest = 0
    return oldest or (selector.open_since_ms if selector else 0)


def carry_over(in_flight: Any, next_process_id: int) -> None:
    """A new attempt starts (after a failure): the batches in flight were dropped and are
    selected again from the targets' position, their oldest transaction first. Its commit
    time stays the delay's start until the batch from ``next_process_id`` on is loaded, so
    a pipeline that fails and retries, reporting ``retrying`` then ``starting``, reads as
    behind as it is, not 0 between its attempts."""
    oldest = in_flight[0][1] if in_flight else 0
    in_flight.clear()
    if oldest:
        in_flight.append((next_process_id, oldest))


class RunnerStatus:
    """The status half of :class:`node.pipeline.PipelineRunner` (its attributes are the
    runner's)."""

    pipeline_id: str
    ctx: Any
    _loaded: Any
    _in_flight: Any
    rows_skipped: int
    metrics: Any
    state: str
    last_error: str
    last_commit_ts_ms: int
    batches_loaded: int
    # a subscription's position is its reader's acknowledgement, also while it is stopped or
    # between attempts (its outbox gone): kept from the last one seen
    subscribed: bool = False
    acked_end: BinlogPosition | None = None
    # a subscription's batches its reader had not acknowledged when it paused (its outbox
    # gone): what `setl position set` past them would skip (manager.positions refuses it)
    unacked_left: int = 0

    def counted(self, loader: Any, batch: Any, done: Any, wait_s: float, load_s: float
                ) -> int:
        """A loaded batch's figures: its rows (less those the target refused and
        skip_load_exception skipped), the delay's oldest batch in flight, the error it ends;
        the rows counted."""
        self.last_commit_ts_ms = batch.commit_ts_ms or self.last_commit_ts_ms
        while self._in_flight and self._in_flight[0][0] <= batch.process_id:
            self._in_flight.popleft()
        take_skipped = getattr(loader, "take_skipped", None)  # a MySQL target's
        skipped = take_skipped() if take_skipped is not None else 0
        self.rows_skipped += skipped
        rows = max((done.rows if done.changes is None else batch.rows) - skipped, 0)
        self._loaded.append((time.monotonic(), rows))
        self.batches_loaded += 1
        if self.last_error and self.state == "running":  # the attempt after it moves: the
            self.last_error = ""  # error is over, and a copy's problem may show (status)
        self.metrics.batch_loaded(rows, done.et_ms / 1000, wait_s, load_s, skipped)
        return rows

    def publish(self) -> None:
        """What status shows of this pipeline, to ZooKeeper (the node's refresh does it
        every few seconds; a pause at once, so the reason is there with the PAUSE)."""
        try:
            zk.put(self.ctx.client, self.ctx.paths.stats(self.pipeline_id),
                   self.snapshot().SerializeToString())
        except KazooException as exc:
            log.debug("event=stats_failed pipeline=%s error=%r", self.pipeline_id, exc)

    def rows_per_second(self, span_s: float = 5.0) -> float:
        now = time.monotonic()
        recent = [rows for at, rows in self._loaded if now - at <= span_s]
        return sum(recent) / span_s

    def delay_now(self, now_ms: int) -> int:
        """:func:`delay_ms` of this runner at ``now_ms``."""
        selector = self._selector
        pending = pending_since_ms(self._in_flight, selector) or (
            selector.queued_since_ms if selector else 0)
        busy = bool(pending) or bool(self._in_flight) or bool(selector and selector.backlog)
        return delay_ms(now_ms, busy, self.last_commit_ts_ms, pending,
                        selector.reading_since_ms if selector else 0)

    def snapshot(self) -> manager_pb2.PipelineState:
        in_flight = self.batches_selected - self.batches_loaded
        position = self.cursor.position if self.cursor else BinlogPosition()
        box = OUTBOXES.get(self.pipeline_id)
        if box is not None:
            self.subscribed, self.acked_end = True, box.acked_end
        if self.subscribed:  # where its reader acknowledged, not what was handed over
            position = self.acked_end or BinlogPosition()
        return manager_pb2.PipelineState(
            pipeline_id=self.pipeline_id, state=self.state, owner_node=self.ctx.node_id,
            position={"file": position.file, "pos": position.pos, "gtid": position.gtid,
                      "server": position.server},
            delay_ms=self.delay_now(int(time.time() * 1000)),
            rows_per_second=self.rows_per_second(),
            window_used=in_flight, window_peak=self.window_peak,
            window_size=(self._window.size if self._window else
                         self.ctx.pipeline.params.parallelism),
            # the copies' problems while it runs (a stopped runner's are not why it stopped)
            last_error=self.last_error or (self._snapshots.problem() if self._snapshots and
                                           self.state == "running" else ""),
            process_id=self.cursor.process_id if self.cursor else 0,
            free_door=dataclasses.asdict(self.door_stats),
            snapshots=(self._snapshots.progress() if self._snapshots and self._snapshots.started
                       else self.snapshot_store.stored_progress()),  # starting: as last saved
            source=self.primary.in_use, switched=self.primary.describe(),
            switched_ms=self.primary.record.at_ms if self.primary.record else 0,
            source_switches=self.primary.switches, rows_skipped=self.rows_skipped,
            **({"subscriber": box.peer, "unacked": box.waiting} if box is not None else
               {"unacked": self.unacked_left}))
