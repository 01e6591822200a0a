"""A small local setl cluster on the sandbox, for tests and benchmarks: its own ZooKeeper
root, a manager and nodes as subprocesses (killed with the parent), and helpers to create
schemas on the sandbox MariaDBs and compare tables."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pymysql
import yaml

from shared.identifiers import qualified
from shared.rpc import manager_pb2, manager_pb2_grpc, model_pb2
from shared.sandbox import Sandbox, dying_with_parent, free_port
from shared.sandbox_servers import ZooKeeperKind, listens

SESSION_TIMEOUT_S = 4
T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def wait_for(check: Callable[[], T], timeout_s: float = 20.0, what: str = "condition",
             interval_s: float = 0.1) -> T:
    """Poll ``check`` until it returns something truthy; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # keep polling; the last error is reported
            last_error = exc
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}"
                         + (f" (last error: {last_error!r})" if last_error else ""))


def serve(start: Callable[[int], Daemon], ready: Callable[[int], object], name: str,
          timeout_s: float = 30, port_for: Callable[[int], int] = lambda attempt: free_port()
          ) -> tuple[Daemon, int]:
    """Start a test's server on a free port (``start(port)``) and wait until it answers there
    (``ready(port)``) on a socket of its own. A free port can be taken between the probe and
    the server's bind, by another test's server, which would then answer this test's calls:
    the server fails to bind and exits, and it is started again on another port
    (``port_for(attempt)``), three times in all."""
    for attempt in range(3):
        port = port_for(attempt)
        daemon = start(port)

        def settled(daemon: Daemon = daemon, port: int = port) -> object:
            return not daemon.alive() or (listens(daemon.pid, port) and ready(port))

        wait_for(settled, timeout_s, f"{name} on 127.0.0.1:{port}")
        if daemon.alive():
            return daemon, port
        daemon.stop()
    raise RuntimeError(f"{name} did not start: see {daemon.log_path}")


class Daemon:
    """A setl-manager or setl-node subprocess with its log file."""

    def __init__(self, args: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.args, self.log_path = args, log_path
        self.log = open(log_path, "ab")
        self.process = subprocess.Popen(
            dying_with_parent(args), stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=ROOT, env={**os.environ, **(env or {})})

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """kill -9: no clean-up at all."""
        if self.alive():
            self.process.kill()
        self.process.wait(10)

    def terminate(self, timeout_s: float = 20.0) -> int:
        if self.alive():
            self.process.terminate()
        return self.process.wait(timeout_s)

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()



class LaggingCursor:
    """A restart made to begin behind its targets, as when a kill falls between their
    commits and the cursor's publish: the pipeline's cursor saved while the node is dead
    (:meth:`save`), and put back at a later restart (:meth:`put_back`)."""

    def __init__(self, client: Any, root: str, pipeline_id: str) -> None:
        from shared.zk import ZkPaths

        self.client, self.pipeline_id = client, pipeline_id
        self.path = ZkPaths(root).cursor(pipeline_id)
        self.saved = b""

    def save(self) -> None:
        self.saved, _ = self.client.get(self.path)

    def put_back(self) -> None:
        assert self.saved, "no cursor was saved"
        self.client.set(self.path, self.saved)

    def moved(self) -> bool:
        """Whether the pipeline loaded past the saved cursor (putting it back then makes a
        restart behind its targets)."""
        assert self.saved, "no cursor was saved"
        return self.client.get(self.path)[0] != self.saved


@contextmanager
def frozen_past_session(daemon: Daemon, exists: Callable[[], object],
                        timeout_s: float = 60.0) -> Iterator[None]:
    """Freeze ``daemon`` (SIGSTOP, as a long GC pause or a VM stall would) until ZooKeeper
    has expired its session, which ``exists`` (the daemon's ephemeral entry) tells; the
    body runs while it is still frozen; it goes on (SIGCONT) when the body ends."""
    os.kill(daemon.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: not exists(), timeout_s, "ZooKeeper to expire the frozen "
                 "daemon's session")
        yield
    finally:
        os.kill(daemon.pid, signal.SIGCONT)


class ZooKeeperServer:
    """A ZooKeeper server of one test's own, for tests that stop and start it (the sandbox's
    is shared by the whole run). Same port and data across restarts, so sessions survive a
    short stop as they do in production; killed with the test run."""

    def __init__(self, datadir: Path) -> None:
        self.datadir, self.port = datadir, free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> None:
        kind = ZooKeeperKind()
        command = dying_with_parent(kind.command(self.datadir, self.port))
        with open(kind.log_file(self.datadir), "ab") as log:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, cwd=self.datadir)
        wait_for(lambda: kind.answers(self.port), timeout_s, f"ZooKeeper on {self.address}")

    def kill(self) -> None:
        """Gone at once, as a crashed server or a cut network (kill -9)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


class Cluster:
    def __init__(self, sandbox: Sandbox, workdir: Path, name: str,
                 log_level: str = "info", spark_master: str = "local[2]",
                 env: dict[str, str] | None = None, zk_hosts: str | None = None,
                 zk_settings: dict[str, Any] | None = None,
                 local_max_rows: int | None = None, spark_start: str = "on_demand",
                 security: dict[str, Any] | None = None,
                 manager_settings: dict[str, Any] | None = None,
                 node_settings: dict[str, Any] | None = None) -> None:
        self.log_level, self.spark_master = log_level, spark_master
        self.local_max_rows = local_max_rows  # None: the node's default
        # tests start many nodes: Spark only where a job needs it (the default is boot)
        self.spark_start = spark_start
        self.env = env  # extra environment of the daemons (e.g. TZ of the node)
        self.zk_hosts = zk_hosts  # default: the sandbox's ZooKeeper
        self.zk_settings = zk_settings or {}  # more of the daemons' zookeeper settings
        self.security = security or {}  # the daemons' security settings (over the default)
        self.manager_settings = manager_settings or {}  # more of the manager's (web, alarms)
        self.node_settings = node_settings or {}  # more of the nodes' (api)
        self.sandbox, self.workdir = sandbox, workdir
        self.root = f"/setl-dev/{name}-{uuid.uuid4().hex[:8]}"
        self.daemons: list[Daemon] = []
        self.nodes: dict[int, Daemon] = {}
        self.manager_address = ""
        self.manager: Daemon | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    # -- daemons ----------------------------------------------------------------------------
    def _config(self, kind: str) -> Path:
        hosts = self.zk_hosts or self.sandbox.servers()["zookeeper"].address
        body = {"zookeeper": {"hosts": hosts,
                              "root": self.root, "session_timeout_s": SESSION_TIMEOUT_S,
                              "connect_timeout_s": 5, **self.zk_settings},
                "log_level": self.log_level,
                # the sandbox's password file is where definitions may read passwords from
                "security": {"secret_dirs": [str(self.sandbox.secret_file.parent)],
                             **self.security}}
        if kind == "manager":
            body.update(self.manager_settings)
        if kind == "node":
            body["spark"] = {"master": self.spark_master, "driver_memory": "512m",
                             "options": {"spark.default.parallelism": "2"},
                             "start": self.spark_start}
            if self.local_max_rows is not None:
                body["spark"]["local_max_rows"] = self.local_max_rows
            body.update(self.node_settings)
        path = self.workdir / f"{kind}.yaml"
        path.write_text(yaml.safe_dump(body))
        return path

    def start_manager(self, wait: bool = True) -> str:
        """Start the manager on a free port; with ``wait``, until it answers there on a socket
        of its own (``serve``: a port taken meanwhile is a retry on another)."""
        def start(port: int) -> Daemon:
            self.manager_address = f"127.0.0.1:{port}"
            daemon = Daemon([str(BIN / "setl-manager"), "--config", str(self._config("manager")),
                             "--listen", self.manager_address], self.workdir / "manager.log",
                            self.env)
            self.daemons.append(daemon)
            self.manager = daemon
            return daemon

        if not wait:
            start(free_port())
        else:
            serve(start, lambda port: self.call("Status", manager_pb2.StatusRequest()),
                  "the manager")
        return self.manager_address

    def wait_manager(self, timeout_s: float = 30) -> None:
        wait_for(lambda: self.call("Status", manager_pb2.StatusRequest()), timeout_s, "manager")

    def start_node(self, node_id: int = 1, wait: bool = True) -> Daemon:
        daemon = Daemon([str(BIN / "setl-node"), "--id", str(node_id), "--config",
                         str(self._config("node"))], self.workdir / f"node-{node_id}.log",
                        self.env)
        self.daemons.append(daemon)
        self.nodes[node_id] = daemon
        if wait:
            self.wait_node(node_id)
        return daemon

    def wait_node(self, node_id: int, timeout_s: float = 30) -> None:
        wait_for(lambda: any(n.id == node_id for n in self.call(
            "ListNodes", manager_pb2.ListNodesRequest()).nodes), timeout_s, f"node {node_id}")

    def stop(self) -> None:
        for daemon in reversed(self.daemons):
            daemon.stop()

    def call(self, method: str, request: Any) -> Any:
        with grpc.insecure_channel(self.manager_address) as channel:
            # a deadline for a manager that hangs, not a speed test: an Apply checks the
            # sources and writes ZooKeeper, which a busy CI machine can hold up for seconds
            return getattr(manager_pb2_grpc.ManagerServiceStub(channel), method)(request,
                                                                                 timeout=30)

    # -- channels ---------------------------------------------------------------------------
    def apply(self, channels: list[dict[str, Any]], sources: list[dict[str, Any]] | None = None
              ) -> None:
        errors = self.apply_errors(channels, sources)
        assert not errors, errors

    def apply_errors(self, channels: list[dict[str, Any]],
                     sources: list[dict[str, Any]] | None = None) -> list[str]:
        """Apply; return the manager's errors (empty when the definitions were stored)."""
        return list(self.apply_answer(channels, sources).errors)

    def apply_answer(self, channels: list[dict[str, Any]],
                     sources: list[dict[str, Any]] | None = None) -> manager_pb2.ApplyResponse:
        """Apply; the manager's whole answer (errors, changes, notes)."""
        secret = f"file:{self.sandbox.secret_file}"
        servers = self.sandbox.servers()
        base = [{"name": name, "host": "127.0.0.1", "port": servers[name].port, "user": "setl",
                 "password": secret} for name in ("source", "target")]
        text = yaml.safe_dump({"sources": sources or base, "channels": channels})
        return self.call("Apply", manager_pb2.ApplyRequest(yaml=text, file="test.yaml"))

    def set_status(self, channel: str, status: str) -> None:
        self.call("SetChannelStatus", manager_pb2.SetChannelStatusRequest(
            name=channel, status=model_pb2.ChannelStatus.Value(f"CHANNEL_STATUS_{status}")))

    def pipeline_state(self, channel: str) -> manager_pb2.PipelineState:
        info = self.call("GetChannel", manager_pb2.GetChannelRequest(name=channel))
        return info.pipelines[0]

    def channel_status(self, channel: str) -> str:
        info = self.call("GetChannel", manager_pb2.GetChannelRequest(name=channel))
        return model_pb2.ChannelStatus.Name(info.status).removeprefix("CHANNEL_STATUS_")

    def wait_running(self, channel: str, timeout_s: float = 90) -> None:
        wait_for(lambda: self.pipeline_state(channel).state == "running", timeout_s,
                 f"channel {channel} to run")


def one_way(name: str, schema: str, tables: list[str], **params: Any) -> dict[str, Any]:
    """A one-way channel copying ``schema.table`` on the source to the same on the target."""
    return {"name": name, "pipelines": [{
        "name": "forward", "source": "source", "target": "target",
        "pairs": [{"source": f"{schema}.{t}", "target": f"{schema}.{t}"} for t in tables],
        **params}]}


class Database:
    """A PyMySQL connection to one sandbox MariaDB, autocommit, with small helpers."""

    def __init__(self, sandbox: Sandbox, server: str) -> None:
        self.conn = pymysql.connect(**sandbox.connection(server), autocommit=True,
                                    charset="utf8mb4")

    def execute(self, sql: str, args: Any = None) -> int:
        with self.conn.cursor() as cursor:
            return cursor.execute(sql, args)

    def script(self, *statements: str) -> None:
        for statement in statements:
            self.execute(statement)

    def rows(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cursor:
            cursor.execute(sql, args)
            return list(cursor.fetchall())

    def table(self, schema: str, table: str) -> list[tuple[Any, ...]]:
        return self.rows(f"SELECT * FROM {qualified(schema, table)} ORDER BY 1")

    def close(self) -> None:
        self.conn.close()


def make_schema(source: Database, target: Database, *ddl: str) -> str:
    """A fresh schema of the same name on source and target with the given tables."""
    schema = f"t_{uuid.uuid4().hex[:10]}"
    for db in (source, target):
        db.execute(f"CREATE DATABASE `{schema}`")
        for statement in ddl:
            db.execute(statement.format(schema=schema))
    return schema


def wait_equal(source: Database, target: Database, schema: str, tables: list[str],
               timeout_s: float = 60) -> None:
    """Wait until each table holds the same rows on both sides, compared as multisets (a
    keyless table's duplicate rows count)."""
    def equal() -> bool:
        return all(Counter(source.table(schema, t)) == Counter(target.table(schema, t))
                   for t in tables)
    try:
        wait_for(equal, timeout_s, f"{schema} {tables} equal on source and target")
    except AssertionError:
        for t in tables:
            src, dst = Counter(source.table(schema, t)), Counter(target.table(schema, t))
            print(f"{t}: source {src.total()} rows, target {dst.total()} rows; "
                  f"only source: {sorted((src - dst).items(), key=repr)[:5]}; "
                  f"only target: {sorted((dst - src).items(), key=repr)[:5]}")
        raise


def dumps(value: Any) -> str:
    return json.dumps(value, default=str)


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path


def make_certificates(folder: Path, host: str = "127.0.0.1") -> Certificates:
    """A CA and a server certificate for ``host`` signed by it (openssl), for TLS tests."""
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = folder / "ca.pem", folder / "ca-key.pem"
    cert, key, request = folder / "server.pem", folder / "server-key.pem", folder / "server.csr"
    extensions = folder / "san.cnf"
    extensions.write_text(f"subjectAltName=IP:{host}\n" if host.replace(".", "").isdigit()
                          else f"subjectAltName=DNS:{host}\n")
    for command in (
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             "/CN=setl test CA", "-keyout", ca_key, "-out", ca],
            ["req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={host}", "-keyout", key,
             "-out", request],
            ["x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
             "-days", "2", "-extfile", extensions, "-out", cert]):
        subprocess.run(["openssl", *map(str, command)], check=True, capture_output=True)
    return Certificates(ca, cert, key)
