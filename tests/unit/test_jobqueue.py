"""node/jobqueue.py: batches that wait while others are on Spark go in one job."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from node.jobqueue import JobQueue


class Runs:
    """A ``run`` that records each call and holds the first until released."""

    def __init__(self, hold_first: bool = True) -> None:
        self.calls: list[list[str]] = []
        self.release = threading.Event()
        self.started = threading.Event()
        self._hold = hold_first

    def __call__(self, items: list[str]) -> list[str]:
        self.calls.append(list(items))
        if self._hold and len(self.calls) == 1:
            self.started.set()
            assert self.release.wait(10)
        if any(item.startswith("bad") for item in items):
            raise ValueError(f"bad batch in {items}")
        return [f"done {item}" for item in items]


def _until(check: Any, what: str) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def _submit_while_first_runs(queue: JobQueue, runs: Runs, pool: ThreadPoolExecutor,
                             items: list[tuple[str, str]]) -> list[Future]:
    """The first item runs (held); the others of its key are submitted and wait (another
    key's go at once); then all go on."""
    first = pool.submit(queue.submit, *items[0])
    assert runs.started.wait(10)
    rest, waiting = [], 0
    for key, item in items[1:]:
        rest.append(pool.submit(queue.submit, key, item))
        if key == items[0][0]:
            waiting += 1
            _until(lambda n=waiting: len(queue._queue) == n, f"{item} to wait")
        else:
            rest[-1].result(10)
    runs.release.set()
    return [first, *rest]


def test_batches_waiting_while_a_job_runs_go_in_the_next_one_in_order() -> None:
    runs = Runs()
    queue = JobQueue(runs, at_once=1, most=4)
    with ThreadPoolExecutor(8) as pool:
        futures = _submit_while_first_runs(queue, runs, pool, [
            ("p1", "a"), ("p1", "b"), ("p2", "x"), ("p1", "c"), ("p1", "d"), ("p1", "e"),
            ("p1", "f")])
        results = [future.result(10) for future in futures]
    assert results == ["done a", "done b", "done x", "done c", "done d", "done e", "done f"]
    # another pipeline's batch goes beside the job that runs; one pipeline's batches that
    # waited go together (at most four)
    assert runs.calls == [["a"], ["x"], ["b", "c", "d", "e"], ["f"]]


def test_a_batch_that_finds_a_free_slot_goes_at_once() -> None:
    runs = Runs(hold_first=False)
    queue = JobQueue(runs, at_once=2)
    assert queue.submit("p1", "a") == "done a"
    assert queue.submit("p1", "b") == "done b"
    assert runs.calls == [["a"], ["b"]]


def test_two_jobs_run_at_once() -> None:
    both = threading.Barrier(2, timeout=10)

    def run(items: list[str]) -> list[str]:
        both.wait()  # only passes when the second job runs beside the first
        return items

    queue = JobQueue(run, at_once=2)
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(queue.submit, "p1", item) for item in ("a", "b")]
        assert sorted(future.result(10) for future in futures) == ["a", "b"]


def test_a_failed_job_of_several_batches_runs_each_alone() -> None:
    runs = Runs()
    queue = JobQueue(runs, at_once=1)
    with ThreadPoolExecutor(8) as pool:
        futures = _submit_while_first_runs(queue, runs, pool, [
            ("p1", "a"), ("p1", "b"), ("p1", "bad c"), ("p1", "d")])
        assert futures[0].result(10) == "done a"
        assert futures[1].result(10) == "done b"
        with pytest.raises(ValueError, match=r"bad batch in \['bad c'\]"):
            futures[2].result(10)  # its own error, as if it had gone alone
        assert futures[3].result(10) == "done d"
    assert runs.calls[:2] == [["a"], ["b", "bad c", "d"]]
    assert sorted(map(tuple, runs.calls[2:])) == [("b",), ("bad c",), ("d",)]


def test_a_lone_batchs_error_is_its_own() -> None:
    queue = JobQueue(Runs(hold_first=False))
    with pytest.raises(ValueError, match=r"bad batch in \['bad'\]"):
        queue.submit("p1", "bad")
    assert queue.submit("p1", "a") == "done a"  # the slot was given back
