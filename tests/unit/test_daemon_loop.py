"""node/daemon.py: the node's main loop reads the stored definitions when its watcher says
they changed, and once at the start."""

from __future__ import annotations

from types import SimpleNamespace

from node.daemon import Node
from node.watcher import Stored
from shared.errors import CoordinationError
from shared.lifecycle import Shutdown


class Unchanged:
    """A watcher's ``changed`` that no change ever sets (nothing to wait for here)."""

    def wait(self, timeout_s: float) -> bool:
        return False

    def set(self) -> None:
        pass


class Watcher:
    def __init__(self, fail_first: bool = False) -> None:
        self.changed = Unchanged()
        self.snapshots = 0
        self.fail_first = fail_first

    def snapshot(self) -> Stored:
        self.snapshots += 1
        if self.fail_first and self.snapshots == 1:
            raise CoordinationError("ZooKeeper did not answer")
        return Stored([], {})  # no channel stored


def serve(watcher: Watcher, refreshes: int) -> list[Stored]:
    """Run the node's main loop for ``refreshes`` refreshes; the snapshots each was given."""
    node = object.__new__(Node)
    node.node_id, node.shutdown, node.watcher = 1, Shutdown(), watcher  # type: ignore[assignment]
    node._unavailable_said = 0.0
    node.shutdown.wait = lambda timeout_s=None: False  # type: ignore[method-assign]
    given: list[Stored] = []

    def refresh(membership: object, stored: Stored) -> None:
        given.append(stored)
        if len(given) == refreshes:
            node.shutdown.requested.set()
    node._refresh = refresh  # type: ignore[method-assign]
    node._stop = lambda membership: None  # type: ignore[method-assign]
    node._unavailable = lambda exc: None  # type: ignore[method-assign]
    node._serve(SimpleNamespace(info=SimpleNamespace(address="h:1")))  # type: ignore[arg-type]
    return given


def test_a_node_with_no_channels_reads_the_definitions_once_until_they_change() -> None:
    """Each snapshot reads every source's znode; with no channel stored, the node took a
    snapshot on every turn of its loop (twice a second)."""
    watcher = Watcher()
    given = serve(watcher, refreshes=5)
    assert len(given) == 5
    assert watcher.snapshots == 1


def test_definitions_zookeeper_did_not_give_are_read_again() -> None:
    watcher = Watcher(fail_first=True)
    given = serve(watcher, refreshes=2)
    assert watcher.snapshots == 2
    assert len(given) == 2
