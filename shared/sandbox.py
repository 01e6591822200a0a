"""A local sandbox of real servers for the demo and the tests.

``setl sandbox up`` starts, under one folder (default ``.sandbox/``): ZooKeeper, a *source*
MariaDB (binlog on, ROW/FULL/FULL, its own server_id), a *target* MariaDB and, on request,
a second target (the benchmarks also ask for two native replicas of the source, one serial,
one parallel). Everything binds to 127.0.0.1 on free ports. ``up`` is idempotent and waits
until each server answers; ``down`` stops exactly the pids ``up`` recorded. With
``owner_pid`` a watchdog stops the sandbox when that process dies, so servers started by a
test run never outlive it.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from shared import confinement
from shared.errors import SandboxError
from shared.sandbox_servers import SERVER_KINDS, ServerSpec, launch

log = logging.getLogger("setl.sandbox")
STATE_FILE = "state.json"
# The password alone in its own folder: that folder is what the daemons' secret_dirs list,
# so a definition can read it and nothing else of the sandbox (data, binlogs, logs).
SECRETS_DIR, SECRET_FILE = "secrets", "password"
LEGACY_SECRET = "secret"  # where sandboxes made before kept it, beside everything else
USER = "setl"


@dataclass(frozen=True)
class ServerInfo:
    name: str
    kind: str  # zookeeper | mariadb
    port: int
    pid: int
    datadir: str
    server_id: int = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def dying_with_parent(command: list[str]) -> list[str]:
    """``command`` run under ``setpriv --pdeathsig KILL``: it gets SIGKILL when the thread
    that started it dies, so no test daemon outlives its test run. No Python runs between fork
    and exec (a ``preexec_fn`` may deadlock in the child while other threads of the parent run,
    and then the parent waits for the exec for ever)."""
    return ["setpriv", "--pdeathsig", "KILL", "--", *command]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child counts as dead
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


DEMO_BASE_PORT = 23300
PORT_RELEASE_S = 20.0  # how long a restarted server waits for its old port
PORT_OFFSETS = {"zookeeper": 81, "source": 6, "target": 7, "target2": 8, "replica": 9,
                "replica_parallel": 10}
# How a DBA sets a replica up to catch up: 4 applier threads, transactions of one GTID domain
# run speculatively in parallel (rolled back and retried on a conflict) and committed in
# binlog order. The benchmarks' second native replica runs with these; the first stays serial.
PARALLEL_REPLICA = {"slave_parallel_threads": 4, "slave_parallel_mode": "optimistic"}


class Sandbox:
    """The servers under one folder, recorded in ``state.json``.

    With ``base_port`` each server has a fixed port (source = base+6, target = base+7,
    target2 = base+8, ZooKeeper = base+81) so example files can name them; without it every
    server takes a free port (tests).
    """

    def __init__(self, root: str | Path = ".sandbox", base_port: int | None = None) -> None:
        self.root = Path(root).resolve()
        self.base_port = base_port

    @property
    def secret_file(self) -> Path:
        return self.root / SECRETS_DIR / SECRET_FILE

    def password(self) -> str:
        return self.secret_file.read_text().strip()

    def trust_secret(self) -> None:
        """Let this process read the sandbox's password file through a reference (tests and
        benchmarks that open connections themselves; daemons get it in their config)."""
        confinement.confine(dataclasses.replace(confinement.current(),
                                                secret_dirs=(self.secret_file.parent,)))

    def place_secret(self) -> None:
        """The MariaDB password in ``secrets/password`` (made once; a sandbox made before
        keeps its password, moved out of the sandbox's top folder)."""
        folder = self.secret_file.parent
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.secret_file.exists():
            return
        legacy = self.root / LEGACY_SECRET
        if legacy.is_file():
            legacy.replace(self.secret_file)
        else:
            self.secret_file.write_text(secrets.token_hex(12) + "\n")
        self.secret_file.chmod(0o600)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def servers(self) -> dict[str, ServerInfo]:
        try:
            raw = json.loads((self.root / STATE_FILE).read_text())
        except (OSError, ValueError):
            return {}
        return {name: ServerInfo(**info) for name, info in raw.items()}

    def _save(self, servers: dict[str, ServerInfo]) -> None:
        """The servers' state, replaced whole: a reader never finds the file half written
        (a rewrite in place showed a reader of a restart no servers at all)."""
        path = self.root / STATE_FILE
        written = path.with_name(f".{STATE_FILE}.{os.getpid()}")
        written.write_text(json.dumps({n: asdict(s) for n, s in servers.items()}, indent=2))
        os.replace(written, path)

    def wanted(self, second_target: bool, replica: bool = False) -> list[ServerSpec]:
        specs = [ServerSpec("zookeeper", "zookeeper"), ServerSpec("source", "mariadb", 11),
                 ServerSpec("target", "mariadb", 21)]
        if second_target:
            specs.append(ServerSpec("target2", "mariadb", 22))
        if replica:  # native MariaDB replicas, serial and parallel, for the benchmarks' runs
            specs.append(ServerSpec("replica", "mariadb", 31))
            # set at start: slave_parallel_threads changes only while the slave is stopped
            parallel = tuple(f"--{key.replace('_', '-')}={value}"
                             for key, value in PARALLEL_REPLICA.items())
            specs.append(ServerSpec("replica_parallel", "mariadb", 32, parallel))
        return specs

    def up(self, second_target: bool = False, owner_pid: int | None = None,
           timeout_s: float = 60.0, replica: bool = False) -> dict[str, ServerInfo]:
        """Start what is not running yet; return every server once it answers."""
        with self._locked():
            self.place_secret()
            if owner_pid:  # first: servers started before one that fails stop with the owner
                self._start_watchdog(owner_pid)
            servers = self.servers()
            for spec in self.wanted(second_target, replica):
                known = servers.get(spec.name)
                kind = SERVER_KINDS[spec.kind]
                if known and pid_alive(known.pid) and kind.answers(known.port):
                    continue
                servers[spec.name] = self._start(spec, known, timeout_s)
                self._save(servers)
            return servers

    def _start(self, spec: ServerSpec, known: ServerInfo | None, timeout_s: float) -> ServerInfo:
        kind = SERVER_KINDS[spec.kind]

        def port_for(attempt: int) -> int:
            port = self._port_for(spec.name, known if attempt == 0 else None)
            log.info("event=sandbox_start server=%s port=%d", spec.name, port)
            return port

        process, port = launch(kind, spec, self.root / spec.name, self.password(), USER,
                               port_for, timeout_s)
        return ServerInfo(spec.name, spec.kind, port, process.pid, str(self.root / spec.name),
                          spec.server_id)

    def _port_for(self, name: str, known: ServerInfo | None) -> int:
        if self.base_port is not None:
            port = self.base_port + PORT_OFFSETS[name]
            if not _port_free(port):
                raise SandboxError(f"port {port} for the sandbox {name} is taken by another "
                                   "process; stop it, or run 'setl sandbox down' first")
            return port
        if known:  # a server started again keeps its address: everything else knows it
            deadline = time.monotonic() + PORT_RELEASE_S
            while time.monotonic() < deadline:
                if _port_free(known.port):
                    return known.port
                time.sleep(0.1)  # a killed server's socket goes a moment after its process
            log.warning("event=sandbox_port_moved server=%s port=%d reason=\"still taken after "
                        "%g s\"", name, known.port, PORT_RELEASE_S)
        return free_port()

    def down(self, purge: bool = False) -> list[Stopped]:
        """Stop the recorded pids and wait until each has exited (a server that ignores
        SIGTERM for 30 s is killed, and the result says so); with ``purge`` also delete the
        data."""
        with self._locked():
            stopped = []
            for name, info in self.servers().items():
                if pid_alive(info.pid):
                    stopped.append(Stopped(name, info.pid, stop_pid(info.pid)))
            (self.root / STATE_FILE).unlink(missing_ok=True)
            watchdog = self.root / "watchdog.pid"
            if watchdog.exists():
                pid = int(watchdog.read_text() or 0)
                if pid and pid != os.getpid() and pid_alive(pid):
                    os.kill(pid, signal.SIGTERM)
                watchdog.unlink(missing_ok=True)
        if purge:
            shutil.rmtree(self.root, ignore_errors=True)
        return stopped

    def _start_watchdog(self, owner_pid: int) -> None:
        process = subprocess.Popen(
            [sys.executable, "-m", "shared.sandbox", "watchdog", str(self.root), str(owner_pid)],
            start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(self.root / "watchdog.log", "a"),
            cwd=Path(__file__).resolve().parent.parent)
        (self.root / "watchdog.pid").write_text(str(process.pid))

    def connection(self, name: str) -> dict[str, object]:
        """Connection settings of a MariaDB server for PyMySQL."""
        info = self.servers()[name]
        return {"host": "127.0.0.1", "port": info.port, "user": USER, "password": self.password()}


def _port_free(port: int) -> bool:
    """Whether a server could listen on ``port`` now. Probed as servers bind (MariaDB and
    ZooKeeper set SO_REUSEADDR): connections a killed server left in TIME_WAIT do not keep
    it from coming back on its port."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class Stopped:
    """A process that ``down`` stopped, and how: ``exited`` after SIGTERM, ``forced`` by the
    second signal after ``timeout_s``, or ``running`` still."""

    name: str
    pid: int
    outcome: str

    def __str__(self) -> str:
        if self.outcome == "exited":
            return self.name
        if self.outcome == "forced":
            return f"{self.name} (did not exit after SIGTERM; stopped by force)"
        return f"{self.name} (pid {self.pid} STILL RUNNING; stop it with kill -9 {self.pid})"


def stop_pid(pid: int, timeout_s: float = 30.0, then: signal.Signals = signal.SIGKILL,
             grace_s: float = 5.0) -> str:
    """SIGTERM ``pid`` and wait until it has exited; past ``timeout_s`` send ``then`` and
    wait ``grace_s`` more. Returns ``exited``, ``forced`` or ``running``."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "exited"
    if _exited(pid, timeout_s):
        return "exited"
    try:
        os.kill(pid, then)
    except ProcessLookupError:
        return "exited"
    return "forced" if _exited(pid, grace_s) else "running"


def _exited(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _watchdog(root: str, owner_pid: int) -> None:
    while pid_alive(owner_pid):
        time.sleep(1.0)
    Sandbox(root).down()


if __name__ == "__main__" and sys.argv[1:2] == ["watchdog"]:
    _watchdog(sys.argv[2], int(sys.argv[3]))
