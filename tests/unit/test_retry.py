"""The retry policy, with an injected sleep and clock (no real waiting)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from shared.retry import RetryPolicy


class FakeTime:
    """A clock that only moves when ``sleep`` is called; records every wait."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


def policy(fake: FakeTime, **kwargs: object) -> RetryPolicy:
    options: dict[str, object] = {"delay_s": 1.0, "backoff": 2.0, "jitter": 0.0,
                                  "max_delay_s": 100.0}
    options.update(kwargs)
    return RetryPolicy(sleep=fake.sleep, clock=fake.clock, **options)  # type: ignore[arg-type]


def failing(times: int, error: type[Exception] = ConnectionError,
            result: str = "ok") -> tuple[Callable[[], str], list[int]]:
    """A function that raises ``error`` ``times`` times, then returns ``result``."""
    calls: list[int] = []

    def func() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error(f"failure {len(calls)}")
        return result

    return func, calls


def test_success_on_the_first_try_does_not_sleep() -> None:
    fake = FakeTime()
    func, calls = failing(0)
    assert policy(fake).call(func, (ConnectionError,)) == "ok"
    assert (len(calls), fake.waits) == (1, [])


def test_retries_then_succeeds() -> None:
    fake = FakeTime()
    func, calls = failing(2)
    assert policy(fake, max_tries=5).call(func, (ConnectionError,)) == "ok"
    assert len(calls) == 3
    assert fake.waits == [1.0, 2.0]


def test_gives_up_after_max_tries_and_reraises_the_last_error() -> None:
    fake = FakeTime()
    func, calls = failing(10)
    with pytest.raises(ConnectionError, match=r"^failure 3$"):
        policy(fake, max_tries=3).call(func, (ConnectionError,))
    assert len(calls) == 3
    assert fake.waits == [1.0, 2.0]


def test_max_tries_one_means_no_retry() -> None:
    fake = FakeTime()
    func, calls = failing(1)
    with pytest.raises(ConnectionError, match=r"^failure 1$"):
        policy(fake, max_tries=1).call(func, (ConnectionError,))
    assert (len(calls), fake.waits) == (1, [])


def test_exceptions_not_listed_are_not_retried() -> None:
    fake = FakeTime()
    func, calls = failing(1, error=ValueError)
    with pytest.raises(ValueError, match=r"^failure 1$"):
        policy(fake).call(func, (ConnectionError, TimeoutError))
    assert (len(calls), fake.waits) == (1, [])


def test_subclasses_of_listed_exceptions_are_retried() -> None:
    fake = FakeTime()
    func, calls = failing(1, error=ConnectionRefusedError)
    assert policy(fake).call(func, (OSError,)) == "ok"
    assert len(calls) == 2


def test_waits_grow_by_backoff_and_are_capped() -> None:
    fake = FakeTime()
    func, _ = failing(6)
    policy(fake, max_tries=10, delay_s=0.5, backoff=3.0, max_delay_s=10.0).call(
        func, (ConnectionError,))
    assert fake.waits == [0.5, 1.5, 4.5, 10.0, 10.0, 10.0]


def test_delays_lists_the_waits_without_jitter() -> None:
    assert RetryPolicy(max_tries=5, delay_s=0.1, backoff=2.0, max_delay_s=0.5).delays() == [
        0.1, 0.2, 0.4, 0.5]
    assert RetryPolicy(max_tries=1).delays() == []
    assert RetryPolicy(max_tries=0).delays() == []


def test_deadline_stops_retrying() -> None:
    fake = FakeTime()
    func, calls = failing(100)
    with pytest.raises(ConnectionError):
        policy(fake, max_tries=0, deadline_s=10.0).call(func, (ConnectionError,))
    # waits 1 + 2 + 4 = 7 s; the next wait (8 s) would end at 15 s, past the 10 s deadline
    assert fake.waits == [1.0, 2.0, 4.0]
    assert len(calls) == 4
    assert fake.now - 100.0 == 7.0


def test_deadline_counts_time_spent_in_the_calls() -> None:
    fake = FakeTime()
    calls: list[int] = []

    def slow() -> str:
        calls.append(1)
        fake.now += 4.0  # each try takes 4 s
        raise TimeoutError("slow")

    with pytest.raises(TimeoutError):
        policy(fake, max_tries=0, deadline_s=10.0).call(slow, (TimeoutError,))
    # try 1 ends at 4 s, wait 1 → 5 s; try 2 ends at 9 s, a 2 s wait would pass 10 s
    assert fake.waits == [1.0]
    assert len(calls) == 2


def test_max_tries_wins_before_the_deadline() -> None:
    fake = FakeTime()
    func, calls = failing(100)
    with pytest.raises(ConnectionError):
        policy(fake, max_tries=2, deadline_s=1000.0).call(func, (ConnectionError,))
    assert (len(calls), fake.waits) == (2, [1.0])


def test_jitter_stays_within_its_band() -> None:
    fake = FakeTime()
    func, _ = failing(50)
    policy(fake, max_tries=51, delay_s=1.0, backoff=1.0, jitter=0.2).call(
        func, (ConnectionError,))
    assert len(fake.waits) == 50
    assert all(0.8 <= wait <= 1.2 for wait in fake.waits)
    assert len(set(fake.waits)) > 1
