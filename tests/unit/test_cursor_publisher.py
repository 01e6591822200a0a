"""node/cursor.py's CursorPublisher: the newest cursor reaches the store, coalesced, off the
caller's thread; a failing store is retried; close publishes the last one."""

from __future__ import annotations

import threading

from kazoo.exceptions import BadVersionError

from node.cursor import Cursor, CursorMovedError, CursorPublisher, CursorStore
from shared.model import BinlogPosition
from shared.zk import ZkPaths
from tests.devcluster import wait_for


class Store:
    def __init__(self, failures: int = 0) -> None:
        self.saved: list[Cursor] = []
        self.failures = failures
        self.gate = threading.Event()
        self.gate.set()

    def save(self, cursor: Cursor) -> None:
        self.gate.wait(5)
        if self.failures:
            self.failures -= 1
            raise ConnectionError("zookeeper away")
        self.saved.append(cursor)


def cursor(n: int) -> Cursor:
    return Cursor(BinlogPosition("binlog.000001", n), n)


def test_publishes_the_newest_and_coalesces_what_came_meanwhile() -> None:
    store = Store()
    store.gate.clear()  # the first save hangs, as a slow ZooKeeper would
    publisher = CursorPublisher(store, interval_s=0.01)  # type: ignore[arg-type]
    publisher.publish(cursor(1))
    for n in range(2, 50):
        publisher.publish(cursor(n))  # never blocks on the store
    assert store.saved == []  # all published while the store hangs
    store.gate.set()
    wait_for(lambda: store.saved and store.saved[-1] == cursor(49), 5, "the newest cursor")
    publisher.close()
    assert len(store.saved) <= 3  # 49 cursors, coalesced


def test_a_failing_store_is_tried_again_and_close_flushes() -> None:
    errors: list[Exception] = []
    store = Store(failures=2)
    publisher = CursorPublisher(store, interval_s=0.01, on_error=errors.append)  # type: ignore[arg-type]
    publisher.publish(cursor(7))
    wait_for(lambda: store.saved == [cursor(7)], 5, "the cursor after two failures")
    assert len(errors) == 2
    publisher.publish(cursor(8))
    publisher.close()
    assert store.saved[-1] == cursor(8)


def test_a_cursor_moved_meanwhile_is_said_to_stop_the_runner_by_its_fence() -> None:
    """The publisher only logs a cursor set by someone else (the runner goes on); its
    message says so, and what stops the runner: the targets' newer epoch, not the save."""
    class Moved:  # a ZooKeeper whose cursor someone else wrote since this runner read it
        def set(self, *args: object, **kwargs: object) -> object:
            raise BadVersionError()

        def get(self, path: str) -> tuple[bytes, object]:
            raise BadVersionError()  # (not asked: no write of its own was lost)

    store = CursorStore(Moved(), ZkPaths("/setl"), "c.p")  # type: ignore[arg-type]
    store._version = 3
    errors: list[Exception] = []
    publisher = CursorPublisher(store, interval_s=0.01, on_error=errors.append)
    publisher.publish(cursor(9))
    publisher.close()
    assert errors and isinstance(errors[-1], CursorMovedError)
    message = str(errors[-1])
    assert "refused and logged" in message and "fences this runner" in message
    assert "stops at its next batch" not in message
