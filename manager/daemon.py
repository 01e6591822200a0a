"""``setl-manager``: the gRPC admin API over the definitions in ZooKeeper, with leader
election among several managers."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import ssl
import sys

from manager import auth, service
from manager.alarms import AlarmEvaluator
from manager.election import LeaderElection
from manager.metrics import ManagerMetrics
from manager.monitor import Monitor
from manager.service import ManagerServicer
from manager.views import Views
from manager.web import StatusSite
from manager.webhooks import Notifier
from shared import confinement, logs, rpcserver, settings, zk
from shared.catalog import Catalog
from shared.errors import ConfigError, SetlError, ZooKeeperUnavailableError
from shared.httpserver import HttpServer
from shared.lifecycle import Shutdown, leave, run_bounded
from shared.version import version

log = logging.getLogger("setl.manager")
STOP_ZOOKEEPER_S = 2.0  # giving up the leadership on the way out waits at most this long
STOP_THREADS_S = 2.0  # what still runs after (a verify on a silent server) is left
MANAGER_THREADS = 32  # the API's gRPC threads: 8 kept from subscription readers for the rest


def serve(config: settings.ManagerSettings, shutdown: Shutdown) -> None:
    # everything a reference or a file can get wrong fails here, before ZooKeeper
    check = auth.resolve_token(config)
    readers = auth.resolve_readers(config, check)
    metrics = ManagerMetrics()
    notifier = Notifier(config.alarms.webhooks, config.address, config.security,
                        sent=lambda outcome: metrics.notifications.labels(outcome).inc())
    credentials = auth.server_credentials(config.api.tls) if config.api.tls else None
    node_access = auth.node_access(config)
    client = zk.client(config.zookeeper)
    if not zk.start(client, config.zookeeper, shutdown.requested):
        log.info("event=manager_stopped listen=%s reason=\"stopped while waiting for "
                 "ZooKeeper\"", config.listen)
        return
    paths = zk.ZkPaths(config.zookeeper.root)
    catalog = Catalog(client, paths)
    views = Views(client, paths, catalog)
    election = LeaderElection(client, paths.leader, config.address)
    monitor = Monitor(client, paths, views, election, AlarmEvaluator(config.alarms.rules),
                      notifier, config.web)
    metrics.watch(monitor, lambda: election.is_leader)
    web = HttpServer(config.web.listen, StatusSite(
        monitor, metrics, lambda: _role(config, election), check,
        secure=config.api.tls is not None).handle, "the status page (web.listen)",
        _web_tls(config.api.tls))
    interceptors = [auth.ApiInterceptor(
        check, readers, lambda reason: metrics.refused.labels(reason).inc())] if check else []
    # (a subscription's reader holds a thread while it reads: see rpcserver.Readers)
    server = rpcserver.server(MANAGER_THREADS, interceptors, config.keepalive)
    servicer = ManagerServicer(catalog, views, election, config.address, monitor, node_access,
                               rpcserver.Readers(MANAGER_THREADS - 8, "this manager"))
    service.add(servicer, server)
    try:
        rpcserver.listen(server, config.listen, credentials, "choose another with --listen")
        web.start()  # bound before leading: a taken port ends the manager here
        servicer.web_url = f"{web.url}/"
        if not _prepare(catalog, shutdown):
            return
        election.start()  # before serving: the first answer already knows who leads
        monitor.start()
        server.start()
        log.info("event=manager_started listen=%s tls=%s token=%s readers=%d web=%s zk=%s "
                 "root=%s", config.listen, "yes" if credentials else "no",
                 "yes" if check else "no", len(readers),
                 servicer.web_url, config.zookeeper.hosts, config.zookeeper.root)
        shutdown.wait()
    finally:
        server.stop(grace=2).wait()
        web.stop()
        monitor.stop()
        if not run_bounded(election.stop, STOP_ZOOKEEPER_S, "election-stop"):
            log.warning("event=zk_goodbye_skipped waited_s=%g", STOP_ZOOKEEPER_S)
        zk.close(client)
        log.info("event=manager_stopped listen=%s", config.listen)


def _role(config: settings.ManagerSettings, election: LeaderElection) -> str:
    if election.is_leader:
        return f"manager {config.address} (leader)"
    return f"manager {config.address} (standby; leader: {election.leader_address() or '?'})"


def _web_tls(tls: settings.TlsSettings | None) -> ssl.SSLContext | None:
    """The page is served over TLS with the API's certificate when the API has one."""
    if tls is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(tls.cert, tls.key)
        if tls.client_ca is not None:
            context.load_verify_locations(tls.client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"api.tls: cannot use {tls.cert} and {tls.key}: {exc}") from None
    return context


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


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(prog="setl-manager", description=__doc__)
    found.add_argument("--version", action="version", version=f"setl-manager {version()}")
    found.add_argument("--config", help="manager YAML (default: built-in defaults)")
    found.add_argument("--listen", help="host:port for the gRPC API (overrides the config)")
    return found


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        config = settings.load_manager(args.config)
        if args.listen:
            config = dataclasses.replace(config, listen=args.listen)
        problem = auth.exposure_problem(config)
        if problem:
            raise ConfigError(problem)
        confinement.confine(config.security)
        logs.setup(config.log_level)
        if not config.security.credentials:  # the operator's choice, said once at start
            log.warning("event=credentials_unbound detail=security.credentials is empty: a "
                        "definition may send any password reference it may read to any "
                        "database host; bind each to its hosts (docs/security.md)")
        serve(config, Shutdown().install())
    except SetlError as exc:
        print(f"setl-manager: {exc}", file=sys.stderr)
        return leave(1, STOP_THREADS_S)
    return leave(0, STOP_THREADS_S)


if __name__ == "__main__":
    sys.exit(main())
