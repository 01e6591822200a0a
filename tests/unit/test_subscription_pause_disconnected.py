"""A subscription's wait for its reader before a pause, with ZooKeeper away: a write to a
disconnected client waits for the connection (kazoo queues it; the node's client gives up
after its call timeout only), so neither the record of the unacknowledged batches nor the
wait's published state is written then, and a stop ends the wait at once; the record's
retry after a stop ends well before the node stops waiting for its runners (a SIGTERM ends
the process then); and a node that wrote no record says so, whoever owns the pipeline now."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from node.daemon import STOP_RUNNERS_S
from node.target.subscription import outbox
from node.target.subscription.loader import SubscriptionLoader
from shared import acks
from shared.errors import ConfigError
from tests.unit.test_runner_state import runner
from tests.unit.test_subscription_record_refused import Refusing, drained, pausing

NO_RECORD = "do NOT move the position past"


class Away(Refusing):
    """A ZooKeeper the client is disconnected from: a write waits until it is back."""

    def __init__(self) -> None:
        super().__init__(0)
        self.connected, self.back, self.waited = False, threading.Event(), 0

    def _refuse(self, path: str) -> None:
        if not self.connected:
            self.waited += 1
            self.back.wait()
        super()._refuse(path)


def test_a_wait_begun_while_disconnected_ends_at_a_stop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    zk = Away()
    loader, _ = pausing(monkeypatch, zk)
    stop = threading.Event()
    found: list[tuple[str, int]] = []
    drain = threading.Thread(target=lambda: found.append(drained(loader, stop)), daemon=True)
    drain.start()
    try:
        stop.set()  # (the operator's stop, a shutdown)
        drain.join(30)  # (a bound for a wait that would hang until ZooKeeper is back)
        assert zk.waited == 0, "a write waited for ZooKeeper: the stop went unheard"
        assert not drain.is_alive() and found[0][1] == 2
        assert NO_RECORD in found[0][0] and acks.read_unacked(zk, "/u") is None  # type: ignore[arg-type]
    finally:
        zk.back.set()


@pytest.mark.parametrize(("connected", "published"), [(False, 0), (True, 1)])
def test_the_wait_is_not_published_while_disconnected(connected: bool, published: int
                                                      ) -> None:
    """The node's refresh publishes it once ZooKeeper is back (a write now would wait)."""
    found = runner(unacked_left=0, _pause_note="")
    found.ctx.client = SimpleNamespace(connected=connected)
    found.ctx.owns = lambda: True
    writes: list[str] = []
    found.publish = lambda: writes.append(found.state)  # type: ignore[method-assign]

    def drain(stop: threading.Event, owns: Any, channel: str, report: Any) -> tuple[str, int]:
        report("pausing: 2 batch(es) unacknowledged", 2)
        return "\ncut short", 2
    found._before_pause(SimpleNamespace(drain=drain),  # type: ignore[arg-type]
                        ConfigError("the source ran 'TRUNCATE t'"))
    assert len(writes) == published
    assert found.state == "pausing" and "2 batch(es) unacknowledged" in found.last_error


def test_the_record_retry_ends_before_the_node_stops_waiting_for_its_runners() -> None:
    """After a stop the wait notices it within a poll, retries the record, then the runner
    publishes its last state: all of it before SIGTERM ends the process (runner threads
    are daemon threads), or event=unacked_marker_lost is never logged."""
    retry = outbox.POLL_S + SubscriptionLoader.MARK_RETRY_S + SubscriptionLoader.MARK_EVERY_S
    assert STOP_RUNNERS_S - retry >= 2.0, (retry, STOP_RUNNERS_S)


def test_a_node_that_wrote_no_record_and_lost_the_pipeline_gives_no_way_past(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ZooKeeper away through the wait and the retry, then back on a new session (another
    node may own the pipeline): no record of this node's refuses a move past the batches."""
    zk = Refusing(10**6)
    zk.connected = False  # type: ignore[attr-defined]
    loader, _ = pausing(monkeypatch, zk)
    began = time.monotonic()

    def owns() -> bool:  # (node.pausing's _may_own: disconnected, True; a new session, False)
        if time.monotonic() - began > 0.2:
            zk.connected = True  # type: ignore[attr-defined]
            return False
        return True
    stop = threading.Event()
    stop.set()  # (the supervisor stops the runner when the session is lost)
    note, left = drained(loader, stop, owns)
    assert left == 2 and acks.read_unacked(zk, "/u") is None  # type: ignore[arg-type]
    assert NO_RECORD in note and "move past it" not in note
