"""A target connection lost (its server's ``wait_timeout``, a proxy, a restart: here a KILL
from another session) while a new owner claims the pipeline's position row or takes an
epoch over goes once more on a new connection instead of failing the start; and a new
owner ends a frozen older owner's connections before it waits for their lock.

No pipeline runs here: the owners' Loaders are driven directly. The keyless, unique-swap and
sum tables of tests/integration/shapes.py are what the claim and the takeover protect beside
``items``: each batch carries their changes as Transform gives them (two equal rows of the
keyless table and one of an earlier pair changed, a swap of two unique slots through a free
value, a transfer). The batch the older owner loaded, sent again by the new one after its
claim or takeover on a new connection, writes nothing (a keyless row would be a duplicate);
a frozen owner's uncommitted half-transfer and keyless row go with its connection; the
tables are then compared as multisets with what the loaded batches make.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pymysql
import pytest

from node import start
from node.changes import ChangeType, TargetChange
from node.target.mysql import owners
from node.target.mysql.loader import Loader
from shared.model import PipelineParams
from shared.sandbox import Sandbox
from tests.devcluster import Database, make_schema
from tests.integration.shapes import Shapes
from tests.integration.test_load import ITEMS, batch, target_endpoint, upsert


def killing_first(target: Database, real: Callable[..., Any]) -> Callable[..., Any]:
    """``real``, whose first call finds its connection killed (as a server that closed it
    while it sat idle)."""
    calls = [0]

    def call(conn: Any, *args: Any) -> Any:
        calls[0] += 1
        if calls[0] == 1:
            target.execute(f"KILL CONNECTION {conn.thread_id()}")
        return real(conn, *args)
    return call


def position(target: Database, pipeline_id: str) -> list[tuple[Any, ...]]:
    return target.rows("SELECT binlog_pos, owner_epoch FROM retl.retl_position WHERE "
                       "pipeline_id = %s", (pipeline_id,))


class Written:
    """The workload's tables as a run of batches leaves them, and each batch's changes."""

    def __init__(self, shapes: Shapes) -> None:
        self.shapes, self.schema = shapes, shapes.schema
        opening = shapes.opening()
        self.kl: Counter[tuple[Any, ...]] = Counter()
        self.sl = dict(opening["sl"])
        self.accounts = {i: (balance, version) for i, balance, version in opening["accounts"]}

    def step(self, n: int) -> list[TargetChange]:
        """Batch ``n``'s changes (1, 2, …; each once), made to the expected rows too."""
        changes = [self._change("kl", ChangeType.INSERT, (), {"a": n, "b": f"v{n}"})] * 2
        self.kl[(n, f"v{n}")] += 2
        if n > 1:  # one of the earlier pair of equal rows changed: found by its image
            before, after = {"a": n - 1, "b": f"v{n - 1}"}, {"a": n - 1, "b": "changed"}
            changes.append(self._change("kl", ChangeType.UPDATE, (), after, before))
            self.kl[(n - 1, f"v{n - 1}")] -= 1
            self.kl[(n - 1, "changed")] += 1
        a, b = n, n + 1  # a swap of their unique slots, through a free value
        was_a, was_b = self.sl[a], self.sl[b]
        for row, slot in ((a, -1), (b, was_a), (a, was_b)):
            changes.append(self._change("sl", ChangeType.UPDATE, (row,),
                                        {"id": row, "slot": slot}))
        self.sl[a], self.sl[b] = was_b, was_a
        for account, amount in ((n, -5), (n + 1, 5)):  # a transfer: the sum stays
            balance, version = self.accounts[account]
            self.accounts[account] = (balance + amount, version + 1)
            changes.append(self._change("accounts", ChangeType.UPDATE, (account,), {
                "id": account, "balance": balance + amount, "version": version + 1}))
        return [change._replace(seq=i) for i, change in enumerate(changes)]

    def _change(self, table: str, kind: ChangeType, key: tuple[Any, ...],
                after: dict[str, Any], before: dict[str, Any] | None = None) -> TargetChange:
        keys = ("id",) if key else ()
        return TargetChange("target", self.schema, table, kind, keys, key or None, after,
                            before=before)

    def check(self, target: Database) -> None:
        """The target holds the expected rows, as multisets (the generated column aside)."""
        rows = {name: Counter(found) for name, found in self.shapes.rows(target).items()}
        assert rows == {name: Counter() for name in rows} | {
            "kl": +self.kl, "sl": Counter(self.sl.items()),
            "accounts": Counter((i, *values) for i, values in self.accounts.items())}


@dataclass
class Owners:
    """A pipeline's older owner, which loaded batch 1 (``first``: an ``items`` row and the
    workload's changes), and a new owner of epoch 20, not yet claimed."""

    schema: str
    pipeline_id: str
    written: Written
    old: Loader
    new: Loader
    first: list[TargetChange]

    def replayed_then_next(self) -> None:
        """The new owner, holding the row: batch 1 sent again writes nothing (a keyless row
        would be a duplicate), batch 2 is loaded."""
        assert self.new.load(batch(1, 100), self.first) == 0  # applied already
        second = [upsert(self.schema, 1, "new"), *self.written.step(2)]
        assert self.new.load(batch(2, 200), second) == len(second)


@contextmanager
def loaded(sandbox: Sandbox, source: Database, target: Database, name: str, older: int,
           seed: int) -> Iterator[Owners]:
    """:class:`Owners` of the pipeline ``name``, the older of epoch ``older``; both closed at
    the end."""
    schema = make_schema(source, target, ITEMS)
    written = Written(Shapes(sandbox, source, target, seed=seed))
    pipeline_id = f"{name}-{schema}.forward"
    old, new = (Loader(pipeline_id, {"target": target_endpoint(sandbox)}, PipelineParams(),
                       epoch=epoch) for epoch in (older, 20))
    try:
        first = [upsert(schema, 1, "old" if older < 20 else "gone"), *written.step(1)]
        assert old.load(batch(1, 100), first) == len(first)  # one a change
        yield Owners(schema, pipeline_id, written, old, new, first)
    finally:
        old.close()
        new.close()


def test_a_claim_whose_connection_was_lost_is_made_on_a_new_one(
        sandbox, source, target, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="setl")
    with loaded(sandbox, source, target, "claim-lost", 10, 41) as p:
        p.old.close()
        monkeypatch.setattr(owners, "claim", killing_first(target, owners.claim))
        found = p.new.claim()
        assert found["target"] is not None and found["target"].position.pos == 100
        assert f"event=claim_reconnect pipeline={p.pipeline_id} target=target" in caplog.text
        assert position(target, p.pipeline_id) == [(100, 20)]  # fenced under the new epoch
        p.replayed_then_next()
        assert target.table(p.schema, "items") == [(1, "new")]
        assert position(target, p.pipeline_id) == [(200, 20)]
        p.written.check(target)


def test_a_takeover_whose_connection_was_lost_is_made_on_a_new_one(
        sandbox, source, target, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """ZooKeeper's history went back: the row holds epoch 30 of an owner that is gone; the
    owner of epoch 20 takes 31 over, its first connection lost on the way."""
    caplog.set_level(logging.INFO, logger="setl")
    with loaded(sandbox, source, target, "adopt-lost", 30, 43) as p:
        p.old.close()
        monkeypatch.setattr(owners, "adopt", killing_first(target, owners.adopt))
        found = start.claim(p.new, lambda: True, 20, p.pipeline_id)
        assert found["target"] is not None and found["target"].position.pos == 100
        assert f"event=take_over_reconnect pipeline={p.pipeline_id} target=target" in \
            caplog.text
        assert p.new.epoch == 31 and position(target, p.pipeline_id) == [(100, 31)]
        p.replayed_then_next()
        assert position(target, p.pipeline_id) == [(200, 31)]
        p.written.check(target)


def test_a_takeover_whose_commit_answer_was_lost_is_not_made_twice(
        sandbox, source, target, monkeypatch: pytest.MonkeyPatch) -> None:
    """The takeover committed, its answer lost: made again, it finds the row moved (a
    compare-and-set), and the claim goes on from the epoch it finds, whose only
    connection is gone — never beside a live writer."""
    real, calls = owners.adopt, [0]

    def committed_then_lost(conn: Any, *args: Any) -> Any:
        result = real(conn, *args)
        calls[0] += 1
        if calls[0] == 1:
            target.execute(f"KILL CONNECTION {conn.thread_id()}")
            raise pymysql.err.OperationalError(2013, "Lost connection to server during query")
        return result
    with loaded(sandbox, source, target, "adopt-commit", 30, 47) as p:
        p.old.close()
        monkeypatch.setattr(owners, "adopt", committed_then_lost)
        start.claim(p.new, lambda: True, 20, p.pipeline_id)
        assert p.new.epoch == 32 and position(target, p.pipeline_id) == [(100, 32)]
        p.replayed_then_next()
        assert target.table(p.schema, "items") == [(1, "new")]
        p.written.check(target)


def test_a_new_owner_ends_a_frozen_owners_transaction_before_waiting_for_its_lock(
        sandbox, source, target, monkeypatch) -> None:
    """A frozen older owner's open transaction holds the position row: the new owner's
    claim ended its connections only after waiting LOCK_WAIT_S for that lock. They are
    registered under an older epoch: ended first, the claim does not wait (the wait made
    long here, so that a claim made in time cannot have waited it out on a loaded machine)."""
    monkeypatch.setattr(owners, "LOCK_WAIT_S", 120)
    with loaded(sandbox, source, target, "claim-first", 10, 53) as p:
        frozen = p.old._connection("target")  # as if the old owner froze mid-transaction
        with frozen.cursor() as cursor:
            cursor.execute("SELECT * FROM retl.retl_position WHERE pipeline_id = %s "
                           "FOR UPDATE", (p.pipeline_id,))
            cursor.execute(f"INSERT INTO `{p.schema}`.items VALUES (2, 'stale')")
            # a keyless row again (a duplicate once committed) and half a transfer
            cursor.execute(f"INSERT INTO `{p.written.schema}`.kl VALUES (1, 'v1')")
            cursor.execute(f"UPDATE `{p.written.schema}`.accounts SET balance = balance - 50 "
                           "WHERE id = 1")
        began = time.monotonic()
        found = p.new.claim()
        assert time.monotonic() - began < owners.LOCK_WAIT_S / 2
        assert found["target"] is not None and found["target"].position.pos == 100
        with pytest.raises(pymysql.MySQLError), frozen.cursor() as cursor:
            cursor.execute("COMMIT")  # its connection is gone: it writes nothing
        assert target.table(p.schema, "items") == [(1, "old")]  # the stale row rolled back
        p.written.check(target)  # and the stale keyless row and half-transfer
        assert position(target, p.pipeline_id) == [(100, 20)]
