"""Transfers and a reader of the rows a phase writes: a snapshot's chunks, a backfill's
slices, while the rows are still arriving on the target.

The ledger's rows are paired, ``id`` with ``id + HALF`` (far apart: in different chunks and
slices), and a transfer moves money within one pair only, raising both rows' versions: in
every committed source state each pair sums to ``2 * OPENING``. So a reader of the target,
in one consistent snapshot, checks what holds while some rows are still missing:
- every pair whose two rows are both there sums to ``2 * OPENING`` (else it sees a part of a
  transfer, or two rows from two source states);
- a row's version never goes back, and a row once there stays (nothing deletes).
"""

from __future__ import annotations

import random
import threading

import pymysql

from shared.sandbox import Sandbox
from tests.devcluster import Database, wait_for

LEDGER = ("CREATE TABLE `{schema}`.ledger (id INT PRIMARY KEY, balance BIGINT NOT NULL, "
          "version BIGINT NOT NULL)")
ROWS, OPENING = 4000, 100
HALF = ROWS // 2


def fill(db: Database, schema: str) -> None:
    """The ledger's opening rows on ``db`` (through its binlog)."""
    db.execute(f"INSERT INTO `{schema}`.ledger SELECT seq, {OPENING}, 0 "
               f"FROM `{schema}`.seq_1_to_{ROWS}")


class Transfers(threading.Thread):
    """Moves money within a pair, one source transaction a move, until ``stop``."""

    def __init__(self, sandbox: Sandbox, schema: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.sandbox, self.table, self.seed = sandbox, f"`{schema}`.ledger", seed
        self.stop = threading.Event()
        self.moves = 0

    def run(self) -> None:
        rng = random.Random(self.seed)
        db: Database | None = None
        while not self.stop.is_set():
            a = rng.randint(1, HALF)
            amount = rng.randint(1, 9) * rng.choice((-1, 1))
            try:
                db = db or Database(self.sandbox, "source")
                db.script("BEGIN",
                          f"UPDATE {self.table} SET balance = balance - {amount}, "
                          f"version = version + 1 WHERE id = {a}",
                          f"UPDATE {self.table} SET balance = balance + {amount}, "
                          f"version = version + 1 WHERE id = {a + HALF}",
                          "COMMIT")
                self.moves += 1
            except pymysql.MySQLError:
                if db is not None:
                    db.close()
                db = None
            self.stop.wait(0.002)
        if db is not None:
            db.close()

    def more(self, moves: int, timeout_s: float = 60) -> None:
        until = self.moves + moves
        wait_for(lambda: self.moves >= until, timeout_s, f"{moves} more transfers")


class LedgerReader(threading.Thread):
    """Reads the target's ledger in consistent snapshots as fast as it can; notes every
    broken promise in ``broken`` and counts the reads that saw the ledger part there."""

    def __init__(self, sandbox: Sandbox, schema: str) -> None:
        super().__init__(daemon=True)
        self.sandbox, self.table = sandbox, f"`{schema}`.ledger"
        self.stop = threading.Event()
        self.reads = self.partial = 0
        self.broken: list[str] = []

    def run(self) -> None:
        versions: dict[int, int] = {}
        db: Database | None = None
        while not self.stop.is_set():
            try:
                db = db or Database(self.sandbox, "target")
                db.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                rows = db.rows(f"SELECT id, balance, version FROM {self.table}")
                db.execute("COMMIT")
            except pymysql.MySQLError:
                if db is not None:
                    db.close()
                db = None
                self.stop.wait(0.1)
                continue
            self.check(rows, versions)
            self.stop.wait(0.005)
        if db is not None:
            db.close()

    def check(self, rows: list[tuple[int, int, int]], versions: dict[int, int]) -> None:
        self.reads += 1
        self.partial += 0 < len(rows) < ROWS
        balances = {row_id: balance for row_id, balance, _ in rows}
        for a in range(1, HALF + 1):
            if a in balances and a + HALF in balances and \
                    balances[a] + balances[a + HALF] != 2 * OPENING:
                self.broken.append(f"rows {a} and {a + HALF} sum to "
                                   f"{balances[a] + balances[a + HALF]}: a part of a transfer")
        for row_id, _, version in rows:
            if version < versions.get(row_id, -1):
                self.broken.append(f"row {row_id} went back from version "
                                   f"{versions[row_id]} to {version}")
            versions[row_id] = max(version, versions.get(row_id, -1))
        gone = versions.keys() - balances.keys()
        if gone:
            self.broken.append(f"{len(gone)} row(s) gone after they were there, e.g. "
                               f"{min(gone)}")

    def read_more(self, reads: int, timeout_s: float = 60) -> None:
        until = self.reads + reads
        wait_for(lambda: self.reads >= until or not self.is_alive(), timeout_s,
                 f"{reads} more reads of the target")

    def halt(self) -> None:
        self.stop.set()
        self.join(30)


HOT = "CREATE TABLE `{schema}`.hot (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(30))"
CHURNED = range(3, 603)  # the keys the churn inserts and deletes (strays among them)


class Churn(threading.Thread):
    """Inserts and deletes rows of ``CHURNED`` on the source, each in one transaction with
    the counter row (id 1: how many 'real' rows there are) and the sequence row (id 2: the
    transaction's number, only growing); a real row's ``v`` is the number of the
    transaction that last wrote it (so it only grows too, a key deleted and inserted again
    included)."""

    def __init__(self, sandbox: Sandbox, schema: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.sandbox, self.table, self.seed = sandbox, f"`{schema}`.hot", seed
        self.stop = threading.Event()
        self.done = 0  # transactions committed
        self.kinds = {"insert": 0, "delete": 0, "update": 0}

    def run(self) -> None:
        rng = random.Random(self.seed)
        t = self.table
        db = Database(self.sandbox, "source")
        try:
            [(number,)] = db.rows(f"SELECT v FROM {t} WHERE id = 2")
            real = {row[0] for row in db.rows(f"SELECT id FROM {t} WHERE note = 'real'")}
            while not self.stop.is_set():
                number += 1
                key = rng.choice(CHURNED)
                if key not in real:
                    kind, statements = "insert", [
                        f"INSERT INTO {t} VALUES ({key}, {number}, 'real')",
                        f"UPDATE {t} SET v = v + 1 WHERE id = 1"]
                elif rng.random() < 0.5:
                    kind, statements = "delete", [f"DELETE FROM {t} WHERE id = {key}",
                                                  f"UPDATE {t} SET v = v - 1 WHERE id = 1"]
                else:
                    kind, statements = "update", [
                        f"UPDATE {t} SET v = {number} WHERE id = {key}"]
                db.script("BEGIN", *statements, f"UPDATE {t} SET v = {number} WHERE id = 2",
                          "COMMIT")
                if kind == "delete":
                    real.discard(key)
                else:
                    real.add(key)
                self.kinds[kind] += 1
                self.done += 1
                self.stop.wait(0.01)
        finally:
            db.close()


class CountReader(threading.Thread):
    """Reads the target's ``hot`` in consistent snapshots: the counter row equals the real
    rows counted, the sequence row and every real row's ``v`` never go back, and a key once
    seen real is never seen stray (a repair's D undoing a source row)."""

    def __init__(self, sandbox: Sandbox, schema: str) -> None:
        super().__init__(daemon=True)
        self.sandbox, self.table = sandbox, f"`{schema}`.hot"
        self.stop = threading.Event()
        self.reads = 0
        self.broken: list[str] = []

    def run(self) -> None:
        seen: dict[int, int] = {}  # key -> the greatest v seen real (id 2: the sequence)
        db = Database(self.sandbox, "target")
        try:
            while not self.stop.is_set():
                db.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                rows = db.rows(f"SELECT id, v, note FROM {self.table} WHERE id IN (1, 2) "
                               f"OR id BETWEEN {CHURNED.start} AND {CHURNED.stop - 1}")
                db.execute("COMMIT")
                self.check(rows, seen)
                self.stop.wait(0.005)
        finally:
            db.close()

    def check(self, rows: list[tuple[int, int, str]], seen: dict[int, int]) -> None:
        self.reads += 1
        by_key = {row_id: (v, note) for row_id, v, note in rows}
        real = sum(1 for _, note in by_key.values() if note == "real")
        if by_key[1][0] != real:
            self.broken.append(f"a part of a source transaction: counter {by_key[1][0]}, "
                               f"{real} real row(s)")
        for row_id, (v, note) in by_key.items():
            if row_id == 1 or (note not in ("real", "seq") and row_id not in seen):
                continue
            if note not in ("real", "seq"):
                self.broken.append(f"row {row_id} seen real (v {seen[row_id]}), now {note}")
            elif v < seen.get(row_id, v):
                self.broken.append(f"row {row_id} went back from v {seen[row_id]} to {v}")
            seen[row_id] = max(v, seen.get(row_id, v))

    def read_more(self, reads: int, timeout_s: float = 60) -> None:
        until = self.reads + reads
        wait_for(lambda: self.reads >= until or not self.is_alive(), timeout_s,
                 f"{reads} more reads of the target")

    def halt(self) -> None:
        self.stop.set()
        self.join(30)
