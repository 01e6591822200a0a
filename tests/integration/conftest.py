"""Fixtures on real servers: one sandbox (ZooKeeper + MariaDB) per test run, a ZooKeeper root
and daemons per test. Servers bind 127.0.0.1 on free ports and stop when the run ends (a
watchdog stops them even if pytest is killed)."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from kazoo.client import KazooClient

from shared import zk
from shared.sandbox import Sandbox
from shared.settings import ZkSettings
from tests.devcluster import BIN, SESSION_TIMEOUT_S, Cluster, Daemon, Database, serve, wait_for

NOTEWORTHY = re.compile(r" (WARNING|ERROR|CRITICAL) |event=pipeline_(started|stopped|failed)")
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT")


def noteworthy(lines: list[str]) -> list[str]:
    """The warnings, errors and pipeline starts and stops, each error with its traceback
    (the lines after it that carry no timestamp of their own)."""
    kept, tail = [], False
    for line in lines:
        if NOTEWORTHY.search(line):
            kept.append(line)
            tail = " ERROR " in line or " CRITICAL " in line
        elif tail and not TIMESTAMP.match(line):
            kept.append(line)
        else:
            tail = False
    return kept


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed test that ran daemons shows their warnings, errors and pipeline starts and
    stops (the last 80 lines): CI keeps no other trace of them."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    daemons = list(getattr(item, "funcargs", {}).get("daemons") or [])
    running = getattr(item, "funcargs", {}).get("cluster")
    if running is not None:
        daemons += running.daemons
    for daemon in daemons:
        try:
            lines = noteworthy(daemon.output().splitlines())
        except OSError:
            continue
        report.sections.append((f"setl log {daemon.log_path.name}", "\n".join(lines[-150:])))


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path_factory.mktemp("sandbox"))
    box.up(owner_pid=os.getpid())
    box.trust_secret()  # tests open connections in this process too (loaders, lookups)
    yield box
    box.down(purge=True)


@pytest.fixture
def zk_hosts(sandbox: Sandbox) -> str:
    return sandbox.servers()["zookeeper"].address


@pytest.fixture
def zk_root(request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    return f"/setl-test/{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def zk_client(zk_hosts: str, zk_root: str) -> Iterator[KazooClient]:
    client = zk.connect(ZkSettings(zk_hosts, session_timeout_s=SESSION_TIMEOUT_S))
    assert client is not None
    yield client
    client.delete(zk_root, recursive=True)
    zk.close(client)


@pytest.fixture
def daemon_config(tmp_path: Path, zk_hosts: str, zk_root: str,
                  sandbox: Sandbox) -> Callable[[str], Path]:
    """Write a manager or node YAML for this test's ZooKeeper root (reading passwords from
    the sandbox's file); return its path."""
    def write(kind: str, **extra: object) -> Path:
        body = {"zookeeper": {"hosts": zk_hosts, "root": zk_root,
                              "session_timeout_s": SESSION_TIMEOUT_S, "connect_timeout_s": 5},
                "log_level": "info",
                "security": {"secret_dirs": [str(sandbox.secret_file.parent)]}, **extra}
        if kind == "node" and "spark" not in extra:  # tests start many nodes: Spark only
            body["spark"] = {"start": "on_demand"}  # where a pipeline needs it
        path = tmp_path / f"{kind}-{uuid.uuid4().hex[:6]}.yaml"
        path.write_text(yaml.safe_dump(body))
        return path
    return write


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[list[Daemon]]:
    started: list[Daemon] = []
    yield started
    for daemon in started:
        daemon.stop()


@pytest.fixture
def start_manager(daemons: list[Daemon], daemon_config: Callable[..., Path],
                  tmp_path: Path) -> Callable[..., tuple[Daemon, str]]:
    """Start a setl-manager on a free port (``serve``: a port taken meanwhile is a retry on
    another), or on ``address``; return it with its address once it serves."""
    from manager.client import ManagerClient
    from shared.rpc import manager_pb2

    def status(address: str) -> object:
        return ManagerClient([address], timeout_s=1).call("Status", manager_pb2.StatusRequest())

    def launch(address: str) -> Daemon:
        daemon = Daemon([str(BIN / "setl-manager"), "--config", str(daemon_config("manager")),
                         "--listen", address], tmp_path / f"manager-{address[10:]}.log")
        daemons.append(daemon)
        return daemon

    def start(address: str = "") -> tuple[Daemon, str]:
        if address:
            daemon = launch(address)
            wait_for(lambda: status(address), 30, f"manager at {address}")
            return daemon, address
        daemon, port = serve(lambda port: launch(f"127.0.0.1:{port}"),
                             lambda port: status(f"127.0.0.1:{port}"), "the manager")
        return daemon, f"127.0.0.1:{port}"
    return start


@pytest.fixture
def start_node(daemons: list[Daemon], daemon_config: Callable[..., Path],
               tmp_path: Path, zk_client: KazooClient, zk_root: str) -> Callable[..., Daemon]:
    def start(node_id: int, **config: object) -> Daemon:
        daemon = Daemon([str(BIN / "setl-node"), "--id", str(node_id), "--config",
                         str(daemon_config("node", **config))], tmp_path / f"node-{node_id}.log")
        daemons.append(daemon)
        paths = zk.ZkPaths(zk_root)
        wait_for(lambda: zk_client.exists(paths.node(node_id)), 30, f"node {node_id} entry")
        return daemon
    return start


@pytest.fixture(scope="module")
def cluster(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A manager and node 1 (with Spark) shared by the tests of one module."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    running = Cluster(sandbox, tmp_path_factory.mktemp(name), name)
    running.start_manager()
    running.start_node(1)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def source(sandbox: Sandbox) -> Iterator[Database]:
    db = Database(sandbox, "source")
    yield db
    db.close()


@pytest.fixture(scope="module")
def target(sandbox: Sandbox) -> Iterator[Database]:
    db = Database(sandbox, "target")
    yield db
    db.close()
