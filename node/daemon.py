"""``setl-node --id N``: registers in ZooKeeper, watches definitions, runs its pipelines.

Shutdown in two steps: the first SIGTERM finishes current work and exits; a second aborts.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import time
from concurrent import futures

import grpc

from node.membership import Membership
from node.service import NodeServicer
from node.spark import SparkRunner
from node.supervisor import Supervisor
from node.watcher import DefinitionWatcher
from shared import logs, settings, zk
from shared.catalog import Catalog, ChannelRecord
from shared.errors import SetlError
from shared.lifecycle import Shutdown
from shared.rpc import manager_pb2, node_pb2_grpc

log = logging.getLogger("setl.node")


class Node:
    def __init__(self, node_id: int, config: settings.NodeSettings, shutdown: Shutdown) -> None:
        self.node_id, self.config, self.shutdown = node_id, config, shutdown
        self.client = zk.connect(config.zookeeper.hosts, config.zookeeper.session_timeout_s,
                                 config.zookeeper.connect_timeout_s)
        self.paths = zk.ZkPaths(config.zookeeper.root)
        self.catalog = Catalog(self.client, self.paths)
        self.watcher = DefinitionWatcher(self.client, self.paths, self.catalog)
        self.spark = SparkRunner(config.spark)
        self.supervisor = Supervisor(node_id, self.client, self.paths, self.catalog, self.spark)
        self.candidates: list[str] = []
        self.running: list[str] = []

    def _serve_grpc(self) -> tuple[grpc.Server, str]:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        node_pb2_grpc.add_NodeServiceServicer_to_server(
            NodeServicer(self.node_id, self._states), server)
        port = server.add_insecure_port(self.config.listen)
        if port == 0:
            raise SetlError(f"node {self.node_id} cannot listen on {self.config.listen}; "
                            "choose another 'listen' address")
        server.start()
        host = self.config.listen.rpartition(":")[0]
        return server, f"{host}:{port}"

    def run(self) -> None:
        server, address = self._serve_grpc()
        info = manager_pb2.NodeInfo(id=self.node_id, address=address, pid=os.getpid(),
                                    started_ms=int(time.time() * 1000), host=socket.gethostname())
        membership = Membership(self.client, self.paths, info)
        membership.register(wait_s=self.config.zookeeper.session_timeout_s + 2)
        self.catalog.ensure_layout()
        self.watcher.start()
        log.info("event=node_started node=%d address=%s", self.node_id, address)
        records = []
        try:
            while not self.shutdown.requested.is_set():
                if self.watcher.changed.wait(0.5) or not records:
                    records = self.watcher.snapshot()
                self._refresh(membership, records)
        finally:
            log.info("event=node_stopping node=%d", self.node_id)
            self.supervisor.stop_all()
            membership.leave()
            self.spark.stop()
            server.stop(grace=1).wait()
            zk.close(self.client)
            log.info("event=node_stopped node=%d", self.node_id)

    def _states(self) -> list[manager_pb2.PipelineState]:
        return [runner.snapshot() for runner, _ in list(self.supervisor.runners.values())]

    def _refresh(self, membership: Membership, records: list[ChannelRecord]) -> None:
        """Run what should run, publish stats and report candidates (every half second)."""
        self.supervisor.reconcile(records)
        self.supervisor.publish_all()
        candidates = sorted(record.channel.pipeline_id(pipeline)
                            for record in records for pipeline in record.channel.pipelines
                            if pipeline.is_candidate(self.node_id))
        running = self.supervisor.running()
        if (candidates, running) != (self.candidates, self.running):
            log.info("event=candidates node=%d pipelines=%s running=%s", self.node_id,
                     ",".join(candidates) or "-", ",".join(running) or "-")
            self.candidates, self.running = candidates, running
            membership.update(candidates, running)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="setl-node", description=__doc__)
    parser.add_argument("--id", type=int, required=True, help="this node's id (a positive integer)")
    parser.add_argument("--config", help="node YAML (default: built-in defaults)")
    args = parser.parse_args(argv)
    if args.id < 1:
        parser.error("--id must be a positive integer")
    try:
        config = settings.load_node(args.config)
        logs.setup(config.log_level)
        Node(args.id, config, Shutdown().install()).run()
    except SetlError as exc:
        print(f"setl-node: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
