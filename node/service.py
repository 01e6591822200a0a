"""The gRPC ``NodeService`` of one node: what it runs, for the manager and peers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.rpc import manager_pb2, node_pb2, node_pb2_grpc


class NodeServicer(node_pb2_grpc.NodeServiceServicer):
    def __init__(self, node_id: int,
                 pipeline_states: Callable[[], list[manager_pb2.PipelineState]]) -> None:
        self.node_id, self.pipeline_states = node_id, pipeline_states

    def Stats(self, request: Any, context: Any) -> node_pb2.StatsResponse:
        return node_pb2.StatsResponse(node_id=self.node_id, pipelines=self.pipeline_states())
