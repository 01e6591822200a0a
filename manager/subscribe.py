"""The manager's side of a subscription's stream: find the node that runs the
subscription's pipeline, and relay the reader's acks to it and its batches back (as the
bytes they are: :mod:`shared.rawstreams`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import grpc
from kazoo.client import KazooClient

from manager import owners
from manager.client import Access
from manager.views import Views
from shared import rawstreams
from shared.catalog import Catalog
from shared.errors import ConfigError, NodeCallError, NotFoundError, SubscriptionMovedError
from shared.rpc import subscription_pb2
from shared.zk import ZkPaths

log = logging.getLogger("setl.manager.subscribe")
NODE_SUBSCRIBE = "/setl.v1.NodeService/Subscribe"


def relay(catalog: Catalog, views: Views, client: KazooClient, paths: ZkPaths,
          requests: Iterator[subscription_pb2.SubscribeRequest], context: Any,
          access: Access) -> Iterator[bytes]:
    first = next(requests, None)
    if first is None or first.WhichOneof("kind") != "start":
        raise ConfigError("a subscription stream begins with a start (channel, pipeline)")
    start = first.start
    channel = catalog.channel(start.channel).channel
    chosen = [p for p in channel.pipelines if start.pipeline in ("", p.name)]
    if not chosen or (not start.pipeline and len(chosen) > 1):
        raise NotFoundError(f"channel {channel.name} has no pipeline {start.pipeline!r} "
                            f"(it has {', '.join(p.name for p in channel.pipelines)})"
                            if not chosen else f"channel {channel.name} has several pipelines: "
                            "name the one to read (CHANNEL/PIPELINE)")
    pipeline = chosen[0]
    target = catalog.source(pipeline.target)
    if target.type != "subscription":
        raise ConfigError(f"pipeline {channel.pipeline_id(pipeline)} writes "
                          f"{target.name} ({target.type or 'mysql'}), not a subscription: "
                          "define a source of type: subscription and a channel whose "
                          "pipeline has it as its target (docs/subscriptions.md)")
    pipeline_id = channel.pipeline_id(pipeline)
    address = owners.address(views, client, paths, pipeline_id, channel.name,
                             SubscriptionMovedError, "its reader connects again then")
    forwarded = for_node(channel.name, pipeline.name, start, context.peer())
    log.info("event=subscription_relayed pipeline=%s node=%s peer=%s", pipeline_id, address,
             context.peer())

    with access.channel(address) as node:
        call = rawstreams.raw_call(node, NODE_SUBSCRIBE,
                                   subscription_pb2.SubscribeRequest.SerializeToString)(
            forwarding(forwarded, requests), metadata=access.metadata)
        context.add_callback(call.cancel)  # the reader went away: so does the node's stream
        try:
            yield from call
        except grpc.RpcError as exc:
            code, details = exc.code(), exc.details()  # type: ignore[attr-defined]
            if code == grpc.StatusCode.CANCELLED:
                return
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                        grpc.StatusCode.ABORTED):
                raise SubscriptionMovedError(f"the node running pipeline {pipeline_id} "
                                             f"({address}): {details}") from None
            raise NodeCallError(code.name, details) from None


def for_node(channel: str, pipeline: str, start: subscription_pb2.SubscribeStart,
             reader: str) -> subscription_pb2.SubscribeRequest:
    """The start the relay sends the node: the pipeline named in full, the reader's own
    address (``reader``: the node's caller is the relay, and a reader's own ``reader`` is
    not taken), whether it looks."""
    return subscription_pb2.SubscribeRequest(start=subscription_pb2.SubscribeStart(
        channel=channel, pipeline=pipeline, look=start.look, reader=reader))


def forwarding(first: subscription_pb2.SubscribeRequest,
               requests: Iterator[subscription_pb2.SubscribeRequest]
               ) -> Iterator[subscription_pb2.SubscribeRequest]:
    """What the relay sends the node: the start, then the reader's acknowledgements. A
    reader gone (its connection dropped, by keepalive too) ends them: the node's call is
    cancelled beside it, and gRPC's thread reading them would otherwise log each end as an
    error with its traceback ("Exception iterating requests!")."""
    yield first
    try:
        yield from requests
    except grpc.RpcError:
        log.info("event=subscription_reader_gone channel=%s pipeline=%s", first.start.channel,
                 first.start.pipeline)
