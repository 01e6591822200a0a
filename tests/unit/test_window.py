"""node/window.py: the sliding window of batches between Select and the end of Load."""

from __future__ import annotations

import threading
import time

import pytest

from node.window import Window

POLL = 0.01
WAIT = 2.0  # generous upper bound; every wait that succeeds returns at once


class Acquirer:
    """Runs ``window.acquire`` in a thread and records its answer."""

    def __init__(self, window: Window, stop: threading.Event) -> None:
        self.started = threading.Event()
        self.done = threading.Event()
        self.result: bool | None = None

        def run() -> None:
            self.started.set()
            self.result = window.acquire(stop, poll_s=POLL)
            self.done.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert self.started.wait(WAIT)

    def join(self) -> None:
        self.thread.join(WAIT)
        assert not self.thread.is_alive()


def assert_blocked_until_stopped(window: Window, stop: threading.Event) -> None:
    """A new acquire waits on the full window, and gives up (False) once ``stop`` is set."""
    waiter = Acquirer(window, stop)
    assert not waiter.done.wait(0.1)
    stop.set()
    assert waiter.done.wait(WAIT)
    waiter.join()
    assert waiter.result is False


def test_acquire_up_to_size() -> None:
    window, stop = Window(3), threading.Event()
    assert [window.acquire(stop, POLL) for _ in range(3)] == [True, True, True]
    assert window.used == 3
    assert window.peak == 3
    assert window.size == 3


def test_acquire_blocks_while_full_until_a_release() -> None:
    window, stop = Window(2), threading.Event()
    assert window.acquire(stop, POLL) and window.acquire(stop, POLL)
    waiter = Acquirer(window, stop)
    assert not waiter.done.wait(0.1)  # the window is full: still waiting
    assert waiter.result is None
    assert window.used == 2
    window.release()
    assert waiter.done.wait(WAIT)
    waiter.join()
    assert waiter.result is True
    assert window.used == 2
    assert window.peak == 2


def test_acquire_returns_false_when_stopped_before() -> None:
    window, stop = Window(2), threading.Event()
    stop.set()
    assert window.acquire(stop, POLL) is False
    assert window.used == 0
    assert window.peak == 0


def test_blocked_acquire_returns_false_when_stopped() -> None:
    window, stop = Window(1), threading.Event()
    assert window.acquire(stop, POLL) is True
    assert_blocked_until_stopped(window, stop)
    assert window.used == 1  # the stopped acquire took no slot
    window.release()
    assert window.used == 0


def test_peak_is_the_highest_use_seen() -> None:
    window, stop = Window(4), threading.Event()
    for _ in range(3):
        assert window.acquire(stop, POLL)
    window.release()
    window.release()
    assert (window.used, window.peak) == (1, 3)
    assert window.acquire(stop, POLL)
    assert (window.used, window.peak) == (2, 3)
    for _ in range(2):
        assert window.acquire(stop, POLL)
    assert (window.used, window.peak) == (4, 4)


def test_release_without_acquire_raises() -> None:
    window = Window(2)
    with pytest.raises(RuntimeError) as caught:
        window.release()
    assert str(caught.value) == "window released more often than acquired"
    assert window.used == 0


def test_extra_release_raises_and_does_not_widen_the_window() -> None:
    window, stop = Window(1), threading.Event()
    assert window.acquire(stop, POLL)
    window.release()
    with pytest.raises(RuntimeError):
        window.release()
    assert window.acquire(stop, POLL) is True
    # the failed release freed no slot: a second acquire still has to wait
    assert_blocked_until_stopped(window, stop)
    assert (window.used, window.peak) == (1, 1)


def test_many_threads_never_exceed_the_size() -> None:
    window, stop = Window(3), threading.Event()
    waiters = [Acquirer(window, stop) for _ in range(5)]
    deadline = time.monotonic() + WAIT
    while sum(w.done.is_set() for w in waiters) < 3 and time.monotonic() < deadline:
        time.sleep(POLL)
    time.sleep(0.05)  # give a fourth acquire the chance to slip through, were it possible
    assert sum(w.done.is_set() for w in waiters) == 3
    assert window.used == 3
    window.release()
    window.release()
    for w in waiters:
        assert w.done.wait(WAIT)
        w.join()
    assert [w.result for w in waiters] == [True] * 5
    assert (window.used, window.peak) == (3, 3)


def test_wait_alone_wakes_when_the_batch_before_is_released() -> None:
    window, stop = Window(3), threading.Event()
    assert window.acquire(stop, POLL) and window.wait_alone(WAIT)  # Select's own only: at once
    assert window.acquire(stop, POLL)  # the next batch Select gathers; the first on its way
    assert window.wait_alone(0.01) is False  # the batch before is not loaded: times out
    answered: list[bool] = []
    sleeper = threading.Thread(target=lambda: answered.append(window.wait_alone(WAIT)))
    began = time.monotonic()
    sleeper.start()
    window.release()  # the batch before is loaded
    sleeper.join(WAIT)
    assert answered == [True] and time.monotonic() - began < WAIT


def test_extra_slots_are_taken_only_while_the_batches_held_carry_few_bytes() -> None:
    window, stop = Window(2, extra=3, extra_bytes=1000), threading.Event()
    for size in (600, 600):  # the base slots whatever their batches hold
        assert window.acquire(stop, POLL)
        window.hold(size)
    waiter = Acquirer(window, stop)  # an extra slot, but 1,200 bytes are held
    assert not waiter.done.wait(0.1)
    window.release(600)
    assert waiter.done.wait(WAIT)  # a base slot came free
    waiter.join()
    window.hold(100)  # 700 held
    assert window.acquire(stop, POLL)  # extra, 700 < 1,000
    window.hold(200)
    assert window.acquire(stop, POLL)  # extra, 900 < 1,000
    window.hold(200)
    assert (window.used, window.size) == (4, 5)
    assert_blocked_until_stopped(window, stop)  # 1,100 held: the fifth slot waits


def test_extra_slots_never_go_past_the_size() -> None:
    window, stop = Window(1, extra=1), threading.Event()
    assert window.acquire(stop, POLL) and window.acquire(stop, POLL)
    assert_blocked_until_stopped(window, stop)
    assert window.used == 2
