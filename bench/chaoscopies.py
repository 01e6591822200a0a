"""The chaos soak's ``--copies`` workload: copies asked while the faults come, waited for by
no one until the end (see bench/chaos.py).

Every ``every_s`` seconds (0.5-1.5 times, at random) one of:

- ``setl snapshot CHANNEL --table chaos.T`` (the manager's Snapshot call) of a table of the
  workloads: the keyed ones are copied in chunks between watermarks while the stream runs;
  the keyless ``kl`` cannot be copied (a row copied twice would be there twice): the manager
  refuses the ask (INVALID_ARGUMENT, saying why), counted as refused, not as a failure (a
  copy of it the node took anyway must end ``failed``);
- a free-door backfill: ``I``, ``U`` or ``D`` requests for a random set of keys of a keyed
  table, written into the source's ``retl.retl_buffer`` (per instance: the pipeline reads
  them from its binlog), now and then a request for ``kl`` that must be rejected.

An ask that fails (the manager cannot reach ZooKeeper while it restarts, the source's
connection killed) is counted and asked again at the next turn. At the end :meth:`settle`
waits until every copy asked has ended and the source's buffer and pending requests are
empty, and reports the copies by state; a keyed table's copy that ended otherwise than
``done`` fails the soak.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import grpc
import pymysql

from bench.chaosload import DB
from shared.retl import encode_key
from shared.rpc import manager_pb2
from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database

SNAPSHOT_TABLES = ("accounts", "journal", "sl", "kl", "sbtest1", "sbtest2")
KEYED = ("accounts", "journal", "sl", "sbtest1", "sbtest2")
KEYLESS = ("kl",)
# the pipeline's snapshot_chunk_size and _parallelism with --copies: a table of many
# windows, so that a copy is under way when faults come (journal: thousands of chunks)
CHUNK_ROWS, PARALLEL = 10, 2
BUFFER = "INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA) VALUES (%s, %s, %s)"


@dataclass
class CopyLog:
    """What the copies workload asked and what came of it."""

    snapshots: Counter[str] = field(default_factory=Counter)  # asked and taken, by table
    backfills: int = 0  # backfill rounds written
    requests: Counter[str] = field(default_factory=Counter)  # free-door rows by type
    keyless_requests: int = 0  # requests for kl written (each must be rejected)
    refused: list[str] = field(default_factory=list)  # snapshots of kl refused, as said
    ask_errors: list[str] = field(default_factory=list)  # asks that failed (asked again)
    log: list[dict[str, Any]] = field(default_factory=list)


class Copies:
    def __init__(self, box: Sandbox, cluster: Cluster, channel: str, stop: threading.Event,
                 rng: random.Random, every_s: float = 20.0) -> None:
        self.box, self.cluster, self.channel, self.stop = box, cluster, channel, stop
        self.rng = random.Random(rng.random())
        self.every_s = every_s
        self.copies = CopyLog()
        self.source: Database | None = None

    def copier(self) -> None:
        """The thread: a copy every ``every_s`` seconds or so, until ``stop``."""
        while not self.stop.wait(self.every_s * self.rng.uniform(0.5, 1.5)):
            kind = self.rng.choice(("snapshot", "backfill"))
            self.one(kind)

    def one(self, kind: str, table: str = "") -> None:
        """Ask one copy of ``kind`` (snapshot or backfill) of ``table`` (default: chosen at
        random); a failed ask is counted, not raised."""
        if not table:
            table = self.rng.choice(SNAPSHOT_TABLES if kind == "snapshot"
                                    else KEYED + KEYED + KEYLESS)
        try:
            if kind == "snapshot":
                self.snapshot(table)
            else:
                self.backfill(table)
        except (grpc.RpcError, pymysql.MySQLError, OSError) as exc:
            text = exc.details() if isinstance(exc, grpc.RpcError) else str(exc)
            self.copies.ask_errors.append(f"{time.strftime('%H:%M:%S')} {kind} {table}: "
                                          f"{type(exc).__name__}: {text}"[:300])
            if self.source is not None:
                try:
                    self.source.close()
                except pymysql.MySQLError:
                    pass
                self.source = None

    def snapshot(self, table: str) -> None:
        try:
            self.cluster.call("Snapshot", manager_pb2.SnapshotRequest(
                channel=self.channel, action="start", table=f"{DB}.{table}"))
        except grpc.RpcError as exc:
            if (table in KEYLESS and exc.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
                    and "no primary key" in exc.details()):  # type: ignore[attr-defined]
                self.copies.refused.append(exc.details())  # type: ignore[attr-defined]
                print(f"copy: snapshot of {table} refused, as it must be", flush=True)
                return
            raise
        self.copies.snapshots[table] += 1
        self.copies.log.append({"at": time.strftime("%H:%M:%S"), "snapshot": table})
        print(f"copy: snapshot of {table} asked", flush=True)

    def backfill(self, table: str) -> None:
        if self.source is None:
            self.source = Database(self.box, "source")
        db = self.source
        if table in KEYLESS:  # rejected: the table has no key of its own
            rows = [(f"{DB}.{table}", "I", encode_key([1]))]
            self.copies.keyless_requests += 1
        else:
            many = self.rng.choice((1, 5, 50, 300))
            keys = [row[0] for row in db.rows(
                f"SELECT id FROM {DB}.{table} ORDER BY RAND() LIMIT {many}")]
            kinds = self.rng.choice(("I", "U", "D", "IUD"))
            rows = [(f"{DB}.{table}", self.rng.choice(kinds), encode_key([key]))
                    for key in keys]
            if self.rng.random() < 0.2:  # a key the source does not have: missing
                rows.append((f"{DB}.{table}", "I", encode_key([10_000_000])))
        db.conn.cursor().executemany(BUFFER, rows)
        self.copies.backfills += 1
        self.copies.requests.update(kind for _, kind, _ in rows)
        self.copies.log.append({"at": time.strftime("%H:%M:%S"), "backfill": table,
                                "requests": len(rows)})
        print(f"copy: backfill of {len(rows)} {table} row(s) asked", flush=True)

    # -- the end --------------------------------------------------------------------------
    def settle(self, timeout_s: float) -> dict[str, Any]:
        """Wait until every copy asked has ended and no request is left on the source; what
        came of them (``failures`` empty when each is as it must be)."""
        if self.source is not None:
            self.source.close()
            self.source = None
        deadline = time.monotonic() + timeout_s
        listed: list[manager_pb2.TableCopy] = []
        left: dict[str, int] = {}
        while True:
            try:
                listed = list(self.cluster.pipeline_state(self.channel).snapshots)
                left = self._left()
            except (grpc.RpcError, pymysql.MySQLError) as exc:
                left = {"unreadable": 1, str(exc)[:80]: 1}
            ours = [c for c in listed if c.table.startswith(f"{DB}.")]
            ended = [c for c in ours if c.state != "copying"]
            if (len(ended) == len(ours) >= sum(self.copies.snapshots.values())
                    and not any(left.values())) or time.monotonic() > deadline:
                break
            time.sleep(1)
        by_state = Counter(f"{c.table.removeprefix(DB + '.')}:{c.state}" for c in ours)
        failures = [f"copy of {c.table} {c.state}: {c.error}" for c in ours
                    if c.table.removeprefix(DB + ".") in KEYED and c.state != "done"]
        refused = [c for c in ours if c.table.removeprefix(DB + ".") in KEYLESS]
        failures += [f"copy of {c.table} ended {c.state} (a keyless table must be refused)"
                     for c in refused if c.state != "failed"]
        if len(ours) < sum(self.copies.snapshots.values()):
            failures.append(f"{sum(self.copies.snapshots.values())} copies asked, "
                            f"{len(ours)} listed after {timeout_s:.0f} s")
        if any(left.values()):
            failures.append(f"requests left after {timeout_s:.0f} s: {left}")
        return {
            "snapshots_asked": dict(self.copies.snapshots),
            "copies_by_state": dict(sorted(by_state.items())),
            "copies_done": sum(c.state == "done" for c in ours),
            "rows_copied": sum(c.rows for c in ours),
            "keyless_refused": len(self.copies.refused) + len(refused),
            "keyless_refused_why": (self.copies.refused + [c.error for c in refused])[:1],
            "backfills": self.copies.backfills,
            "requests": dict(self.copies.requests),
            "keyless_requests": self.copies.keyless_requests,
            "ask_errors": len(self.copies.ask_errors),
            "ask_error_samples": self.copies.ask_errors[:5],
            "requests_left": left, "failures": failures, "log": self.copies.log}

    def _left(self) -> dict[str, int]:
        """Free-door requests of the soak's tables not served yet on the source."""
        db = Database(self.box, "source")
        try:
            buffer = db.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE FULL_NAME LIKE %s",
                             (f"{DB}.%",))[0][0]
            pending = db.rows("SELECT COUNT(*) FROM retl.retl_pending WHERE FULL_NAME LIKE %s",
                              (f"{DB}.%",))[0][0]
        finally:
            db.close()
        return {"buffer": int(buffer), "pending": int(pending)}
