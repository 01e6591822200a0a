"""Load into a subscription: each batch handed to the pipeline's outbox for its reader; the
subscription's position is what the reader acknowledged (see
:mod:`node.target.subscription`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient

from node.changes import Batch, ChangeType, TargetChange
from node.cursor import Cursor
from node.jobs import PartResult
from node.target.subscription import units
from node.target.subscription.outbox import OUTBOXES, Outbox, Outboxes, Parcel
from shared import acks
from shared.acks import Acked, AckStore
from shared.errors import ConfigError, FencedError
from shared.model import BinlogPosition, DataSource, PipelineParams
from shared.rpc import model_pb2, subscription_pb2
from shared.zk import ZkPaths

log = logging.getLogger("setl.node.target.subscription")


class SubscriptionLoader:
    """Hands one pipeline's batches to its reader and stores what the reader acknowledged."""

    # what Load hands over is held by nobody until it is acknowledged: the runner publishes
    # no restart hint ahead of it (a start resumes from the acknowledged position)
    durable = False
    _marked: acks.Unacked | None = None  # the record of unacknowledged batches written last
    # a wait cut short with batches left and no record yet: how long, and how often, the
    # record is tried before the pipeline ends without it (see _cut_short). Well below the
    # node's STOP_RUNNERS_S (node.daemon, 8 s: not imported, node.daemon imports this module
    # through the supervisor): runner threads are daemon threads, and a SIGTERM ends the
    # process that long after the stop; the retry, its unacked_marker_lost line and the
    # runner's last state fit in it (tests/unit/test_subscription_pause_disconnected.py)
    MARK_RETRY_S = 4.0
    MARK_EVERY_S = 0.5

    def __init__(self, pipeline_id: str, targets: dict[str, DataSource],
                 params: PipelineParams, epoch: int, stop: threading.Event, run: str,
                 client: KazooClient, paths: ZkPaths, boxes: Outboxes = OUTBOXES) -> None:
        if len(targets) != 1:
            raise ConfigError(f"pipeline {pipeline_id} writes {len(targets)} subscriptions "
                              f"({', '.join(sorted(targets))}); a pipeline feeds one "
                              "subscription: give each its own pipeline")
        self.pipeline_id, self.targets, self.run, self.stop = pipeline_id, targets, run, stop
        self.name = next(iter(targets))
        self.written: dict[str, BinlogPosition] = {}
        self.acks = 0  # acknowledgements stored: the runner's progress (it holds nothing else)
        self.store = AckStore(client, paths.acked(pipeline_id), self.name, epoch)
        self.unacked_path = paths.unacked(pipeline_id)
        self.dropped: list[Parcel] = []  # batches a stop kept from the reader (in order)
        self.outbox = Outbox(pipeline_id, params.parallelism, self._acked, epoch)
        self.boxes = boxes
        boxes.add(self.outbox)

    # -- start --------------------------------------------------------------------------
    def claim(self) -> dict[str, Cursor | None]:
        acked = self.store.claim(self.run)
        if acked is None:
            return {self.name: None}
        self.written[self.name] = self.outbox.acked_end = acked.position
        log.info("event=target_claimed pipeline=%s target=%s epoch=%d position=%s "
                 "process_id=%d", self.pipeline_id, self.name, self.store.epoch,
                 acked.position, acked.process_id)
        return {self.name: Cursor(acked.position, acked.process_id, run=acked.run)}

    def take_over(self, name: str, found: int) -> list[int] | None:
        """No connections to ask: a newer epoch while this node holds the pipeline is a
        ZooKeeper whose history went back; write above it (every write stays conditional
        on the version read)."""
        self.store.take_over(found)
        self.outbox.epoch = self.store.epoch
        return None

    # -- batches --------------------------------------------------------------------------
    def load(self, batch: Batch, changes: list[TargetChange]) -> int:
        """A DDL batch: its statements go to the reader as transactions of their own."""
        data = []
        last = batch.transactions[-1] if batch.transactions else None
        end = batch.end
        for number, change in enumerate(changes):
            if change.type is not ChangeType.DDL:
                raise ConfigError(f"pipeline {self.pipeline_id}: a two-way channel cannot "
                                  "feed a subscription; give it a one-way channel")
            # (a statement mapped to several schemas: an id each, the first one plain)
            name = f"{end.file}:{end.pos}" + (f"/{number}" if number else "")
            data.append(units.ddl_transaction(change, name, end.gtid,
                                              last.commit_ts_ms if last else 0))
        self._hand_over(batch, data)
        return 0

    def load_units(self, batch: Batch, results: list[PartResult],
                   redo: Callable[[], list[PartResult]] | None = None) -> int:
        """The batch's parts, one after the other (each holds whole transactions in binlog
        order), behind the batch's own fields."""
        data = [unit.data for result in results for unit in result.units]
        rows = sum(unit.rows for result in results for unit in result.units)
        self._hand_over(batch, data)
        return rows

    def _hand_over(self, batch: Batch, data: list[bytes]) -> None:
        end = batch.end
        head = subscription_pb2.ChangeBatch(
            batch_id=batch.process_id, run=self.run, epoch=self.store.epoch,
            end=model_pb2.BinlogPosition(file=end.file, pos=end.pos, gtid=end.gtid,
                                         server=end.server))
        parcel = Parcel(batch.process_id, end, head.SerializeToString() + b"".join(data),
                        batch.start)
        if self.outbox.put(parcel, self.stop):
            return
        if not self.stop.is_set():
            raise FencedError(f"pipeline {self.pipeline_id}: batch {batch.process_id} not "
                              f"handed to the subscription's reader: {self.outbox.closed}",
                              self.name)
        # stopping: the batch is dropped, unacknowledged, so the next start sends it; a
        # pause after it is not right after the acknowledged position (see drain)
        self.dropped.append(parcel)

    def _acked(self, parcel: Parcel) -> None:
        self.store.write(Acked(parcel.end, parcel.batch_id, 0, self.run))
        self.written[self.name] = parcel.end
        self.acks += 1
        log.debug("event=subscription_acked pipeline=%s process_id=%d position=%s",
                  self.pipeline_id, parcel.batch_id, parcel.end)

    # -- a pause ------------------------------------------------------------------------------
    def drain(self, stop: threading.Event, owns: Callable[[], bool], channel: str,
              report: Callable[[str, int], None]) -> tuple[str, int]:
        """Before the pipeline pauses at a batch: wait for the reader to acknowledge every
        batch handed over before it, so that its position is right before that batch and a
        move past it (what a pause says to do) skips it alone. ``report(text, left)`` says
        what it waits for; the answer is what the pause adds to its text (nothing when
        there was nothing to wait for), and the batches left unacknowledged (when the
        pipeline was stopped, or lost, first)."""
        def waiting(left: list[Parcel]) -> None:
            report(f"pausing: {self._unacked(left)}; the pause follows once it acknowledged "
                   "them, so that moving past the failed batch skips nothing it was sent. "
                   f"Let it read (setl subscribe {channel}, or the application's reader); "
                   "a stop keeps them unacknowledged (the next start sends them again)",
                   len(left))
        # none: its position is right before it already (batches a stop dropped: not)
        waited = self.outbox.waiting + len(self.dropped)
        # (disconnected, a write waits for the connection, deaf to a stop: each tick tries it)
        marked = waited > 0 and self._connected() and self._mark()

        def owning() -> bool:  # each tick of the wait: the record too, until it is written
            nonlocal marked
            if not owns():
                return False
            if not marked and self._connected():
                marked = self._mark()
            return True
        left = self.outbox.drain(stop, owning, waiting) + self.dropped
        if left and not marked:
            marked = self._mark_until(left, owns)
        if waited and not left:  # every one acknowledged: the record would only refuse
            self._unmark()  # later moves it has no part in (positions it cannot compare)
        if not waited:
            return "", 0
        if left:
            log.warning("event=pause_without_acks pipeline=%s unacked=%d acked=%s "
                        "recorded=%s", self.pipeline_id, len(left),
                        self.outbox.acked_end or "-", marked)
            return self._cut_short(left, channel, marked), len(left)
        acked = self.outbox.acked_end
        return (f"\nsubscription {self.name}: its reader acknowledged every batch before the "
                f"failed one; its position ({acked or 'nothing acknowledged yet'}) is right "
                "before it, so a move past the failed batch skips that batch alone", 0)

    def _cut_short(self, left: list[Parcel], channel: str, recorded: bool) -> str:
        """What a pause cut short adds to its text. Without this node's record (ZooKeeper
        refused it throughout, or the pipeline went to another node before it was taken)
        nothing of this run refuses ``setl position set`` past the batches once a start and
        a stop published another state: the text then gives no way past the failed batch at
        all (the pipeline ends failed, unpaused, as any wait cut short does), only a start,
        whose drain waits for the reader and writes the record again. Whoever owns the
        pipeline now, that stays true: no move past them until a reader acknowledged them."""
        if not recorded:
            return (f"\n{self._unacked(left)}, and ZooKeeper did not take the record that "
                    "makes `setl position set` refuse a move past them: do NOT move the "
                    f"position past {left[-1].end} (it may not be refused, and the reader "
                    f"would never get them). Start the channel again (setl channel start "
                    f"{channel}) once ZooKeeper answers: the reader gets them, and the "
                    "pipeline waits for its acknowledgements at the failed batch again")
        return (f"\n{self._unacked(left)}: moving its position past the failed batch "
                "(a statement) skips them too, and the reader never gets them. Start the "
                f"channel again first (setl channel start {channel}): the reader gets "
                "them, and the pipeline pauses here again once it has acknowledged them, "
                "its position then right before the failed batch; then move past it")

    def _mark_until(self, left: list[Parcel], owns: Callable[[], bool]) -> bool:
        """The record of ``left``, tried for up to :attr:`MARK_RETRY_S` (a stop ended the
        wait: this holds the runner's end that long at most) while this node owns the
        pipeline (a newer owner writes its own). False: not written."""
        deadline = time.monotonic() + self.MARK_RETRY_S
        while owns():
            if self._connected() and self._mark(left):
                return True
            if time.monotonic() >= deadline:
                log.error("event=unacked_marker_lost pipeline=%s batches=%d until=%s",
                          self.pipeline_id, len(left), left[-1].end)
                return False
            time.sleep(self.MARK_EVERY_S)
        return False

    def _connected(self) -> bool:
        """Whether a write can get an answer now (a disconnected client's waits for the
        connection: the wait would stop ticking)."""
        return bool(getattr(self.store.client, "connected", True))

    def _unmark(self) -> None:
        """Remove the record this drain wrote, and only it (a newer owner's, written since,
        stays)."""
        if self._marked is None:
            return
        try:
            acks.clear_unacked(self.store.client, self.unacked_path, self._marked)
        except Exception as exc:  # (left, it retires itself once acks pass its end)
            log.warning("event=unacked_marker_not_cleared pipeline=%s error=%r",
                        self.pipeline_id, exc)

    def _mark(self, left: list[Parcel] | None = None) -> bool:
        """Record, beside the acknowledged position, that the batches handed over up to
        now's last one are unacknowledged (:class:`shared.acks.Unacked`): what refuses a move
        past them while the reader has not acknowledged them, whatever runs of the pipeline
        come and go meanwhile. False when ZooKeeper did not take it."""
        parcels = left if left is not None else self.outbox.pending() + self.dropped
        if not parcels:
            return True
        start = self.outbox.acked_end or parcels[0].start
        marker = acks.Unacked(start, parcels[-1].end, len(parcels))
        try:
            acks.write_unacked(self.store.client, self.unacked_path, marker)
            self._marked = marker
        except Exception as exc:  # (tried again at each tick of the wait, then for a while)
            log.error("event=unacked_marker_failed pipeline=%s error=%r", self.pipeline_id,
                      exc)
            return False
        log.info("event=unacked_marked pipeline=%s start=%s until=%s batches=%d",
                 self.pipeline_id, marker.start, marker.until, marker.batches)
        return True

    def _unacked(self, left: list[Parcel]) -> str:
        return (f"subscription {self.name}'s reader has not acknowledged {len(left)} "
                f"batch(es) handed to it before the failed one, from its position "
                f"{self.outbox.acked_end or '(nothing acknowledged yet)'} to {left[-1].end}")

    def close(self) -> None:
        self.outbox.close(f"pipeline {self.pipeline_id} stopped on this node")
        self.boxes.remove(self.outbox)
