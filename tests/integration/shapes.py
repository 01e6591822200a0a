"""A workload over the table shapes a replay breaks, and a watcher of the target.

Every crash, restart, failover or replay test runs it: primary-key tables alone prove little,
since a replayed row image of a keyed table changes nothing. So one writer, one source
transaction at a time, mixes:
- ``kl``: a keyless table with duplicate rows (two equal rows an insert; updates and deletes
  of one of several equal rows; a savepoint rolled back after the insert): a replayed insert
  is a duplicate row;
- ``sl``: a unique secondary key whose values are swapped through a free value in one
  transaction: a replayed swap conflicts with the state the target already has;
- ``accounts``: transfers that keep the sum of the balances constant (a reader that sees
  another sum sees part of a transaction), each row's version only grows;
- ``parent``/``child``: a foreign key with ``ON DELETE CASCADE`` (the cascade is not in the
  binlog: the target's own key must redo it);
- ``accounts.doubled``: a generated column (never written on the target), and ``audit``: rows
  a trigger on the source's ``parent`` writes (the target has no trigger: they come from the
  binlog).

The watcher reads the target in consistent snapshots and notes every broken promise: the
balances' sum, the unique slots (always a permutation of 1..SLOTS), versions going back.
At the end every table is compared as a multiset.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

import pymysql

from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, make_schema, wait_equal, wait_for

ACCOUNTS, OPENING, SLOTS = 20, 100, 10
DDL = (
    "CREATE TABLE `{schema}`.kl (a INT, b VARCHAR(20))",
    "CREATE TABLE `{schema}`.sl (id INT PRIMARY KEY, slot INT NOT NULL, UNIQUE KEY u (slot))",
    "CREATE TABLE `{schema}`.accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL, "
    "version BIGINT NOT NULL, doubled BIGINT AS (balance * 2) PERSISTENT)",
    "CREATE TABLE `{schema}`.parent (id INT PRIMARY KEY, note VARCHAR(20))",
    "CREATE TABLE `{schema}`.child (id INT PRIMARY KEY, pid INT NOT NULL, "
    "FOREIGN KEY (pid) REFERENCES `{schema}`.parent (id) ON DELETE CASCADE)",
    "CREATE TABLE `{schema}`.audit (id INT PRIMARY KEY, what VARCHAR(20))",
)
TRIGGER = ("CREATE TRIGGER `{schema}`.born AFTER INSERT ON `{schema}`.parent FOR EACH ROW "
           "INSERT INTO `{schema}`.audit VALUES (NEW.id, CONCAT('born ', NEW.note))")
TABLES = ["kl", "sl", "accounts", "parent", "child", "audit"]
WRITTEN = {"accounts": "id, balance, version"}  # the columns a copy writes (not generated)


class Shapes:
    def __init__(self, sandbox: Sandbox, source: Database, target: Database,
                 targets: tuple[str, ...] = ("target",), seed: int = 11,
                 writer: Callable[[], Database] | None = None, kinds: int = 5) -> None:
        """``writer`` connects to the server written to (the sandbox's source by default;
        a replica set's primary of the moment): the writer reconnects through it when its
        connection breaks, and a transaction whose COMMIT got no answer counts as lost."""
        self.sandbox, self.targets, self.seed = sandbox, targets, seed
        self.kinds = kinds  # 3: the keyless, unique-swap and sum tables only (no cascade)
        self.writer = writer or (lambda: Database(sandbox, "source"))
        self.schema = make_schema(source, target, *DDL)
        source.execute(TRIGGER.format(schema=self.schema))  # the source's alone
        for server in targets[1:]:
            db = Database(sandbox, server)
            db.execute(f"CREATE DATABASE `{self.schema}`")
            for statement in DDL:
                db.execute(statement.format(schema=self.schema))
            db.close()
        for server in ("source", *targets):
            db = source if server == "source" else Database(sandbox, server)
            db.execute(f"INSERT INTO `{self.schema}`.accounts (id, balance, version) VALUES "
                       + ", ".join(f"({i}, {OPENING}, 0)" for i in range(ACCOUNTS)))
            db.execute(f"INSERT INTO `{self.schema}`.sl VALUES "
                       + ", ".join(f"({i}, {i})" for i in range(1, SLOTS + 1)))
            if db is not source:
                db.close()
        self.broken = 0  # transactions cut by a lost connection (written or not)
        self.done = threading.Event()
        self.transactions = 0
        self.snapshots = 0
        self.violations: list[str] = []
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        works = [self._write] + [lambda s=server: self._watch(s) for server in self.targets]
        for work in works:
            thread = threading.Thread(target=work, daemon=True)
            thread.start()
            self._threads.append(thread)

    def wait_transactions(self, count: int, timeout_s: float = 120) -> None:
        wait_for(lambda: self.transactions >= count, timeout_s,
                 f"{count} transactions on the source")

    def keep_on(self, transactions: int = 100, reads: int = 25, timeout_s: float = 120) -> None:
        """Go on a while, racing what the test just did: ``transactions`` more written and
        ``reads`` more snapshots of the targets (the watcher may be slow on a busy machine:
        ``finish`` wants more than 20)."""
        written, read = self.transactions + transactions, self.snapshots + reads
        self.wait_transactions(written, timeout_s)
        wait_for(lambda: self.snapshots >= read, timeout_s, f"{reads} more reads of the targets")

    def stop(self) -> None:
        self.done.set()
        for thread in self._threads:
            thread.join(60)
            assert not thread.is_alive(), "a workload thread did not stop"

    def pause(self) -> None:
        """Stop writing and watching (``start`` goes on)."""
        self.stop()
        self._threads.clear()
        self.done.clear()

    def finish(self, source: Database, timeout_s: float = 180) -> None:
        """Stop writing, wait for every target to hold the source's rows (as multisets), and
        check the watcher saw every promise kept."""
        self.stop()
        self._check(source, timeout_s)

    def _check(self, source: Database, timeout_s: float) -> None:
        for server in self.targets:
            target = Database(self.sandbox, server)
            try:
                wait_equal(source, target, self.schema, TABLES, timeout_s=timeout_s)
            finally:
                target.close()
        assert self.violations == []
        assert self.snapshots > 20, "the watcher hardly read the target"

    def settle(self, source: Database, timeout_s: float = 180) -> None:
        """``finish``, ready to ``start`` again: writes stop and the targets catch up, so a
        test may read or move positions that stay put, then write again through its next
        fault."""
        self.pause()
        self._check(source, timeout_s)

    def rows(self, db: Database) -> dict[str, list[tuple[Any, ...]]]:
        """Every table's rows on ``db`` (read in the caller's transaction, if one is open:
        a backup taken with the position row beside them), for ``put_back``."""
        return {name: db.rows(f"SELECT {WRITTEN.get(name, '*')} FROM `{self.schema}`.{name}")
                for name in TABLES}

    def opening(self) -> dict[str, list[tuple[Any, ...]]]:
        """The tables' rows before the first transaction (what a target holds again to load
        every transaction once more from where the workload began)."""
        return {name: [] for name in TABLES} | {
            "sl": [(i, i) for i in range(1, SLOTS + 1)],
            "accounts": [(i, OPENING, 0) for i in range(ACCOUNTS)]}

    def put_back(self, db: Database, rows: dict[str, list[tuple[Any, ...]]]) -> None:
        """``db``'s tables made to hold ``rows``, in the caller's transaction (a target
        restored from a backup). Pause first: a watcher would see versions go back."""
        t = f"`{self.schema}`"
        for name in reversed(TABLES):  # children before their parents
            db.execute(f"DELETE FROM {t}.{name}")
        for name in TABLES:
            if rows[name]:
                columns = f" ({WRITTEN[name]})" if name in WRITTEN else ""
                marks = ", ".join(["%s"] * len(rows[name][0]))
                with db.conn.cursor() as cursor:
                    cursor.executemany(f"INSERT INTO {t}.{name}{columns} VALUES ({marks})",
                                       rows[name])

    # -- the writer -------------------------------------------------------------------------
    def _write(self) -> None:
        db: Database | None = None
        rng = random.Random(self.seed)
        t = f"`{self.schema}`"
        parents: list[int] = []
        try:
            while not self.done.is_set():
                if db is None:
                    try:
                        db = self.writer()
                    except pymysql.MySQLError:  # the server is down: until it is back
                        self.done.wait(0.2)
                        continue
                try:
                    self._transaction(db, rng, t, parents)
                except pymysql.MySQLError:  # the server went away in the middle
                    self.broken += 1
                    self.transactions += 1  # its numbers may be taken: never used again
                    db.close()
                    db = None
        finally:
            if db is not None:
                db.close()

    def _transaction(self, db: Database, rng: random.Random, t: str,
                     parents: list[int]) -> None:
        n = self.transactions + 1
        kind = rng.randrange(self.kinds)
        db.execute("BEGIN")
        if kind == 0:  # keyless: two equal rows, then one of several equal changed
            v = rng.randrange(7)
            db.execute(f"INSERT INTO {t}.kl VALUES ({v}, 'v{v}'), ({v}, 'v{v}')")
            if n % 2:  # a savepoint (an ORM's nested transaction) undone
                db.execute("SAVEPOINT nested")
                db.execute(f"INSERT INTO {t}.kl VALUES ({v}, 'undone')")
                db.execute("ROLLBACK TO SAVEPOINT nested")
            if n % 3 == 0:
                db.execute(f"UPDATE {t}.kl SET b = 'changed' WHERE a = "
                           f"{rng.randrange(7)} LIMIT 1")
            if n % 4 == 0:
                db.execute(f"DELETE FROM {t}.kl WHERE a = {rng.randrange(7)} LIMIT 1")
        elif kind == 1:  # unique-key swap through a free value
            a, b = rng.sample(range(1, SLOTS + 1), 2)
            slots = dict(db.rows(f"SELECT id, slot FROM {t}.sl WHERE id IN ({a}, {b}) "
                                 "FOR UPDATE"))
            db.execute(f"UPDATE {t}.sl SET slot = -1 WHERE id = {a}")
            db.execute(f"UPDATE {t}.sl SET slot = {slots[a]} WHERE id = {b}")
            db.execute(f"UPDATE {t}.sl SET slot = {slots[b]} WHERE id = {a}")
        elif kind == 2:  # a transfer: the sum stays
            a, b = rng.sample(range(ACCOUNTS), 2)
            amount = rng.randint(1, 13)
            db.execute(f"UPDATE {t}.accounts SET balance = balance - {amount}, "
                       f"version = version + 1 WHERE id = {a}")
            db.execute(f"UPDATE {t}.accounts SET balance = balance + {amount}, "
                       f"version = version + 1 WHERE id = {b}")
        elif kind == 3 or not parents:  # a parent and its children
            db.execute(f"INSERT INTO {t}.parent VALUES ({n}, 'p{n}')")
            db.execute(f"INSERT INTO {t}.child VALUES ({n * 10}, {n}), "
                       f"({n * 10 + 1}, {n})")
            parents.append(n)
        else:  # a parent goes, its children by cascade (not in the binlog)
            gone = parents.pop(rng.randrange(len(parents)))
            db.execute(f"DELETE FROM {t}.parent WHERE id = {gone}")
        db.execute("COMMIT")
        self.transactions = n
        self.done.wait(0.003)

    # -- the watcher ------------------------------------------------------------------------
    def _watch(self, server: str) -> None:
        db: Database | None = None
        t = f"`{self.schema}`"
        versions: dict[int, int] = {}
        while not self.done.is_set():
            try:
                db = db or Database(self.sandbox, server)
                db.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                balance = db.rows(f"SELECT SUM(balance) FROM {t}.accounts")[0][0]
                each = db.rows(f"SELECT id, version FROM {t}.accounts")
                slots = sorted(row[0] for row in db.rows(f"SELECT slot FROM {t}.sl"))
                db.execute("COMMIT")
            except pymysql.MySQLError:  # the target restarted or dropped us: read again
                db = None
                self.done.wait(0.2)
                continue
            self.snapshots += 1
            if balance != ACCOUNTS * OPENING:
                self.violations.append(f"{server}: part of a transfer: balances sum to "
                                       f"{balance}")
            if slots != list(range(1, SLOTS + 1)):
                self.violations.append(f"{server}: part of a swap: slots {slots}")
            for account, version in each:
                if version < versions.get(account, 0):
                    self.violations.append(f"{server}: account {account} went back to "
                                           f"version {version}")
                versions[account] = max(versions.get(account, 0), version)
            self.done.wait(0.02)
        if db is not None:
            db.close()


def channel(name: str, schema: str, targets: tuple[str, ...] = ("target",),
            **params: object) -> dict[str, object]:
    """A one-way channel of the workload's tables to each of ``targets``."""
    pairs = [{"source": f"{schema}.{t}", "target": {"datasource": server, "namespace": schema,
                                                     "table": t}}
             | ({"fan_out": True} if len(targets) > 1 else {})
             for server in targets for t in TABLES]
    return {"name": name, "pipelines": [{"name": "forward", "source": "source",
                                         "target": targets[0], "pairs": pairs, **params}]}


def beside(definition: dict[str, Any], schema: str) -> dict[str, Any]:
    """``definition`` (one channel of one pipeline) with the workload's tables as more pairs
    of its pipeline, so that they go through whatever happens to it."""
    pipeline = definition["pipelines"][0]
    extra = channel(definition["name"], schema, (pipeline["target"],))["pipelines"][0]["pairs"]
    return {**definition, "pipelines": [{**pipeline, "pairs": [*pipeline["pairs"], *extra]}]}


def start_channel(cluster: Cluster, shapes: Shapes, name: str, nodes: int = 1,
                  **params: object) -> None:
    """A manager, ``nodes`` nodes (candidates all) and a running channel of the workload's
    tables."""
    cluster.start_manager()
    for node_id in range(1, nodes + 1):
        cluster.start_node(node_id)
    cluster.apply([channel(name, shapes.schema, **params)])
    cluster.set_status(name, "START")
    cluster.wait_running(name)
