"""``setl-manager``: the gRPC admin API over the definitions in ZooKeeper, with leader
election among several managers."""

from __future__ import annotations

import argparse
import logging
import sys
from concurrent import futures

import grpc

from manager.election import LeaderElection
from manager.service import ManagerServicer
from manager.views import Views
from shared import logs, settings, zk
from shared.catalog import Catalog
from shared.errors import SetlError
from shared.lifecycle import Shutdown
from shared.rpc import manager_pb2_grpc

log = logging.getLogger("setl.manager")


def serve(config: settings.ManagerSettings, shutdown: Shutdown) -> None:
    client = zk.connect(config.zookeeper.hosts, config.zookeeper.session_timeout_s,
                        config.zookeeper.connect_timeout_s)
    paths = zk.ZkPaths(config.zookeeper.root)
    catalog = Catalog(client, paths)
    catalog.ensure_layout()
    election = LeaderElection(client, paths.leader, config.address)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    manager_pb2_grpc.add_ManagerServiceServicer_to_server(
        ManagerServicer(catalog, Views(client, paths, catalog), election, config.address), server)
    if server.add_insecure_port(config.listen) == 0:
        zk.close(client)
        raise SetlError(f"cannot listen on {config.listen}: the address is taken or invalid; "
                        "choose another with --listen")
    server.start()
    election.start()
    log.info("event=manager_started listen=%s zk=%s root=%s", config.listen,
             config.zookeeper.hosts, config.zookeeper.root)
    try:
        shutdown.wait()
    finally:
        server.stop(grace=2).wait()
        election.stop()
        zk.close(client)
        log.info("event=manager_stopped listen=%s", config.listen)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="setl-manager", description=__doc__)
    parser.add_argument("--config", help="manager YAML (default: built-in defaults)")
    parser.add_argument("--listen", help="host:port for the gRPC API (overrides the config)")
    args = parser.parse_args(argv)
    try:
        config = settings.load_manager(args.config)
        if args.listen:
            config = settings.ManagerSettings(args.listen, config.advertise, config.zookeeper,
                                              config.log_level)
        logs.setup(config.log_level)
        serve(config, Shutdown().install())
    except SetlError as exc:
        print(f"setl-manager: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
