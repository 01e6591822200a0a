"""Batches' Spark jobs gathered into fewer jobs while a backlog lasts.

A Spark job has a fixed cost whatever it carries — in a catch-up, ~55 ms of the JVM's CPU
for each (its closure cleaned by reading and parsing a class file, the scheduling, the
result's socket) and the driver's py4j calls around it — so the batches a pipeline's E/T
threads send while others are on Spark wait here, and the next job carries all of one
pipeline's that wait (up to :data:`BATCHES_A_JOB`): fewer jobs, each batch in its own tasks,
and no batch waits for another to come (a batch that finds a free slot goes at once). At
most :data:`JOBS_AT_ONCE` jobs of one pipeline are on Spark at a time; another pipeline's
never wait for them.

A job that carried several batches and failed is run again batch by batch, each in the
thread that sent it, so each batch gets its own result or its own error, as if it had
always gone alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

# one pipeline's jobs on Spark at a time: two, one running while the next is made (a
# catch-up's JVM: 0.56 s of CPU per 100k rows with two, 0.41 with one; but with one a lake's
# stream at 1,000 tx/s had its p99 10.3 s against 7.3 with two and 7.7 without gathering:
# bench.lake, docs/performance.md); other pipelines' jobs go beside them
JOBS_AT_ONCE = 2
BATCHES_A_JOB = 4  # batches one job carries at most


class _Request:
    __slots__ = ("alone", "done", "error", "item", "key", "result", "taken")

    def __init__(self, key: Hashable, item: Any) -> None:
        self.key, self.item = key, item
        self.taken = self.done = self.alone = False
        self.result: Any = None
        self.error: BaseException | None = None


class JobQueue:
    """``submit(key, item)`` gives ``run([item])[0]``; items of one key that wait together
    go to one ``run`` call, in the order they were submitted."""

    def __init__(self, run: Callable[[list[Any]], list[Any]], at_once: int = JOBS_AT_ONCE,
                 most: int = BATCHES_A_JOB) -> None:
        self._run, self._at_once, self._most = run, at_once, most
        self._cv = threading.Condition()
        self._queue: list[_Request] = []
        self._running: dict[Hashable, int] = {}  # jobs on Spark by key

    def submit(self, key: Hashable, item: Any) -> Any:
        request = _Request(key, item)
        with self._cv:
            self._queue.append(request)
            group = self._lead(request)
            while group is None and not request.taken:
                self._cv.wait()
                group = self._lead(request)
        if group is not None:
            self._run_group(group)
        else:
            with self._cv:
                while not request.done:
                    self._cv.wait()
        if request.alone:  # the job it shared failed: again alone, with its own outcome
            return self._run([request.item])[0]
        if request.error is not None:
            raise request.error
        return request.result

    def _lead(self, request: _Request) -> list[_Request] | None:
        """The requests ``request``'s thread runs now (None: not yet, or another took it):
        a free slot of its key, ``request`` the oldest of its key waiting, and those of its
        key behind it."""
        key = request.key
        if request.taken or self._running.get(key, 0) >= self._at_once:
            return None
        group = [found for found in self._queue if found.key == key][:self._most]
        if group[0] is not request:
            return None
        for found in group:
            found.taken = True
            self._queue.remove(found)
        self._running[key] = self._running.get(key, 0) + 1
        self._cv.notify_all()  # the next oldest may lead while a slot is free
        return group

    def _run_group(self, group: list[_Request]) -> None:
        try:
            results = self._run([request.item for request in group])
            for request, result in zip(group, results, strict=True):
                request.result = result
        except BaseException as exc:
            if len(group) == 1:
                group[0].error = exc
            else:
                for request in group:
                    request.alone = True
        finally:
            with self._cv:
                key = group[0].key
                self._running[key] -= 1
                if not self._running[key]:
                    del self._running[key]
                for request in group:
                    request.done = True
                self._cv.notify_all()
