"""What a chaos soak writes on the source and checks on the target: the bank and shapes
workloads (see bench/chaos.py) and the watcher that reads the target in consistent snapshots
and keeps count of the promises a reader relies on that it saw broken.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

import pymysql

from shared.sandbox import Sandbox
from tests.devcluster import Database

DB = "chaos"
ACCOUNTS, OPENING = 100, 1000
TOTAL = ACCOUNTS * OPENING
SLOTS = 20


@dataclass
class Watch:
    """What the watcher saw on the target."""

    snapshots: int = 0
    errors: int = 0  # reads that failed (the target or its connection was down)
    stopped: str = ""  # why the watcher stopped before the end (then the soak fails)
    violations: list[str] = field(default_factory=list)
    versions: dict[int, int] = field(default_factory=dict)


class Load:
    """The workloads' threads' work on the source, and the watcher's on the target, until
    ``stop`` is set."""

    def __init__(self, box: Sandbox, stop: threading.Event, rng: random.Random) -> None:
        self.box, self.stop, self.rng = box, stop, rng
        self.watch = Watch()
        self.transfers = 0

    def bank(self) -> None:
        db = Database(self.box, "source")
        rng = random.Random(self.rng.random())
        while not self.stop.is_set():
            debit, credit = rng.sample(range(ACCOUNTS), 2)
            amount = rng.randrange(1, 50)
            db.execute("BEGIN")
            db.execute(f"UPDATE {DB}.accounts SET balance = balance - %s, version = version "
                       "+ 1 WHERE id = %s", (amount, debit))
            db.execute(f"UPDATE {DB}.accounts SET balance = balance + %s, version = version "
                       "+ 1 WHERE id = %s", (amount, credit))
            db.execute(f"INSERT INTO {DB}.journal (debit, credit, amount) VALUES (%s, %s, %s)",
                       (debit, credit, amount))
            db.execute("COMMIT")
            self.transfers += 1
            time.sleep(0.01)
        db.close()

    def shapes(self) -> None:
        """Keyless inserts, updates and deletes among duplicates, and unique-key swaps."""
        db = Database(self.box, "source")
        rng = random.Random(self.rng.random())
        n = 0
        while not self.stop.is_set():
            n += 1
            db.execute("BEGIN")
            if n % 2:
                v = rng.randrange(7)
                db.execute(f"INSERT INTO {DB}.kl VALUES (%s, %s), (%s, %s)",
                           (v, f"v{v}", v, f"v{v}"))
                if n % 4 == 1:  # a savepoint (an ORM's nested transaction) undone
                    db.execute("SAVEPOINT nested")
                    db.execute(f"INSERT INTO {DB}.kl VALUES (%s, 'undone')", (v,))
                    db.execute("ROLLBACK TO SAVEPOINT nested")
                if n % 3 == 0:
                    db.execute(f"UPDATE {DB}.kl SET b = 'changed' WHERE a = %s LIMIT 1",
                               (rng.randrange(7),))
                if n % 5 == 0:
                    db.execute(f"DELETE FROM {DB}.kl WHERE a = %s LIMIT 1", (rng.randrange(7),))
            else:
                a, b = rng.sample(range(1, SLOTS + 1), 2)
                slots = dict(db.rows(f"SELECT id, slot FROM {DB}.sl WHERE id IN (%s, %s) FOR "
                                     "UPDATE", (a, b)))
                db.execute(f"UPDATE {DB}.sl SET slot = -1 WHERE id = %s", (a,))
                db.execute(f"UPDATE {DB}.sl SET slot = %s WHERE id = %s", (slots[a], b))
                db.execute(f"UPDATE {DB}.sl SET slot = %s WHERE id = %s", (slots[b], a))
            db.execute("COMMIT")
            time.sleep(0.01)
        db.close()

    def watcher(self) -> None:
        try:
            self._watch()
        except Exception as exc:  # the promises went unwatched from here: the soak fails
            self.watch.stopped = f"the watcher stopped: {type(exc).__name__}: {exc}"
            raise

    def _watch(self) -> None:
        db: Database | None = None
        while not self.stop.is_set():
            try:
                if db is None:
                    db = Database(self.box, "target")
                self._check(db)
            except pymysql.MySQLError:
                self.watch.errors += 1
                if db is not None:
                    try:
                        db.close()
                    except pymysql.MySQLError:
                        pass
                db = None
                self.stop.wait(0.2)
            self.stop.wait(0.05)
        if db is not None:
            db.close()

    def _check(self, db: Database) -> None:
        db.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        try:
            balance, versions = db.rows(f"SELECT SUM(balance), SUM(version) FROM "
                                        f"{DB}.accounts")[0]
            journal = db.rows(f"SELECT COUNT(*) FROM {DB}.journal")[0][0]
            each = db.rows(f"SELECT id, version FROM {DB}.accounts")
            slots = sorted(row[0] for row in db.rows(f"SELECT slot FROM {DB}.sl"))
        finally:
            db.execute("COMMIT")
        self.watch.snapshots += 1
        if slots != list(range(1, SLOTS + 1)):
            self.watch.violations.append(f"part of a unique-key swap visible: slots {slots}")
        if int(balance) != TOTAL or int(versions) != 2 * int(journal):
            self.watch.violations.append(
                f"part of a transaction visible: balances sum to {balance} (not {TOTAL}), "
                f"versions to {versions} with {journal} journal rows")
        for account, version in each:
            seen = self.watch.versions.get(account, 0)
            if version < seen:
                self.watch.violations.append(f"account {account} went back from version "
                                             f"{seen} to {version}")
            self.watch.versions[account] = max(seen, int(version))
