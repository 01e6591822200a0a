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

import grpc
from kazoo.exceptions import KazooException

from node import compiled, service
from node.membership import Membership
from node.metrics import NODE
from node.service import NodeServicer
from node.spark import SparkRunner
from node.supervisor import Supervisor
from node.verify import rpc as verify
from node.watcher import DefinitionWatcher, Stored
from shared import confinement, heap, logs, rpcauth, rpcserver, settings, zk
from shared.catalog import Catalog
from shared.errors import ConfigError, CoordinationError, SetlError, ZooKeeperUnavailableError
from shared.httpserver import HttpServer, is_loopback
from shared.lifecycle import Shutdown, leave, run_bounded
from shared.rpc import manager_pb2
from shared.secrets import SecretRef
from shared.version import version

log = logging.getLogger("setl.node")


# How long each step of a stop may take at most, so that SIGTERM ends the node within
# seconds in every state (ZooKeeper or a target gone, Spark starting); what is cut short is
# safe to cut: the position that counts is the target's.
STOP_RUNNERS_S = 8.0  # in-flight batches load, then every runner ends
STOP_ZOOKEEPER_S = 2.0  # final stats, mainstems and the node's entry given up
STOP_SPARK_S = 4.0
STOP_THREADS_S = 2.0  # what still runs after (a worker on a silent target) is left
ZK_UNAVAILABLE_LOG_S = 10.0  # while ZooKeeper is away, the main loop says so this often


NODE_MESSAGES = {
    rpcauth.NO_TOKEN: "this node requires a token: give the manager the nodes' api.token as "
                      "nodes.token in its configuration",
    rpcauth.WRONG_TOKEN: "this node refused the token given: the manager's nodes.token must "
                         "name the nodes' api.token",
}


def rpc_access(config: settings.NodeSettings
               ) -> tuple[rpcauth.TokenCheck | None, grpc.ServerCredentials | None]:
    """The node RPC's token check and TLS; ConfigError when it would listen beyond this
    machine without a token (anyone reaching it could read the sources through verify)."""
    where = config.file or "the node's configuration"
    if not config.api.token and not is_loopback(config.listen):
        raise ConfigError(f"listen {config.listen} is reachable from other machines, but no "
                          "api.token is set, so anyone reaching it could run verify against "
                          f"the sources. Set api.token in {where} (a ${{SETL_...}} or file: "
                          "reference to the token; the manager passes it as nodes.token), "
                          "or listen on 127.0.0.1")
    check = None
    if config.api.token:
        try:
            check = rpcauth.TokenCheck(SecretRef(config.api.token).resolve(
                rules=config.security))
        except ConfigError as exc:
            raise ConfigError(f"{where}: api.token: {exc}") from None
    credentials = rpcauth.server_credentials(config.api.tls) if config.api.tls else None
    return check, credentials


class Node:
    def __init__(self, node_id: int, config: settings.NodeSettings, shutdown: Shutdown) -> None:
        self.node_id, self.config, self.shutdown = node_id, config, shutdown
        self.client = zk.client(config.zookeeper)
        self.paths = zk.ZkPaths(config.zookeeper.root)
        self.catalog = Catalog(self.client, self.paths)
        self.watcher = DefinitionWatcher(self.client, self.paths, self.catalog)
        self.spark = SparkRunner(config.spark)
        self.supervisor = Supervisor(node_id, self.client, self.paths, self.catalog, self.spark,
                                     closing=shutdown.requested)
        self.candidates: list[str] = []
        self.running: list[str] = []
        self._unavailable_said = 0.0

    def _serve_grpc(self) -> tuple[grpc.Server, str]:
        check, credentials = rpc_access(self.config)
        interceptors = [rpcauth.TokenInterceptor(check, messages=NODE_MESSAGES)] if check \
            else []
        # a subscription's reader holds a thread while it reads (service.THREADS - 4 at most)
        server = rpcserver.server(service.THREADS, interceptors, self.config.keepalive)
        service.add(
            NodeServicer(self.node_id, lambda pipeline_id: verify.context_from(
                self.supervisor, self.node_id, pipeline_id, self.spark)), server)
        port = rpcserver.listen(server, self.config.listen, credentials,
                                f"choose another 'listen' address for node {self.node_id}")
        server.start()
        host = self.config.listen.rpartition(":")[0]
        return server, f"{host}:{port}"

    def _serve_metrics(self) -> HttpServer:
        metrics = HttpServer(self.config.metrics.listen, NODE.serve(self._states),
                             f"node {self.node_id}'s metrics (metrics.listen)")
        metrics.start()
        log.info("event=metrics_serving node=%d url=%s/metrics", self.node_id, metrics.url)
        return metrics

    def run(self) -> None:
        server, address = self._serve_grpc()
        metrics = None
        try:
            metrics = self._serve_metrics()
            if self.config.spark.start == "boot":
                # in the background: warm while ZooKeeper connects and a restarted node waits
                # for its previous life's session to end, so its pipelines find it ready
                self.spark.warm()
            if not zk.start(self.client, self.config.zookeeper, self.shutdown.requested):
                run_bounded(self.spark.stop, STOP_SPARK_S, "spark-stop")
                return  # asked to stop while waiting for ZooKeeper
            info = manager_pb2.NodeInfo(id=self.node_id, address=address, pid=os.getpid(),
                                        started_ms=int(time.time() * 1000),
                                        host=socket.gethostname(),
                                        metrics_address=metrics.address)
            membership = Membership(self.client, self.paths, info)
            if self._join(membership):
                heap.settle()  # the node's modules, clients and servers, started
                self._serve(membership)
            else:  # asked to stop before it joined: a Spark warming up goes too
                run_bounded(self.spark.stop, STOP_SPARK_S, "spark-stop")
        finally:
            server.stop(grace=1).wait()
            if metrics is not None:
                metrics.stop()
            zk.close(self.client)
            log.info("event=node_stopped node=%d", self.node_id)

    def _join(self, membership: Membership) -> bool:
        """Register and watch the definitions, waiting while ZooKeeper is away; False if
        asked to stop meanwhile."""
        wait_s = self.config.zookeeper.session_timeout_s + 2
        while not self.shutdown.requested.is_set():
            try:
                membership.register(wait_s=wait_s)
                self.catalog.ensure_layout()
                self.watcher.start()
                return True
            except (KazooException, ZooKeeperUnavailableError) as exc:
                log.warning("event=zk_unavailable node=%d step=register error=%r",
                            self.node_id, exc)
                self.shutdown.wait(1.0)
        return False

    def _serve(self, membership: Membership) -> None:
        modules = compiled.status()  # the stream path's compiled modules, or why not
        pure = [state for state in modules.values() if state != "compiled"]
        log.info("event=node_started node=%d address=%s compiled=%d/%d%s", self.node_id,
                 membership.info.address, len(modules) - len(pure), len(modules),
                 f" hint=\"{pure[0]}\"" if pure else "")
        stored, loaded = Stored([], {}), False
        try:
            while not self.shutdown.requested.is_set():
                try:
                    # read again on a change only: a node with no channels read every
                    # source twice a second
                    if self.watcher.changed.wait(0.5) or not loaded:
                        stored, loaded = self.watcher.snapshot(), True
                    self._refresh(membership, stored)
                except (KazooException, CoordinationError) as exc:
                    self._unavailable(exc)
                    self.watcher.changed.set()  # read the definitions again when it answers
                    self.shutdown.wait(0.5)
        finally:
            log.info("event=node_stopping node=%d", self.node_id)
            self._stop(membership)

    def _stop(self, membership: Membership) -> None:
        """Stop without waiting on ZooKeeper or Spark for more than a few seconds."""
        stopped = self.supervisor.stop_all(STOP_RUNNERS_S)
        if self.client.connected:
            def goodbye() -> None:
                self.supervisor.goodbye(stopped)
                membership.leave()
            if not run_bounded(goodbye, STOP_ZOOKEEPER_S, "zk-goodbye"):
                log.warning("event=zk_goodbye_skipped node=%d waited_s=%g", self.node_id,
                            STOP_ZOOKEEPER_S)
        else:
            log.warning("event=zk_goodbye_skipped node=%d reason=\"ZooKeeper unavailable\" "
                        "hint=\"its entries go when the session expires\"", self.node_id)
        if not run_bounded(self.spark.stop, STOP_SPARK_S, "spark-stop"):
            log.warning("event=spark_stop_abandoned node=%d waited_s=%g", self.node_id,
                        STOP_SPARK_S)

    def _unavailable(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._unavailable_said >= ZK_UNAVAILABLE_LOG_S:
            self._unavailable_said = now
            log.warning("event=zk_unavailable node=%d running=%s error=%s hint=\"pipelines "
                        "keep running; nothing starts until ZooKeeper answers\"", self.node_id,
                        ",".join(self.supervisor.running()) or "-",
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    def _states(self) -> list[manager_pb2.PipelineState]:
        return [runner.snapshot() for runner, _ in list(self.supervisor.runners.values())]

    def _refresh(self, membership: Membership, stored: Stored) -> None:
        """Run what should run, publish stats and report candidates (every half second)."""
        records = stored.records
        self.supervisor.reconcile(records, stored.sources)
        self.supervisor.publish_all()
        candidates = sorted(record.channel.pipeline_id(pipeline)
                            for record in records for pipeline in record.channel.pipelines
                            if pipeline.is_candidate(self.node_id))
        running = self.supervisor.running()
        if (candidates, running) != (self.candidates, self.running) and self.client.connected:
            log.info("event=candidates node=%d pipelines=%s running=%s", self.node_id,
                     ",".join(candidates) or "-", ",".join(running) or "-")
            self.candidates, self.running = candidates, running
            membership.update(candidates, running)


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(prog="setl-node", description=__doc__)
    found.add_argument("--version", action="version", version=f"setl-node {version()}")
    found.add_argument("--id", type=int, required=True, help="this node's id (a positive integer)")
    found.add_argument("--config", help="node YAML (default: built-in defaults)")
    return found


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.id < 1:
        parser().error("--id must be a positive integer")
    try:
        config = settings.load_node(args.config)
        confinement.confine(config.security)
        logs.setup(config.log_level)
        logs.log_gc_pauses()
        Node(args.id, config, Shutdown().install()).run()
    except SetlError as exc:
        print(f"setl-node: {exc}", file=sys.stderr)
        return leave(1, STOP_THREADS_S)
    return leave(0, STOP_THREADS_S)


if __name__ == "__main__":
    sys.exit(main())
