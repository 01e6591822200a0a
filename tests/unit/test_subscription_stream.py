"""A subscription's stream end to end without a network: the real Outbox, serve() and
Subscriber, gRPC replaced by a thread and queues (which buffer what the server sent ahead of
the reader, as gRPC does). Rollback generations, one reader at a time, a look, a stream of an
earlier run, and ZooKeeper not answering the manager."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from manager import service, subscriber
from manager.subscribe import for_node, forwarding
from manager.subscriber import Subscriber
from node.target.subscription.outbox import Outbox, Outboxes, Parcel, serve
from shared import rpcserver
from shared.errors import ConfigError, SetlError, ZooKeeperUnavailableError
from shared.model import BinlogPosition
from shared.rpc import subscription_pb2 as pb

EPOCH = 7


class Status(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple:
        return ()


class Context:
    def __init__(self, peer: str) -> None:
        self.active, self._peer = True, peer

    def is_active(self) -> bool:
        return self.active

    def peer(self) -> str:
        return self._peer

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Status(code, details)


class Call:
    """A Subscribe call served by serve() in a thread of its own."""

    def __init__(self, boxes: Outboxes, requests: Iterator[pb.SubscribeRequest],
                 peer: str) -> None:
        self.out: queue.Queue[Any] = queue.Queue()
        self.context = Context(peer)
        first = next(requests)
        threading.Thread(target=self._serve, args=(boxes, first.start, requests),
                         daemon=True).start()

    def _serve(self, boxes: Outboxes, start: pb.SubscribeStart,
               requests: Iterator[pb.SubscribeRequest]) -> None:
        try:
            for data in serve(start, requests, self.context, boxes):
                self.out.put(data)
        except Status as exc:
            self.out.put(exc)
        self.out.put(None)

    def __iter__(self) -> Iterator[pb.ChangeBatch]:
        while True:
            item = self.out.get()
            if item is None:
                return
            if isinstance(item, Status):
                raise item
            yield pb.ChangeBatch.FromString(item)

    def cancel(self) -> None:
        self.context.active = False
        self.out.put(Status(grpc.StatusCode.CANCELLED, "cancelled"))


class Network:
    """What Subscriber reaches instead of a manager: the node's outboxes, directly."""

    def __init__(self) -> None:
        self.boxes = Outboxes()
        self.calls: list[Call] = []
        self.metadata = ()

    @contextlib.contextmanager
    def channel(self, address: str) -> Iterator[Network]:
        yield self

    def stub(self, channel: Any) -> Any:
        network = self

        class Stub:
            def Subscribe(self, requests: Iterator[pb.SubscribeRequest],
                          metadata: Any = ()) -> Call:  # through the manager's relay
                start = next(requests).start
                reader = f"ipv4:reader{len(network.calls) + 1}"
                call = Call(network.boxes, forwarding(for_node(
                    start.channel, start.pipeline, start, reader), requests), "ipv4:relay")
                network.calls.append(call)
                return call
        return Stub()

    def subscriber(self, **options: Any) -> Subscriber:
        return Subscriber("c", "p", managers="x", access=self, retry_s=0.05,  # type: ignore[arg-type]
                          give_up_s=5, **options)


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> Network:
    made = Network()
    monkeypatch.setattr(subscriber.manager_pb2_grpc, "ManagerServiceStub", made.stub)
    return made


def outbox(network: Network, capacity: int, acked: list[int], ends: int = 100) -> Outbox:
    box = Outbox("c.p", capacity, lambda p: acked.append(p.end.pos), epoch=EPOCH)
    network.boxes.add(box)
    box.ends = ends  # type: ignore[attr-defined]  # (where this run cuts its batches)
    return box


def put(box: Outbox, *ids: int) -> None:
    for batch_id in ids:
        end = batch_id * box.ends  # type: ignore[attr-defined]
        data = pb.ChangeBatch(batch_id=batch_id, epoch=EPOCH,
                              end={"file": "bin.000001", "pos": end})
        data.transactions.add(id=f"bin.000001:{end}")
        assert box.put(Parcel(batch_id, BinlogPosition("bin.000001", end),
                              data.SerializeToString()), threading.Event())


def wait(condition: Any, what: str, timeout_s: float = 5) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"no {what} in {timeout_s} s"
        time.sleep(0.01)


def test_after_a_rollback_no_batch_sent_before_it_is_handed_on(network: Network) -> None:
    """Batches 1-5 are in flight when the reader fails batch 1 and rolls back: the copies of
    2-5 sent before the rollback are not handed on (acking one would acknowledge batch 1);
    1 comes again first, then the rest, and no ack stored passes what was handled."""
    acked: list[int] = []
    box = outbox(network, 5, acked)
    put(box, 1, 2, 3, 4, 5)
    seen: list[int] = []
    handled: list[int] = []
    with network.subscriber() as feed:
        for batch in feed:
            seen.append(batch.batch_id)
            if seen == [1]:
                wait(lambda: network.calls[0].out.qsize() >= 4, "batches 2-5 in flight")
                feed.rollback()  # batch 1 could not be applied
                continue
            handled.append(batch.batch_id)
            feed.ack(batch)
            if batch.batch_id == 5:
                break
    assert seen == [1, 1, 2, 3, 4, 5] and handled == [1, 2, 3, 4, 5]
    assert acked == [100, 200, 300, 400, 500]


def test_an_ack_of_a_generation_before_the_rollback_is_ignored_by_the_node(
        network: Network) -> None:
    acked: list[int] = []
    box = outbox(network, 5, acked)
    put(box, 1, 2)
    reader = box.attach("r")
    assert [box.take(reader) is not None for _ in range(2)] == [True, True]
    box.rollback(reader)
    box.ack(reader, 2, 0)  # the app handled a copy sent before the rollback: too late
    assert acked == [] and box.waiting == 2


def _read_all(feed: Subscriber, got: list[int], failed: list[BaseException],
              stop: threading.Event) -> None:
    try:
        for batch in feed:
            got.append(batch.batch_id)
            feed.ack(batch)
            if stop.is_set():
                return
    except BaseException as exc:  # said by the test
        failed.append(exc)


def test_a_reader_taken_over_raises_and_does_not_come_back(network: Network) -> None:
    """Two replicas of an application on one subscription: the second takes it over (a
    restarted client's new connection must be able to), the first is told and stops rather
    than taking it back and splitting the stream between them."""
    acked: list[int] = []
    box = outbox(network, 3, acked)
    put(box, 1, 2, 3)
    first_got: list[int] = []
    first_failed: list[BaseException] = []
    stop = threading.Event()
    first = network.subscriber()
    thread = threading.Thread(target=_read_all, args=(first, first_got, first_failed, stop),
                              daemon=True)
    thread.start()
    wait(lambda: len(acked) == 3, "acks of the first reader")
    second = network.subscriber()
    batches = iter(second)
    got: queue.Queue[int] = queue.Queue()
    threading.Thread(target=lambda: got.put(next(batches).batch_id), daemon=True).start()
    # batch 4 once the second reader is attached (before it, the first could take it)
    wait(lambda: box.peer == "ipv4:reader2", "the second reader attached")
    put(box, 4)
    assert got.get(timeout=10) == 4  # the second reader has the subscription now
    thread.join(5)
    assert not thread.is_alive() and len(first_failed) == 1, first_failed
    assert isinstance(first_failed[0], SetlError)
    assert "reader ipv4:reader2 took this subscription over at" in str(first_failed[0])
    assert "one reader at a time" in str(first_failed[0])
    put(box, 5)
    assert next(batches).batch_id == 5 and len(network.calls) == 2  # no one came back
    second.close(0)
    stop.set()


def test_a_look_never_takes_a_reader_s_place(network: Network) -> None:
    acked: list[int] = []
    box = outbox(network, 3, acked)
    put(box, 1, 2)
    look = network.subscriber(look=True)
    looked = iter(look)
    assert next(looked).batch_id == 1  # no reader: a look reads what is not acknowledged
    with pytest.raises(ConfigError, match="acknowledges nothing"):
        look.ack(1)
    reader = network.subscriber()
    batches = iter(reader)
    assert next(batches).batch_id == 1  # a reader takes a look's place
    with pytest.raises(SetlError, match="took this subscription over"):
        for batch in looked:
            assert batch.batch_id == 2  # (sent to it before the reader came)
    other = network.subscriber(look=True)
    with pytest.raises(SetlError, match="a look never takes a reader's place"):
        next(iter(other))
    reader.ack(1)
    assert next(batches).batch_id == 2  # the reader read on
    wait(lambda: acked == [100], "the reader's ack stored")
    reader.close(0)


def test_a_batch_of_an_earlier_run_is_not_acknowledged_on_the_next(network: Network) -> None:
    """A pipeline retried on the same node numbers its batches from the acknowledged one
    again, with other cuts (same epoch): an ack of an old batch object names its stream, so
    it neither goes out from the client nor, sent anyway, is taken by the node."""
    acked: list[int] = []
    old = outbox(network, 3, acked)
    put(old, 1, 2)
    with network.subscriber() as feed:
        batches = iter(feed)
        kept = [next(batches), next(batches)]  # handled: the app holds on to them
        old.close("pipeline c.p stopped on this node")
        network.boxes.remove(old)
        new = outbox(network, 3, acked, ends=1000)  # the retry cuts its batches further on
        put(new, 1, 2)
        assert next(batches).batch_id == 1 and next(batches).batch_id == 2
        assert feed.connects == 2 and kept[1].epoch == EPOCH
        feed.ack(kept[1])  # the old run's batch 2 (ends at 200; the new one at 2000)
        time.sleep(0.2)
        assert acked == []
    # a client that sent it anyway is refused
    new.close("done")
    network.boxes.remove(new)
    box = outbox(network, 3, acked)
    put(box, 1)
    requests: queue.Queue[pb.SubscribeRequest | None] = queue.Queue()
    requests.put(pb.SubscribeRequest(start=pb.SubscribeStart(channel="c", pipeline="p")))
    call = Call(network.boxes, subscriber._drain(requests), "ipv4:old")
    received = iter(call)
    next(received)
    assert next(received).batch_id == 1
    requests.put(pb.SubscribeRequest(ack=pb.SubscribeAck(batch_id=1, stream=kept[1].stream)))
    with pytest.raises(Status, match="of the stream you read") as refused:
        list(received)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION and acked == []


def test_zookeeper_not_answering_the_manager_is_retried_by_the_reader(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def relay(*args: Any) -> Iterator[bytes]:
        raise ZooKeeperUnavailableError("ZooKeeper did not answer to read a pipeline owner")
        yield b""

    monkeypatch.setattr(service.subscribe, "relay", relay)
    servicer = object.__new__(service.ManagerServicer)
    servicer.election = type("Leader", (), {"is_leader": True})()  # type: ignore[assignment]
    servicer.catalog = servicer.views = servicer.node_access = None  # type: ignore[assignment]
    servicer.views = type("Views", (), {"client": None, "paths": None})()  # type: ignore[assignment]
    servicer.readers = rpcserver.Readers(1, "this manager")
    with pytest.raises(Status) as found:
        list(servicer.Subscribe(iter(()), Context("r")))
    assert found.value.code() == grpc.StatusCode.UNAVAILABLE  # in subscriber._AGAIN
    assert "connects again" in found.value.details()
