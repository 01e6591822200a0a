"""The manager's side of ``setl verify``: find the node that runs each pipeline of the
channel (its ``mainstem`` znode names it, its entry under ``nodes/`` gives its address),
forward the request there and relay the stream of progress and reports to the CLI.

Verify runs on that node because it needs what only the owner has: the pipeline's loaded
position as Load confirms it (a key is re-checked once the pipeline has loaded past the
source's read), its Spark session, and the rights to read its databases.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

import grpc
from kazoo.client import KazooClient

from manager import owners
from manager.client import Access
from manager.views import Views
from shared import codec
from shared.catalog import Catalog
from shared.errors import NodeCallError, NotFoundError, VerifyError
from shared.model import MediaPair, Pipeline
from shared.rpc import manager_pb2, node_pb2_grpc
from shared.zk import ZkPaths

log = logging.getLogger("setl.manager.verify")


def forward(catalog: Catalog, views: Views, client: KazooClient, paths: ZkPaths,
            request: manager_pb2.VerifyRequest, context: Any, access: Access | None = None
            ) -> Iterator[manager_pb2.VerifyProgress]:
    """Each chosen pipeline's verify, on its node, one after the other."""
    channel = catalog.channel(request.channel).channel
    pipelines = [p for p in channel.pipelines if not request.pipeline or p.name == request.pipeline]
    if not pipelines:
        raise NotFoundError(f"channel {channel.name} has no pipeline {request.pipeline!r} "
                            f"(it has {', '.join(p.name for p in channel.pipelines)})")
    for pipeline in pipelines:
        if catalog.source(pipeline.target).type == "subscription":
            raise VerifyError(f"pipeline {channel.pipeline_id(pipeline)} feeds a subscription, "
                              "which holds no rows to compare: its reader keeps them (the "
                              "reader can compare its copy with the source itself)")
        pipeline_id = channel.pipeline_id(pipeline)
        address = owners.address(views, client, paths, pipeline_id, channel.name, VerifyError,
                                 "verify runs on the node that runs the pipeline")
        one = manager_pb2.VerifyRequest()
        one.CopyFrom(request)
        one.pipeline = pipeline.name
        one.shared_targets[:] = shared_targets(catalog, pipeline_id, pipeline)
        one.other_pairs.extend(codec.to_proto(pair) for pair in
                               other_pairs(catalog, pipeline_id, pipeline))
        log.info("event=verify_forwarded pipeline=%s node=%s", pipeline_id, address)
        yield from _relay(address, one, context, pipeline_id, access or Access())


def shared_targets(catalog: Catalog, pipeline_id: str, pipeline: Pipeline) -> list[str]:
    """The tables ``pipeline`` writes that another pipeline (of any channel) writes rows of
    another source table into, as datasource:schema.table: shards of several sources merged
    into one table. Rows there that this pipeline's source does not give are another's, not
    extra. (Another channel copying the same source table there, as a copy made before,
    writes the same rows.)"""
    mine: dict[str, set[str | None]] = {}
    for pair in pipeline.pairs:
        if (target := _target(pair)) is not None:
            mine.setdefault(target, set()).add(_source(pipeline, pair))
    return sorted({target for record in catalog.channels()
                   for other in record.channel.pipelines
                   if record.channel.pipeline_id(other) != pipeline_id
                   for pair in other.pairs
                   if (target := _target(pair)) in mine and
                   _source(other, pair) not in mine[target]})


def other_pairs(catalog: Catalog, pipeline_id: str, pipeline: Pipeline) -> list[MediaPair]:
    """The pairs of other pipelines (of any channel) into a target data source
    ``pipeline`` writes, each with its pipeline's source as its source's data source: the
    node resolves their patterns against the tables it compares (a whole schema copied by
    a template pair writes the table another pipeline's shards go into as well), which
    ``shared_targets`` cannot (it knows tables named one by one only)."""
    into = {pipeline.target} | {pair.target.datasource for pair in pipeline.pairs}
    return [dataclasses.replace(pair, source=dataclasses.replace(pair.source,
                                                                 datasource=other.source))
            for record in catalog.channels() for other in record.channel.pipelines
            if record.channel.pipeline_id(other) != pipeline_id
            for pair in other.pairs if pair.target.datasource in into]


def _target(pair: MediaPair) -> str | None:
    """A pair's target as datasource:schema.table, when it names one table."""
    return _named(pair.target.one_table)


def _source(pipeline: Pipeline, pair: MediaPair) -> str | None:
    """A pair's source table as datasource:schema.table, when it names one (None: a
    pattern, which may be any)."""
    one = pair.source.one_table
    return None if one is None else _named((pipeline.source, one[1], one[2]))


def _named(table: tuple[str, str, str] | None) -> str | None:
    return None if table is None else f"{table[0]}:{table[1]}.{table[2]}"


def _relay(address: str, request: manager_pb2.VerifyRequest, context: Any,
           pipeline_id: str, access: Access) -> Iterator[manager_pb2.VerifyProgress]:
    """The node's answer, asked with the nodes' token and over their TLS (nodes.token,
    nodes.ca in the manager's configuration) when they have them."""
    with access.channel(address) as channel:
        stream = node_pb2_grpc.NodeServiceStub(channel).Verify(request,
                                                               metadata=access.metadata)
        context.add_callback(stream.cancel)  # the CLI went away: so does the node's run
        try:
            yield from stream
        except grpc.RpcError as exc:
            code, details = exc.code(), exc.details()  # type: ignore[attr-defined]
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise VerifyError(f"the node running pipeline {pipeline_id} ({address}) "
                                  f"does not answer: {details}") from None
            if code == grpc.StatusCode.CANCELLED:
                return
            raise NodeCallError(code.name, details) from None
