"""How to install-check, start, probe and prepare each kind of sandbox server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pymysql

from shared.errors import SandboxError

ZOOKEEPER_JARS = ("/usr/share/java/zookeeper.jar",)


@dataclass(frozen=True)
class ServerSpec:
    name: str
    kind: str
    server_id: int = 0
    extra_args: tuple[str, ...] = ()


def wait_until(check: Callable[[], bool], timeout_s: float, what: str,
               interval_s: float = 0.2) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval_s)
    raise SandboxError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` itself holds the listening socket on 127.0.0.1:``port``
    (Linux's /proc): a server that answers there may be another one that took the port
    between our probe and our bind, while ours is still starting, about to fail."""
    wanted = {f"0100007F:{port:04X}",  # and as Java binds it, an IPv4-mapped IPv6 socket
              f"0000000000000000FFFF00000100007F:{port:04X}"}
    inodes = set()
    try:
        for name in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(name) as table:
                for line in table.readlines()[1:]:
                    fields = line.split()
                    if fields[1] in wanted and fields[3] == "0A":  # 0A: LISTEN
                        inodes.add(f"socket:[{fields[9]}]")
        fds = Path(f"/proc/{pid}/fd")
        return any(os.readlink(fd) in inodes for fd in fds.iterdir()) if inodes else False
    except OSError:
        return False


def launch(kind: ServerKind, spec: ServerSpec, datadir: Path, password: str, user: str,
           port_for: Callable[[int], int], timeout_s: float
           ) -> tuple[subprocess.Popen[bytes], int]:
    """Start a ``kind`` server and wait until it answers on its own port, then prepare it.
    ``port_for(attempt)`` gives the port of each try: a free port can be taken between the
    probe and the server's bind (by another test's server, or a client's local port), and then
    the server dies or another one answers there: try another, three times."""
    last_error = ""
    for attempt in range(3):
        port = port_for(attempt)
        process = kind.start(spec, datadir, port, password, user)

        def settled(port: int = port, process: subprocess.Popen[bytes] = process) -> bool:
            return process.poll() is not None or (
                kind.answers(port) and listens(process.pid, port))

        try:
            wait_until(settled, timeout_s, f"{spec.name} to answer on 127.0.0.1:{port}")
        except SandboxError as exc:
            _stop(process)
            raise SandboxError(f"{exc}; see {kind.log_file(datadir)}") from None
        if process.poll() is None:
            kind.prepare(datadir, port, password, user)
            return process, port
        last_error = kind.tail_log(datadir)
    raise SandboxError(f"{spec.name} did not start: {last_error}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait(30)


def _require(binary: str, package: str) -> str:
    path = shutil.which(binary) or (binary if os.path.exists(binary) else None)
    if not path:
        raise SandboxError(f"{binary} not found: install the Debian package {package} "
                           f"(apt-get install {package}; 'make setup' does it)")
    return path


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


class ServerKind(Protocol):
    def log_file(self, datadir: Path) -> Path: ...
    def tail_log(self, datadir: Path) -> str: ...
    def start(self, spec: ServerSpec, datadir: Path, port: int, password: str,
              user: str) -> subprocess.Popen[bytes]: ...
    def answers(self, port: int) -> bool: ...
    def prepare(self, datadir: Path, port: int, password: str, user: str) -> None: ...


class ZooKeeperKind:
    @staticmethod
    def log_file(datadir: Path) -> Path:
        return datadir / "zookeeper.log"

    def tail_log(self, datadir: Path) -> str:
        return _tail(self.log_file(datadir))

    def start(self, spec: ServerSpec, datadir: Path, port: int, password: str,
              user: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.command(datadir, port), stdin=subprocess.DEVNULL,
                                stdout=open(self.log_file(datadir), "ab"),
                                stderr=subprocess.STDOUT, start_new_session=True)

    def command(self, datadir: Path, port: int) -> list[str]:
        """The command line of a ZooKeeper server on 127.0.0.1:``port`` keeping its data in
        ``datadir`` (its config is written there)."""
        java = _require("java", "default-jre-headless")
        for jar in ZOOKEEPER_JARS:
            _require(jar, "zookeeper")
        (datadir / "data").mkdir(parents=True, exist_ok=True)
        config = datadir / "zoo.cfg"
        config.write_text("\n".join([
            "tickTime=500", f"dataDir={datadir / 'data'}", f"clientPort={port}",
            "clientPortAddress=127.0.0.1", "admin.enableServer=false",
            "minSessionTimeout=1000", "maxSessionTimeout=60000",
            "4lw.commands.whitelist=ruok,srvr", "autopurge.purgeInterval=1",
            # a throwaway server: no fsync per write (a busy disk held writes for seconds);
            # a killed server keeps its data, only the machine's crash could lose it
            "forceSync=no", ""]))
        return [java, "-Xmx256m", "-XX:+UseSerialGC", "-cp", ":".join(ZOOKEEPER_JARS),
                f"-Dzookeeper.log.dir={datadir}",
                "org.apache.zookeeper.server.ZooKeeperServerMain", str(config)]

    @staticmethod
    def answers(port: int) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                conn.sendall(b"ruok")
                return conn.recv(4) == b"imok"
        except OSError:
            return False

    def prepare(self, datadir: Path, port: int, password: str, user: str) -> None:
        """Nothing to prepare: setl creates its own paths."""


class MariaDBKind:
    @staticmethod
    def log_file(datadir: Path) -> Path:
        return datadir / "error.log"

    def tail_log(self, datadir: Path) -> str:
        return _tail(self.log_file(datadir))

    @staticmethod
    def socket_path(datadir: Path) -> Path:
        return datadir / "mysqld.sock"

    def start(self, spec: ServerSpec, datadir: Path, port: int, password: str,
              user: str) -> subprocess.Popen[bytes]:
        server = _require("mariadbd", "mariadb-server")
        data = datadir / "data"
        # temporary tables in a directory of its own: a server (and the bootstrap of
        # mariadb-install-db) removes at its start every #sql file in its tmpdir, taken for
        # leftovers of its own last run — in a shared /tmp, another sandbox's running query's
        tmpdir = datadir / "tmp"
        tmpdir.mkdir(parents=True, exist_ok=True)
        if not (data / "mysql").exists():
            install = _require("mariadb-install-db", "mariadb-server")
            data.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(
                [install, "--no-defaults", f"--datadir={data}", "--skip-test-db",
                 "--auth-root-authentication-method=normal", *self._user_args(),
                 f"--tmpdir={tmpdir}"],
                capture_output=True, text=True)
            if done.returncode != 0:
                raise SandboxError(f"mariadb-install-db failed for {spec.name}: "
                                   f"{done.stderr.strip()[-500:]}")
        command = [
            server, "--no-defaults", f"--datadir={data}", f"--socket={self.socket_path(datadir)}",
            f"--tmpdir={tmpdir}",
            f"--port={port}", "--bind-address=127.0.0.1", *self._user_args(),
            f"--pid-file={datadir / 'mysqld.pid'}", f"--log-error={self.log_file(datadir)}",
            f"--log-bin={data / 'binlog'}", f"--server-id={spec.server_id}",
            "--binlog-format=ROW", "--binlog-row-image=FULL", "--binlog-row-metadata=FULL",
            "--skip-name-resolve", "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci", "--innodb-buffer-pool-size=256M",
            "--innodb-flush-log-at-trx-commit=2", "--sync-binlog=0", "--max-connections=1000",
            "--performance-schema=OFF", "--innodb-lock-wait-timeout=20", *spec.extra_args,
        ]
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

    @staticmethod
    def _user_args() -> list[str]:
        return ["--user=root"] if os.geteuid() == 0 else []

    def answers(self, port: int) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                return len(conn.recv(4)) > 0  # the server greets first
        except OSError:
            return False

    def prepare(self, datadir: Path, port: int, password: str, user: str) -> None:
        """Create the setl user (all privileges, from 127.0.0.1 only), idempotently."""
        def connect() -> pymysql.Connection:
            return pymysql.connect(unix_socket=str(self.socket_path(datadir)), user="root",
                                   autocommit=True)
        for attempt in range(50):
            try:
                conn = connect()
                break
            except pymysql.err.OperationalError:
                if attempt == 49:
                    raise
                time.sleep(0.2)
        with conn, conn.cursor() as cursor:
            for host in ("127.0.0.1", "localhost"):
                cursor.execute(f"CREATE USER IF NOT EXISTS '{user}'@'{host}' IDENTIFIED BY %s",
                               (password,))
                cursor.execute(f"ALTER USER '{user}'@'{host}' IDENTIFIED BY %s", (password,))
                cursor.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'{host}' "
                               "WITH GRANT OPTION")


SERVER_KINDS: dict[str, ServerKind] = {"zookeeper": ZooKeeperKind(), "mariadb": MariaDBKind()}
