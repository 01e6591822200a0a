"""``setl-manager``: the gRPC admin API over the definitions in ZooKeeper, with leader
election among several managers."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from concurrent import futures

import grpc

from manager.election import LeaderElection
from manager.service import ManagerServicer
from manager.views import Views
from shared import confinement, logs, settings, zk
from shared.catalog import Catalog
from shared.errors import SetlError, ZooKeeperUnavailableError
from shared.lifecycle import Shutdown, run_bounded
from shared.rpc import manager_pb2_grpc

log = logging.getLogger("setl.manager")
STOP_ZOOKEEPER_S = 2.0  # giving up the leadership on the way out waits at most this long


def serve(config: settings.ManagerSettings, shutdown: Shutdown) -> None:
    client = zk.client(config.zookeeper)
    if not zk.start(client, config.zookeeper, shutdown.requested):
        log.info("event=manager_stopped listen=%s reason=\"stopped while waiting for "
                 "ZooKeeper\"", config.listen)
        return
    paths = zk.ZkPaths(config.zookeeper.root)
    catalog = Catalog(client, paths)
    election = LeaderElection(client, paths.leader, config.address)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    manager_pb2_grpc.add_ManagerServiceServicer_to_server(
        ManagerServicer(catalog, Views(client, paths, catalog), election, config.address), server)
    try:
        if server.add_insecure_port(config.listen) == 0:
            raise SetlError(f"cannot listen on {config.listen}: the address is taken or "
                            "invalid; choose another with --listen")
        if not _prepare(catalog, shutdown):
            return
        election.start()  # before serving: the first answer already knows who leads
        server.start()
        log.info("event=manager_started listen=%s zk=%s root=%s", config.listen,
                 config.zookeeper.hosts, config.zookeeper.root)
        shutdown.wait()
    finally:
        server.stop(grace=2).wait()
        if not run_bounded(election.stop, STOP_ZOOKEEPER_S, "election-stop"):
            log.warning("event=zk_goodbye_skipped waited_s=%g", STOP_ZOOKEEPER_S)
        zk.close(client)
        log.info("event=manager_stopped listen=%s", config.listen)


def _prepare(catalog: Catalog, shutdown: Shutdown) -> bool:
    """Create setl's layout, waiting while ZooKeeper is away; False if asked to stop."""
    while not shutdown.requested.is_set():
        try:
            catalog.ensure_layout()
            return True
        except ZooKeeperUnavailableError as exc:
            log.warning("event=zk_unavailable step=layout error=%s", exc)
            shutdown.wait(1.0)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="setl-manager", description=__doc__)
    parser.add_argument("--config", help="manager YAML (default: built-in defaults)")
    parser.add_argument("--listen", help="host:port for the gRPC API (overrides the config)")
    args = parser.parse_args(argv)
    try:
        config = settings.load_manager(args.config)
        if args.listen:
            config = dataclasses.replace(config, listen=args.listen)
        confinement.confine(config.security)
        logs.setup(config.log_level)
        serve(config, Shutdown().install())
    except SetlError as exc:
        print(f"setl-manager: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
