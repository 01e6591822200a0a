"""A throwaway MariaDB replica set on real servers, for tests of source switchover: one
primary and GTID replicas of it (``MASTER_USE_GTID = slave_pos``), all binding 127.0.0.1 on
free ports with the binlog settings setl requires of a source, plus ``gtid_strict_mode``,
``log_slave_updates`` and one GTID domain (0). Built on :class:`shared.sandbox.Sandbox`: the
servers are recorded in ``root/state.json`` and a watchdog stops them when ``owner_pid``
dies.

    rs = ReplicaSet(tmp_path / "rs", sandbox.password(), owner_pid=os.getpid())
    rs.up()
    try:
        rs.kill(0); rs.promote(1)
    finally:
        rs.down()
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.errors import SandboxError
from shared.sandbox import USER, Sandbox, pid_alive
from shared.sandbox_servers import ServerSpec
from tests.devcluster import Database

FIRST_SERVER_ID = 41
MEMBER_ARGS = ("--gtid-strict-mode=ON", "--log-slave-updates=ON", "--gtid-domain-id=0")


@dataclass(frozen=True)
class Member:
    name: str  # rs0, rs1, ...
    port: int
    server_id: int
    pid: int
    box: Sandbox = field(repr=False, compare=False)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def database(self) -> Database:
        """A new autocommit connection as user setl (close it when done)."""
        return Database(self.box, self.name)


class _Box(Sandbox):
    """A sandbox of exactly this set's servers, with the password it was given."""

    def __init__(self, root: Path, password: str, specs: list[ServerSpec]) -> None:
        super().__init__(root)
        self._password, self.specs = password, specs

    def password(self) -> str:
        return self._password

    def place_secret(self) -> None:  # the password is given, not kept in a file
        self.root.mkdir(parents=True, exist_ok=True)

    def wanted(self, second_target: bool = False, replica: bool = False) -> list[ServerSpec]:
        return self.specs


class ReplicaSet:
    def __init__(self, root: Path, password: str, members: int = 2,
                 owner_pid: int | None = None) -> None:
        self.root, self.password, self.owner_pid = Path(root).resolve(), password, owner_pid
        self.specs = [ServerSpec(f"rs{i}", "mariadb", FIRST_SERVER_ID + i, MEMBER_ARGS)
                      for i in range(members)]
        self.box = _Box(self.root, password, self.specs)
        self.members: list[Member] = []
        self.primary = 0  # the index of the member the replicas follow

    def up(self, timeout_s: float = 60.0) -> None:
        """Start the servers; member 0 the primary, the others its caught-up replicas.
        Once per set: it resets the replicas' binlogs."""
        self._copy_template()
        servers = self.box.up(owner_pid=self.owner_pid, timeout_s=timeout_s)
        self.members = [Member(s.name, servers[s.name].port, s.server_id,
                               servers[s.name].pid, self.box) for s in self.specs]
        self.primary = 0
        for index in range(1, len(self.members)):
            self._replicate(index)
        for index in range(1, len(self.members)):
            deadline = time.monotonic() + timeout_s
            while not self._threads_running(index):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.members[index].name} does not replicate: "
                                       f"{self._error(index)}")
                time.sleep(0.1)
            self.wait_caught_up(index, timeout_s)

    def _copy_template(self) -> None:
        """mariadb-install-db once per root, then a copy of its (never started) datadir for
        each member: MariaDBKind.start installs only where ``data/mysql`` is missing."""
        template = self.root / "template" / "data"
        if not (template / "mysql").exists():
            shutil.rmtree(template, ignore_errors=True)
            template.mkdir(parents=True)
            done = subprocess.run(
                ["mariadb-install-db", "--no-defaults", f"--datadir={template}",
                 "--skip-test-db", "--auth-root-authentication-method=normal",
                 *(["--user=root"] if os.geteuid() == 0 else [])],
                capture_output=True, text=True)
            if done.returncode != 0:
                shutil.rmtree(template, ignore_errors=True)
                raise SandboxError(f"mariadb-install-db failed: {done.stderr.strip()[-500:]}")
        for spec in self.specs:
            data = self.root / spec.name / "data"
            if not (data / "mysql").exists():
                shutil.rmtree(data, ignore_errors=True)
                shutil.copytree(template, data)

    @contextmanager
    def _db(self, index: int) -> Iterator[Database]:
        with closing(self.members[index].database()) as db:
            yield db

    def _value(self, index: int, sql: str, args: Any = None) -> Any:
        with self._db(index) as db:
            return db.rows(sql, args)[0][0]

    def _replicate(self, index: int) -> None:
        """Make a fresh member a replica of the primary. Its own binlog (the GTIDs 0-<its
        server_id>-N of creating the user setl) is replaced by the primary's binlog state:
        with gtid_strict_mode its own GTIDs would clash with the primary's, and once
        promoted it serves a reader positioned at the primary's current GTID. Replication
        starts after the primary's @@gtid_binlog_pos (its user creation, done everywhere)."""
        primary = self.members[self.primary]
        state, position = (self._value(self.primary, f"SELECT @@gtid_binlog_{what}")
                           for what in ("state", "pos"))
        with self._db(index) as db:
            db.script("STOP SLAVE", "RESET SLAVE ALL", "RESET MASTER")
            db.execute("SET GLOBAL gtid_binlog_state = %s", (state,))
            db.execute("SET GLOBAL gtid_slave_pos = %s", (position,))
            db.execute("CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %s, "
                       "MASTER_USER = %s, MASTER_PASSWORD = %s, MASTER_CONNECT_RETRY = 1, "
                       "MASTER_USE_GTID = slave_pos", (primary.port, USER, self.password))
            db.script("START SLAVE", "SET GLOBAL read_only = ON")

    def _status(self, index: int) -> dict[str, Any]:
        with self._db(index) as db, db.conn.cursor() as cursor:
            cursor.execute("SHOW SLAVE STATUS")
            row = cursor.fetchone()
            return dict(zip([c[0] for c in cursor.description], row, strict=True)) if row else {}

    def _threads_running(self, index: int) -> bool:
        status = self._status(index)
        return status.get("Slave_IO_Running") == status.get("Slave_SQL_Running") == "Yes"

    def _error(self, index: int) -> str:
        try:
            status = self._status(index)
        except Exception as exc:
            return repr(exc)
        return str(status.get("Last_SQL_Error") or status.get("Last_IO_Error") or "no error")

    def wait_caught_up(self, index: int, timeout_s: float = 30) -> None:
        """Until the replica has applied the primary's @@gtid_binlog_pos (MASTER_GTID_WAIT
        on its gtid_slave_pos); TimeoutError with its replication error otherwise."""
        if index == self.primary:
            return
        position = self._value(self.primary, "SELECT @@gtid_binlog_pos")
        if self._value(index, "SELECT MASTER_GTID_WAIT(%s, %s)", (position, timeout_s)) != 0:
            raise TimeoutError(f"{self.members[index].name} did not reach {position} in "
                               f"{timeout_s:g}s ({self._error(index)})")

    def kill(self, index: int) -> None:
        """SIGKILL the server (a crash), and wait until it is gone."""
        pid = self.members[index].pid
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def promote(self, index: int) -> None:
        """Make a replica the primary: it stops replicating and takes writes. The other
        replicas still follow the old primary."""
        with self._db(index) as db:
            db.script("STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF")
        self.primary = index

    def pause_replication(self, index: int) -> None:
        """STOP SLAVE on a replica: it will lack the primary's next transactions."""
        with self._db(index) as db:
            db.execute("STOP SLAVE")

    def down(self) -> None:
        """Stop every server still running (SIGTERM) and delete the data."""
        self.box.down(purge=True)
