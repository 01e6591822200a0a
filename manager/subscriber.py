"""A Python client of a subscription: an application reads a subscription channel's source
transactions, whole and in commit order, and acknowledges what it has handled.

    from manager.subscriber import Subscriber

    with Subscriber("orders-feed", managers="10.0.0.5:7310") as feed:
        for batch in feed:                      # a ChangeBatch (shared/rpc/subscription.proto)
            for txn in batch.transactions:
                for change in txn.changes:
                    handle(txn.id, change.index, change)   # (txn.id, index): a change's id
            feed.ack(batch)                     # everything up to this batch is handled

Delivery is at least once: what was not acknowledged comes again after a reconnect (a
restart of the reader, a failover of the node running the subscription), with the same
change ids (from one source server: ``txn.id`` is the binlog file:pos; across a switch of
the source to a promoted replica, compare ``txn.position.gtid``); a reader that stores what
it applied with its own writes applies each change exactly once. The client reconnects by
itself when the subscription moves or a manager fails over, and gives up after
``give_up_s`` without one. After :meth:`Subscriber.rollback` no batch sent before it is
handed on: every batch not acknowledged comes again, in order, first. A subscription has
one reader at a time: a reader taken over by another one raises (it does not come back);
``look=True`` reads without acknowledging and without taking a reader's place (refused
while one reads).
"""

from __future__ import annotations

import queue
import re
import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import grpc

from manager.client import (
    _ERRORS,
    LEADER_TRAILER,
    STANDBY,
    Access,
    ManagerClient,
    addresses_from,
    wait_channel,
)
from shared.errors import ConfigError, ManagerUnavailableError, SetlError
from shared.rpc import manager_pb2, manager_pb2_grpc, model_pb2, subscription_pb2

CLOSE_WAIT_S = 5.0  # how long a closing reader waits for its acknowledgements to be stored
_AGAIN = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED,
          grpc.StatusCode.DEADLINE_EXCEEDED,
          grpc.StatusCode.RESOURCE_EXHAUSTED)  # (a server at its readers: until give_up_s)


class Subscriber:
    def __init__(self, channel: str, pipeline: str = "",
                 managers: str | list[str] | None = None, access: Access | None = None,
                 retry_s: float = 1.0, give_up_s: float = 120.0, start: str = "",
                 look: bool = False) -> None:
        """``start``: move the subscription first to ``latest``, ``FILE:POS`` or a GTID
        (:func:`move`: its channel is stopped and started again, which takes the manager's
        admin token; a reader's own token, ``api.readers``, is refused); by default it goes
        on after what was acknowledged. ``look``: read what is not acknowledged without
        acknowledging anything and without taking the subscription over from its reader
        (refused, raising SetlError, while one reads)."""
        self.channel, self.pipeline, self.start = channel, pipeline, start
        self.addresses = addresses_from(managers) if not isinstance(managers, list) \
            else list(managers)
        self.access = access or Access()
        self.retry_s, self.give_up_s, self.look = retry_s, give_up_s, look
        self.connects = 0  # connections made (a reconnect re-sends what was not acked)
        self._lock = threading.Lock()
        self._requests: queue.Queue[subscription_pb2.SubscribeRequest | None] | None = None
        self._received: list[int] = []  # batch ids received on this connection, not acked
        self._call: Any = None
        self._closed = False
        self._reading = 0  # the thread reading the batches
        self._epoch = 0  # the owner serving this connection (its batch ids)
        self._stream = 0  # this connection's stream on the node (its batch 0 says which)
        self._generation = 0  # its rollbacks: a batch sent before the last one is dropped

    def __enter__(self) -> Subscriber:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def __iter__(self) -> Iterator[subscription_pb2.ChangeBatch]:
        return self.batches()

    def batches(self) -> Iterator[subscription_pb2.ChangeBatch]:
        """Every batch of the subscription from its acknowledged position on, for ever
        (until :meth:`close`); a lost connection is made again and what was not
        acknowledged comes again."""
        self._reading = threading.get_ident()
        if self.start:
            move(ManagerClient(self.addresses, access=self.access), self.channel,
                 self.pipeline, self.start)
            self.start = ""
        failing_since: float | None = None  # no connection since then
        problem = ""
        while not self._closed:
            for address in self._order():
                try:
                    for batch in self._read(address):
                        failing_since = None
                        if not batch.batch_id:
                            continue  # the server's hello (read by _read)
                        try:
                            yield batch
                        except GeneratorExit:  # the reader is done: its acks stored first
                            self._closed = True
                            self._goodbye(CLOSE_WAIT_S)
                            raise
                    problem = "the stream ended"
                except grpc.RpcError as exc:
                    code, details = exc.code(), exc.details() or ""  # type: ignore[attr-defined]
                    if self._closed:
                        return
                    if code == grpc.StatusCode.FAILED_PRECONDITION and \
                            details.startswith(STANDBY):
                        leader = dict(exc.trailing_metadata() or ()).get(  # type: ignore[attr-defined]
                            LEADER_TRAILER)
                        if leader:  # asked first from now on
                            if leader in self.addresses:
                                self.addresses.remove(leader)
                            self.addresses.insert(0, leader)
                        problem = details
                        continue
                    if code not in _AGAIN:
                        raise _ERRORS.get(code, SetlError)(details) from None
                    problem = details
                    if code != grpc.StatusCode.ABORTED:
                        continue  # no answer from this manager: the next one
                finally:
                    self._disconnect()
                break
            if self._closed:
                return
            failing_since = failing_since or time.monotonic()
            if time.monotonic() - failing_since > self.give_up_s:
                raise ManagerUnavailableError(
                    f"subscription {self.channel}: no connection for {self.give_up_s:.0f} s "
                    f"({problem or 'no manager answers'}) at {', '.join(self.addresses)}")
            time.sleep(self.retry_s)

    def ack(self, batch: subscription_pb2.ChangeBatch | int) -> None:
        """Everything up to ``batch`` is handled: the subscription's position moves past it.
        A batch of an earlier connection, or one received before a :meth:`rollback`, is not
        acknowledged (it comes again). An int names a batch of the current connection since
        the last rollback: pass the batch itself where it may be older (its stream is
        checked)."""
        if self.look:
            raise ConfigError(f"subscription {self.channel} is read with look=True, which "
                              "acknowledges nothing: read without look to move it")
        batch_id = batch if isinstance(batch, int) else batch.batch_id
        with self._lock:
            if self._requests is None or batch_id not in self._received or \
                    (not isinstance(batch, int) and
                     (batch.epoch, batch.stream, batch.generation) !=
                     (self._epoch, self._stream, self._generation)):
                return  # a batch of another stream or generation: it comes again
            self._received = [n for n in self._received if n > batch_id]
            self._requests.put(subscription_pb2.SubscribeRequest(
                ack=subscription_pb2.SubscribeAck(batch_id=batch_id, stream=self._stream,
                                                  generation=self._generation)))

    def rollback(self) -> None:
        """Every batch not acknowledged comes again, from the first, before anything else:
        batches received after this call that were sent before it are dropped here."""
        with self._lock:
            if self._requests is not None:
                self._received = []
                self._generation += 1  # the node counts the same
                self._requests.put(subscription_pb2.SubscribeRequest(
                    rollback=subscription_pb2.SubscribeRollback()))

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """End the subscription's stream. Called by the reading thread (or at the end of a
        ``with``), it first waits up to ``wait_s`` for the acknowledgements sent to be
        stored; from another thread it cuts the stream at once."""
        self._closed = True
        if threading.get_ident() == self._reading:
            self._goodbye(wait_s)
        self._disconnect()

    def _goodbye(self, wait_s: float) -> None:
        with self._lock:
            requests, call = self._requests, self._call
            self._requests = None
        if requests is None or call is None:
            return
        requests.put(None)  # our side closed: the server stores what came before, then ends
        timer = threading.Timer(wait_s, call.cancel)
        timer.start()
        try:
            for _ in call:
                pass
        except grpc.RpcError:
            pass
        finally:
            timer.cancel()

    # -- one connection ---------------------------------------------------------------------
    def _order(self) -> list[str]:
        return list(self.addresses)

    def _read(self, address: str) -> Iterator[subscription_pb2.ChangeBatch]:
        requests: queue.Queue[subscription_pb2.SubscribeRequest | None] = queue.Queue()
        requests.put(subscription_pb2.SubscribeRequest(start=subscription_pb2.SubscribeStart(
            channel=self.channel, pipeline=self.pipeline, look=self.look)))
        with self.access.channel(address) as channel:
            call = manager_pb2_grpc.ManagerServiceStub(channel).Subscribe(
                _drain(requests), metadata=self.access.metadata)
            with self._lock:
                self._requests, self._received, self._call = requests, [], call
                self._generation = 0  # (a rollback on this stream counts from here)
                self.connects += 1
            for batch in call:
                with self._lock:
                    if not batch.batch_id:  # the node's hello: whose stream this is
                        self._epoch, self._stream = batch.epoch, batch.stream
                    elif batch.generation != self._generation:
                        continue  # sent before a rollback: it comes again after it
                    else:
                        self._received.append(batch.batch_id)
                yield batch

    def _disconnect(self) -> None:
        with self._lock:
            requests, call = self._requests, self._call
            self._requests, self._call, self._received = None, None, []
        if requests is not None:
            requests.put(None)
        if call is not None:
            call.cancel()


def _drain(requests: queue.Queue[subscription_pb2.SubscribeRequest | None]
           ) -> Iterator[subscription_pb2.SubscribeRequest]:
    while True:
        request = requests.get()
        if request is None:
            return
        yield request


_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_INTERVAL = r"\d+(?:-\d+)?"
_TAGGED = rf"(?:[A-Za-z_][A-Za-z0-9_]{{0,31}}:{_INTERVAL}(?::{_INTERVAL})*)"
# a MySQL GTID set: uuid:interval[:interval…] (8.4: uuid:tag:interval…), comma-separated
_MYSQL_GTIDS = re.compile(rf"{_UUID}(?::{_INTERVAL}|:{_TAGGED})+(?:\s*,\s*{_UUID}"
                          rf"(?::{_INTERVAL}|:{_TAGGED})+)*")
_MARIADB_GTIDS = re.compile(r"\d+-\d+-\d+(?:\s*,\s*\d+-\d+-\d+)*")
_FILE_POS = re.compile(r"(?P<file>[^\s:]+):(?P<pos>\d+)")


def start_request(channel: str, pipeline: str, start: str) -> manager_pb2.PositionsRequest:
    """The request that sets a subscription's position to ``start``: ``latest``, a binlog
    ``FILE:POS`` (``mysql-bin.000003:4``), a MariaDB GTID position (``0-1-100``, one GTID
    per domain, comma-separated) or a MySQL GTID set (``uuid:1-23``). A MySQL GTID of one
    transaction (``uuid:23``, as a transaction's ``position.gtid`` names it) stands for
    everything up to it (``uuid:1-23``): MySQL reads a set as the transactions a reader
    holds, and ``uuid:23`` alone would send 1 to 22 again."""
    request = manager_pb2.PositionsRequest(channel=channel, pipeline=pipeline, action="set",
                                           replay=True)
    text = start.strip()
    if text == "latest":
        request.latest = True
    elif _MYSQL_GTIDS.fullmatch(text):
        request.to.gtid = ",".join(_up_to(part.strip()) for part in text.split(","))
    elif _MARIADB_GTIDS.fullmatch(text):
        request.to.gtid = ",".join(part.strip() for part in text.split(","))
    elif (found := _FILE_POS.fullmatch(text)) and int(found["pos"]) > 0:
        request.to.file, request.to.pos = found["file"], int(found["pos"])
    else:
        raise ConfigError(f"start {start!r} is not a position: give latest, FILE:POS "
                          "(mysql-bin.000003:4), a MariaDB GTID position (0-1-100, one per "
                          "domain: 0-1-100,1-2-7) or a MySQL GTID set "
                          "(3e11fa47-71ca-11e1-9e33-c80aa9429562:1-23)")
    return request


def _up_to(part: str) -> str:
    """One uuid's MySQL GTIDs, a lone transaction number N (of the uuid, or of one of its
    tags) written as 1-N."""
    pieces = part.split(":")
    groups: list[list[str]] = [[pieces[0]]]  # the uuid, then each tag, with their intervals
    for piece in pieces[1:]:
        if piece[0].isdigit():
            groups[-1].append(piece)
        else:
            groups.append([piece])
    return ":".join(":".join([group[0], f"1-{group[1]}"] if len(group) == 2 and
                             group[1].isdigit() else group) for group in groups)


def move(client: ManagerClient, channel: str, pipeline: str, start: str,
         timeout_s: float = 60.0) -> None:
    """Move a subscription to ``start`` (:func:`start_request`): its channel stopped, its
    position set there (what was acknowledged past it comes again), started. When the
    position cannot be set (a binlog file the source purged, a pipeline it does not have),
    the channel is started again where it was and the error raised."""
    request = start_request(channel, pipeline, start)
    client.call("SetChannelStatus", manager_pb2.SetChannelStatusRequest(
        name=channel, status=model_pb2.CHANNEL_STATUS_STOP))
    wait_channel(client, channel, "stop", timeout_s)
    try:
        client.call("Positions", request)
    except Exception as exc:
        try:
            _start(client, channel, timeout_s)
        except Exception as again:
            raise SetlError(f"subscription {channel} not moved to {start}: {exc}; and its "
                            f"channel, stopped for the move, did not start again ({again}): "
                            f"start it with setl channel start {channel}") from exc
        if isinstance(exc, SetlError):  # the same error, saying what became of the channel
            exc.args = (f"subscription {channel} not moved to {start}: {exc} (its channel "
                        "was started again and goes on from where it was)",)
        raise
    _start(client, channel, timeout_s)


def _start(client: ManagerClient, channel: str, timeout_s: float) -> None:
    client.call("SetChannelStatus", manager_pb2.SetChannelStatusRequest(
        name=channel, status=model_pb2.CHANNEL_STATUS_START))
    wait_channel(client, channel, "start", timeout_s)
