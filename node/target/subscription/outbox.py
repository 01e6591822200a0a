"""A running subscription's batches on their way to its reader, and the reader's session.

The outbox holds the batches Load handed over that the reader has not acknowledged, at
most ``capacity`` of them: Load waits for room (so a slow reader holds back its own
pipeline's window only, and the node's memory stays bounded). One reader at a time: a new
one takes the subscription over (a client that restarts need not wait for the server to
notice its old connection died) and gets every batch not acknowledged, from the first, as
``rollback`` does; the reader taken over is told so (it does not come back: two readers
would split the stream). A look (a reader that acknowledges nothing) never takes over: it
is refused while a reader is attached. An acknowledgement is cumulative (every batch up to
its id) and names the batch's stream and generation: a reader's session is a stream (a
number never used again in this process, so a batch of an earlier outbox or session is
never acknowledged by its id on a later one), and each rollback starts a generation of it
(a batch sent before the rollback is not acknowledged by an ack after it).
"""

from __future__ import annotations

import collections
import itertools
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import grpc

from shared.errors import FencedError
from shared.model import BinlogPosition
from shared.rpc import subscription_pb2

log = logging.getLogger("setl.node.subscription")
POLL_S = 0.5  # how often a waiting stream looks whether its reader is still there
# the streams of this process: from a random start, so a restarted node numbers anew too
_STREAMS = itertools.count(secrets.randbits(40) + 1)


class Parcel(NamedTuple):
    batch_id: int
    end: BinlogPosition
    data: bytes  # a serialized ChangeBatch
    start: BinlogPosition = BinlogPosition()  # where the batch's binlog begins


class Detached(Exception):
    """The reader's session ended: the outbox closed (the reader connects again)."""


class TakenOver(Detached):
    """Another reader took the subscription over: this one must not come back."""


class Refused(Exception):
    """A look while a reader is attached: it would take the subscription over."""


class Outbox:
    def __init__(self, pipeline_id: str, capacity: int,
                 acked: Callable[[Parcel], None], epoch: int = 0) -> None:
        self.pipeline_id, self.capacity, self._acked = pipeline_id, max(capacity, 1), acked
        self.epoch = epoch  # the owner's: its batches carry it
        self._cond = threading.Condition()
        self._pending: collections.deque[Parcel] = collections.deque()
        self._sent = 0  # of the pending batches, how many went to the current reader
        self._highest = 0  # the highest batch id sent to the current reader since a rollback
        self._reader = 0  # the current reader's stream
        self._generation = 0  # its rollbacks
        self._look = False  # it acknowledges nothing
        self._since = 0.0  # when it attached
        self._taken: dict[int, str] = {}  # readers taken over (until they end): by whom
        self._closed = ""  # why the outbox closed (the pipeline stopped, fenced)
        self._storing = threading.Lock()  # one acknowledgement stored at a time
        self._stored = 0  # the batch id last stored
        self.peer = ""  # who reads it now
        # where the subscription is: its last acknowledged batch's end (the claimed one at
        # start; None: nothing acknowledged yet). What is handed over but unacknowledged is
        # not a position: a restart sends it again
        self.acked_end: BinlogPosition | None = None

    # -- Load's side --------------------------------------------------------------------------
    def put(self, parcel: Parcel, stop: threading.Event) -> bool:
        """Hand a batch over once there is room; False when the pipeline stopped first."""
        with self._cond:
            while len(self._pending) >= self.capacity and not stop.is_set() and \
                    not self._closed:
                self._cond.wait(POLL_S)
            if stop.is_set() or self._closed:
                return False
            self._pending.append(parcel)
            self._cond.notify_all()
            return True

    def close(self, why: str) -> None:
        with self._cond:
            self._closed = why
            self._cond.notify_all()

    @property
    def closed(self) -> str:
        return self._closed

    def drain(self, stop: threading.Event, owns: Callable[[], bool],
              waiting: Callable[[list[Parcel]], None]) -> list[Parcel]:
        """Wait until the reader acknowledged every batch handed over (the pipeline pauses at
        the batch after them: its position is then right before that one); ``waiting``
        hears the batches left whenever they change. The batches left: none, or those still
        unacknowledged when the pipeline stopped, its outbox closed (fenced) or this node
        lost it first (they stay where they are: the next run sends them again)."""
        told: tuple[int, ...] = ()
        while True:
            with self._cond:
                left = list(self._pending)
                if not left or self._closed or stop.is_set():
                    return left
            if tuple(parcel.batch_id for parcel in left) != told:
                told = tuple(parcel.batch_id for parcel in left)
                waiting(left)
            if not owns():
                return left
            with self._cond:
                if self._pending and not self._closed and not stop.is_set():
                    self._cond.wait(POLL_S)

    def pending(self) -> list[Parcel]:
        """The batches handed over and not acknowledged, first first."""
        with self._cond:
            return list(self._pending)

    @property
    def waiting(self) -> int:
        """Batches handed over and not acknowledged."""
        return len(self._pending)

    # -- the reader's side --------------------------------------------------------------------
    def attach(self, peer: str, look: bool = False) -> int:
        """A new reader's stream: it gets every batch not acknowledged. The reader before it
        is taken over, unless this one is a look and that one a reader (Refused then)."""
        with self._cond:
            if self._closed:
                raise Detached(self._closed)
            if look and self._reader and not self._look:  # (a look takes a look's place:
                raise Refused(f"reader {self.peer or '?'} reads it since {_utc(self._since)} "
                              "and a look never takes a reader's place: look when it has no "
                              "reader (setl subscription show), or read a channel of your own")
            # its own stale stream, after a network blip, that gRPC has not seen end yet)
            now = time.time()
            if self._reader:
                self._taken[self._reader] = f"reader {peer} took this subscription over " \
                                            f"at {_utc(now)}"
            self._reader, self._look, self._since = next(_STREAMS), look, now
            self._sent, self._highest, self._generation, self.peer = 0, 0, 0, peer
            self._cond.notify_all()
            return self._reader

    def take(self, reader: int) -> Parcel | None:
        """The reader's next batch, its stream and generation added to its fields; None
        when there is none yet (it asks again)."""
        with self._cond:
            self._check(reader)
            if self._sent >= len(self._pending):
                self._cond.wait(POLL_S)
                self._check(reader)
                if self._sent >= len(self._pending):
                    return None
            parcel = self._pending[self._sent]
            self._sent += 1
            self._highest = max(self._highest, parcel.batch_id)
            stamp = subscription_pb2.ChangeBatch(stream=reader, generation=self._generation)
            # (a field written again after a message's end overrides it: the node touches no
            # change to add them)
            return parcel._replace(data=parcel.data + stamp.SerializeToString())

    def ack(self, reader: int, batch_id: int, generation: int = 0) -> None:
        """Every batch up to ``batch_id`` is handled: its position is stored, then room
        made. An id acknowledged already is nothing new (a batch sent again after a
        rollback); an ack of an older generation is ignored (the batch was sent before a
        rollback: it comes again); one never sent to this reader, or from a look, is refused
        (ValueError)."""
        with self._storing:  # (a reader taking over may ack while the old one's is stored)
            with self._cond:
                self._check(reader)
                if self._look:
                    raise ValueError("a look acknowledges nothing: read without look to "
                                     "move the subscription")
                if generation != self._generation:
                    log.warning("event=subscriber_ack_ignored pipeline=%s batch_id=%d "
                                "generation=%d current=%d reason=sent_before_a_rollback",
                                self.pipeline_id, batch_id, generation, self._generation)
                    return
                if batch_id > self._highest:
                    raise ValueError(f"batch {batch_id} was not sent on this stream since its "
                                     f"last rollback (the last one sent is "
                                     f"{self._highest or 'none'})")
                done = [parcel for parcel in self._pending if parcel.batch_id <= batch_id]
                if not done or done[-1].batch_id <= self._stored:
                    return
            try:  # stored first: a crash after it re-sends nothing acknowledged
                self._acked(done[-1])
            except FencedError as exc:  # a newer owner: Load stops, the reader goes there
                self.close(str(exc))
                raise
            self._stored, self.acked_end = done[-1].batch_id, done[-1].end
            with self._cond:
                while self._pending and self._pending[0].batch_id <= batch_id:
                    self._pending.popleft()
                    self._sent = max(self._sent - 1, 0)
                self._cond.notify_all()

    def rollback(self, reader: int) -> None:
        with self._cond:
            self._check(reader)
            self._sent, self._highest = 0, 0
            self._generation += 1
            self._cond.notify_all()

    def detach(self, reader: int, ended: bool = False) -> None:
        """The reader's stream stops reading; ``ended``: it is gone (nothing asks for it)."""
        with self._cond:
            if ended:
                self._taken.pop(reader, None)
            if self._reader == reader:
                self._reader, self._sent, self.peer = 0, 0, ""
                self._cond.notify_all()

    def _check(self, reader: int) -> None:
        if self._closed:
            raise Detached(self._closed)
        if reader in self._taken:
            raise TakenOver(self._taken[reader])
        if reader != self._reader:
            raise Detached("the reader's stream ended")


def _other_stream(ack: subscription_pb2.SubscribeAck, reader: int) -> str:
    named = ack.stream or "none (a client older than this node: update manager.subscriber)"
    return (f"an acknowledgement of batch {ack.batch_id} of stream {named} on stream "
            f"{reader}: acknowledge batches of the stream you read (one of an earlier "
            "stream comes again)")


def _utc(when: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(when))


class Outboxes:
    """The outboxes of the subscriptions this node runs, by pipeline id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._boxes: dict[str, Outbox] = {}

    def add(self, box: Outbox) -> None:
        with self._lock:
            self._boxes[box.pipeline_id] = box

    def remove(self, box: Outbox) -> None:
        with self._lock:
            if self._boxes.get(box.pipeline_id) is box:
                del self._boxes[box.pipeline_id]

    def get(self, pipeline_id: str) -> Outbox | None:
        with self._lock:
            return self._boxes.get(pipeline_id)


OUTBOXES = Outboxes()


def serve(first: subscription_pb2.SubscribeStart, requests: Iterator[Any],
          context: Any, boxes: Outboxes = OUTBOXES) -> Iterator[bytes]:
    """One reader's stream: batches out (serialized ChangeBatch messages), acks and
    rollbacks in (read by a thread of their own). A reader taken over, or a look refused,
    ends with FAILED_PRECONDITION (its client does not connect again); a closed outbox with
    ABORTED (it does: the pipeline runs again here or elsewhere)."""
    pipeline_id = f"{first.channel}.{first.pipeline}"
    box = boxes.get(pipeline_id)
    if box is None:
        context.abort(grpc.StatusCode.UNAVAILABLE, f"pipeline {pipeline_id} is not running on "
                      "this node (starting, or moved to another node): connect again")
    assert box is not None
    peer = first.reader or context.peer()  # the reader's address, not the manager's relay
    try:
        reader = box.attach(peer, first.look)
    except Refused as exc:
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"pipeline {pipeline_id}: {exc}")
    except Detached as exc:
        context.abort(grpc.StatusCode.UNAVAILABLE, f"pipeline {pipeline_id}: {exc}")
    log.info("event=subscriber_attached pipeline=%s peer=%s waiting=%d stream=%d look=%s",
             pipeline_id, peer, box.waiting, reader, first.look)
    failed: list[str] = []
    moved: list[bool] = []  # the reader should connect again (a store failed)
    closed = threading.Event()  # the reader closed its side: every ack of it is stored

    def listen() -> None:
        try:
            for request in requests:
                kind = request.WhichOneof("kind")
                if kind == "ack":
                    if request.ack.stream != reader:
                        raise ValueError(_other_stream(request.ack, reader))
                    box.ack(reader, request.ack.batch_id, request.ack.generation)
                elif kind == "rollback":
                    box.rollback(reader)
            closed.set()
        except ValueError as exc:
            failed.append(str(exc))
            log.warning("event=subscriber_refused pipeline=%s peer=%s error=%s", pipeline_id,
                        peer, exc)
        except (Detached, grpc.RpcError, FencedError):
            pass  # (fenced: the outbox is closed, the reader is told so below)
        except Exception as exc:  # ZooKeeper did not store the acknowledgement
            failed.append(f"its acknowledgement could not be stored: {exc!r}")
            moved.append(True)
            log.warning("event=subscriber_ack_failed pipeline=%s peer=%s error=%r",
                        pipeline_id, peer, exc)
        finally:
            box.detach(reader)

    thread = threading.Thread(target=listen, name=f"subscriber-{pipeline_id}", daemon=True)
    thread.start()
    # batch 0: the stream is up (a reader of an idle source hears nothing else), and whose
    yield subscription_pb2.ChangeBatch(epoch=box.epoch, stream=reader).SerializeToString()
    try:
        while context.is_active():
            try:
                parcel = box.take(reader)
            except Detached as exc:
                if closed.is_set():
                    return  # the reader said goodbye: the stream ends well
                if failed and not moved:
                    context.abort(grpc.StatusCode.FAILED_PRECONDITION, failed[0])
                if isinstance(exc, TakenOver):
                    context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"pipeline "
                                  f"{pipeline_id}: {exc}; this reader stops: a subscription "
                                  "has one reader at a time (another application or replica "
                                  "reads a channel of its own)")
                context.abort(grpc.StatusCode.ABORTED, f"pipeline {pipeline_id}: "
                              f"{failed[0] if failed else exc}; connect again")
            if parcel is not None:
                yield parcel.data
    finally:
        box.detach(reader, ended=True)
        log.info("event=subscriber_detached pipeline=%s peer=%s", pipeline_id, peer)
