"""What the manager shows: channels with their status and pipelines, and live nodes.

Everything is read from ZooKeeper at the time of the call: definitions and status from the
catalog, node entries from ``nodes/``, pipeline owners and stats from ``pipelines/``.
"""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from shared import codec, positions
from shared.catalog import Catalog, ChannelRecord, call
from shared.model import Channel
from shared.rpc import manager_pb2, model_pb2
from shared.zk import ZkPaths


def _enum(status: object) -> int:
    return model_pb2.ChannelStatus.Value(f"CHANNEL_STATUS_{status.value}")  # type: ignore[attr-defined]


class Views:
    def __init__(self, client: KazooClient, paths: ZkPaths, catalog: Catalog) -> None:
        self.client, self.paths, self.catalog = client, paths, catalog

    def nodes(self) -> list[manager_pb2.NodeInfo]:
        try:
            ids = call("list nodes", self.client.get_children, self.paths.nodes)
        except NoNodeError:
            return []
        nodes = []
        for node_id in sorted(ids, key=lambda text: int(text) if text.isdigit() else 0):
            try:
                data, _ = call("read a node", self.client.get, self.paths.node(node_id))
            except NoNodeError:
                continue
            info = manager_pb2.NodeInfo()
            info.ParseFromString(data)
            nodes.append(info)
        return nodes

    def channel(self, record: ChannelRecord,
                nodes: list[manager_pb2.NodeInfo] | None = None) -> manager_pb2.ChannelInfo:
        nodes = self.nodes() if nodes is None else nodes
        info = manager_pb2.ChannelInfo(channel=codec.to_proto(record.channel),
                                       status=_enum(record.status), version=record.version,
                                       updated_ms=record.updated_ms)
        for pipeline in record.channel.pipelines:
            info.pipelines.append(self._pipeline(record.channel, pipeline, nodes))
        return info

    def _pipeline(self, channel: Channel, pipeline: object,
                  nodes: list[manager_pb2.NodeInfo]) -> manager_pb2.PipelineState:
        pipeline_id = channel.pipeline_id(pipeline)  # type: ignore[arg-type]
        state = manager_pb2.PipelineState()
        try:
            data, _ = call("read pipeline stats", self.client.get,
                           self.paths.stats(pipeline_id))
            state.ParseFromString(data)
        except NoNodeError:
            state.state = "not running"
        state.pipeline_id = pipeline_id
        try:
            owner, _ = call("read a pipeline owner", self.client.get,
                            self.paths.mainstem(pipeline_id))
            state.owner_node = int(owner.decode() or 0)
        except NoNodeError:
            state.owner_node = 0
            if state.state not in ("failed",):
                state.state = "not running"
        state.candidate_nodes[:] = [node.id for node in nodes
                                    if pipeline_id in node.candidate_pipelines]
        if not state.position.file and not state.position.gtid:  # where it (re)starts
            stored = call("read a pipeline cursor", positions.load, self.client,
                          self.paths.cursor(pipeline_id))
            if stored is not None:
                state.position.file, state.position.pos = stored.position.file, \
                    stored.position.pos
                state.position.gtid = stored.position.gtid
        return state

    def channels(self, nodes: list[manager_pb2.NodeInfo] | None = None
                 ) -> list[manager_pb2.ChannelInfo]:
        nodes = self.nodes() if nodes is None else nodes
        return [self.channel(record, nodes) for record in self.catalog.channels()]
