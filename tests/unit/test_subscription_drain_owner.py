"""A subscription's wait for its reader before a pause goes on while ZooKeeper is
disconnected with the session intact (nobody else can take the pipeline then: its mainstem
is the session's); it ends when this node is known not to own the pipeline any more."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from node.target.subscription.loader import SubscriptionLoader
from node.target.subscription.outbox import Outbox
from shared.errors import ConfigError
from tests.unit.test_position_unacked import Zk
from tests.unit.test_runner_state import runner
from tests.unit.test_subscription_pause import handed


def waiting(connected: bool, owns: bool) -> tuple[threading.Thread, int, Outbox, list[int]]:
    """A runner pausing a subscription with batches 1 and 2 unacknowledged, in a thread."""
    found = runner(unacked_left=0, _pause_note="")
    found.ctx.client = SimpleNamespace(connected=connected)
    found.ctx.owns = lambda: owns
    found.publish = lambda: None  # type: ignore[method-assign]
    loader = object.__new__(SubscriptionLoader)
    loader.pipeline_id, loader.name, loader.unacked_path = "shop.forward", "feed-s", "/u"
    loader.dropped = []
    loader.store = SimpleNamespace(client=Zk())  # type: ignore[assignment]
    box = loader.outbox = Outbox("shop.forward", 5, lambda p: None)
    reader = handed(box, 1, 2)
    left: list[int] = []

    def pause() -> None:
        found._before_pause(loader, ConfigError("the source ran 'TRUNCATE t'"))
        left.append(found.unacked_left)
    thread = threading.Thread(target=pause, daemon=True)
    thread.start()
    return thread, reader, box, left


def test_a_drain_waits_on_through_a_disconnection() -> None:
    thread, reader, box, left = waiting(connected=False, owns=False)
    thread.join(1.5)  # (a few of the drain's polls: owns() answers False throughout)
    assert thread.is_alive() and left == []
    box.ack(reader, 2)  # the reader acknowledges them: the pause follows
    thread.join(5)
    assert not thread.is_alive() and left == [0]


def test_a_drain_ends_once_connected_and_not_owning() -> None:
    thread, _, _, left = waiting(connected=True, owns=False)
    thread.join(5)
    assert not thread.is_alive() and left == [2]
