"""A subscription's record of the batches its reader has not acknowledged
(``pipelines/{pid}/unacked``) is the only guard that outlives a pause's published state: a
ZooKeeper that refuses it at first gets it again at each tick of the wait, then, once a stop
ended the wait with batches left, for a bounded time; refused throughout, the pipeline ends
without a pause and its text gives no way past the failed batch (a start waits again)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss

from node.target.subscription.loader import SubscriptionLoader
from shared import acks
from tests.unit.test_position_replays import Zk
from tests.unit.test_position_unacked import loader_on
from tests.unit.test_subscription import parcel
from tests.unit.test_subscription_pause import handed

RECORD = acks.Unacked(parcel(1).end, parcel(3).end, 2)  # batches 2 and 3, after 1


class Refusing(Zk):
    """A ZooKeeper that refuses the first ``refusals`` writes of the record."""

    def __init__(self, refusals: int) -> None:
        super().__init__()
        self.refusals, self.tries = refusals, 0

    def set(self, path: str, data: bytes, version: int = -1) -> None:
        self._refuse(path)
        super().set(path, data, version)

    def create(self, path: str, data: bytes, makepath: bool = False) -> None:
        self._refuse(path)
        super().create(path, data, makepath)

    def _refuse(self, path: str) -> None:
        if path == "/u":
            self.tries += 1
            if self.tries <= self.refusals:
                raise ConnectionLoss()


def pausing(monkeypatch: pytest.MonkeyPatch, zk: Refusing
            ) -> tuple[SubscriptionLoader, int]:
    """A loader acknowledged up to batch 1 with 2 and 3 handed to a reader (its stream),
    whose bounded retry is short (set whatever the loader has: a behaviour, not a name,
    is tested)."""
    monkeypatch.setattr(SubscriptionLoader, "MARK_RETRY_S", 1.0, raising=False)
    monkeypatch.setattr(SubscriptionLoader, "MARK_EVERY_S", 0.01, raising=False)
    loader = loader_on(zk)
    loader.outbox.acked_end = parcel(1).end
    return loader, handed(loader.outbox, 2, 3)


def drained(loader: SubscriptionLoader, stop: threading.Event,
            owns: Callable[[], bool] = lambda: True) -> tuple[str, int]:
    return loader.drain(stop, owns, "feed", lambda text, n: None)


def test_a_record_refused_before_the_wait_is_written_while_it_waits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    zk = Refusing(3)
    loader, reader = pausing(monkeypatch, zk)
    found: list[Any] = []
    stop = threading.Event()
    drain = threading.Thread(target=lambda: found.append(drained(loader, stop)), daemon=True)
    drain.start()
    deadline = time.monotonic() + 10
    while acks.read_unacked(zk, "/u") is None and time.monotonic() < deadline:  # type: ignore[arg-type]
        time.sleep(0.01)
    assert drain.is_alive(), "the drain ended: nobody acknowledged anything"
    assert acks.read_unacked(zk, "/u") == RECORD, "not written during the wait"  # type: ignore[arg-type]
    assert zk.tries == 4  # refused three times (one before the wait), then taken
    loader.outbox.ack(reader, 3)  # the reader came: the pause follows, the record goes
    drain.join(5)
    assert found and found[0][1] == 0 and acks.read_unacked(zk, "/u") is None  # type: ignore[arg-type]


def test_a_stop_with_the_record_refused_tries_again_for_a_while(
        monkeypatch: pytest.MonkeyPatch) -> None:
    zk = Refusing(5)
    loader, _ = pausing(monkeypatch, zk)
    stop = threading.Event()
    stop.set()  # (a stop ended the wait at its first look)
    note, left = drained(loader, stop)
    assert left == 2 and acks.read_unacked(zk, "/u") == RECORD  # type: ignore[arg-type]
    assert "then move past it" in note  # (recorded: a move past them is refused)


def test_a_record_refused_throughout_gives_no_way_past_the_failed_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    zk = Refusing(10**6)
    loader, _ = pausing(monkeypatch, zk)
    stop = threading.Event()
    stop.set()
    note, left = drained(loader, stop)
    assert left == 2 and acks.read_unacked(zk, "/u") is None  # type: ignore[arg-type]
    assert "move past it" not in note and "do NOT move the position past" in note
    assert str(parcel(3).end) in note and "setl channel start feed" in note
    assert zk.tries > 3  # (tried again, for a bounded time: the drain ended)


def test_a_node_that_no_longer_owns_the_pipeline_stops_trying(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The next owner writes its own record when it waits: none is written over it; this
    node's text, with no record of its own, gives no way past the batches (they are not
    acknowledged, whoever owns the pipeline now)."""
    zk = Refusing(1)  # (the one before the wait)
    loader, _ = pausing(monkeypatch, zk)
    note, left = drained(loader, threading.Event(), owns=lambda: False)
    assert left == 2 and zk.tries == 1 and acks.read_unacked(zk, "/u") is None  # type: ignore[arg-type]
    assert "move past it" not in note and "do NOT move the position past" in note
