"""The manager's relay of a subscription: what it forwards to the node ends quietly when the
reader is gone (its connection dropped: a keepalive that went unanswered, a reader killed),
instead of gRPC logging the end as an error with its traceback."""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from manager.subscribe import forwarding
from shared.rpc import subscription_pb2 as pb

START = pb.SubscribeRequest(start=pb.SubscribeStart(channel="c", pipeline="p"))
ACK = pb.SubscribeRequest(ack=pb.SubscribeAck(batch_id=7))


def test_the_start_then_the_readers_requests_are_forwarded() -> None:
    assert list(forwarding(START, iter([ACK, ACK]))) == [START, ACK, ACK]


def test_a_reader_gone_ends_the_forwarded_requests_without_an_error() -> None:
    def dropped() -> Iterator[pb.SubscribeRequest]:
        yield ACK
        raise grpc.RpcError()  # (what gRPC's request iterator raises once the call ended)
    assert list(forwarding(START, dropped())) == [START, ACK]
