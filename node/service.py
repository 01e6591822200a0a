"""The gRPC ``NodeService`` of one node: ``setl verify`` of the pipelines it runs
(:mod:`node.verify.rpc`) and the readers of its subscriptions
(:mod:`node.target.subscription.outbox`). What a node runs, the manager reads from
ZooKeeper."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc

from node.target.subscription import outbox
from node.verify import rpc as verify
from node.verify.run import Context
from shared import rawstreams, rpcserver
from shared.rpc import manager_pb2, node_pb2_grpc, subscription_pb2

THREADS = 16  # the node's gRPC threads: 4 kept from subscription readers for verify


class NodeServicer(node_pb2_grpc.NodeServiceServicer):
    def __init__(self, node_id: int,
                 verify_context: Callable[[str], Context] | None = None,
                 readers: rpcserver.Readers | None = None) -> None:
        self.node_id, self.verify_context = node_id, verify_context
        self.readers = readers or rpcserver.Readers(THREADS - 4, f"node {node_id}")

    def Verify(self, request: manager_pb2.VerifyRequest,
               context: Any) -> Iterator[manager_pb2.VerifyProgress]:
        if self.verify_context is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"node {self.node_id} runs no "
                          "pipelines here: verify is not served")
        yield from verify.stream(request, context, self.verify_context)

    def Subscribe(self, requests: Iterator[subscription_pb2.SubscribeRequest],
                  context: Any) -> Iterator[bytes]:
        """Serialized ChangeBatch messages, sent as they are (:func:`add`)."""
        first = next(requests, None)
        if first is None or first.WhichOneof("kind") != "start":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a subscription stream begins with "
                          "a start (channel, pipeline)")
        with self.readers.held(context):
            yield from outbox.serve(first.start, requests, context)


def add(servicer: NodeServicer, server: grpc.Server) -> None:
    """The service on ``server``; Subscribe sends its batches' bytes unchanged."""
    rawstreams.add(node_pb2_grpc.add_NodeServiceServicer_to_server, servicer, server,
                   {"Subscribe"})
