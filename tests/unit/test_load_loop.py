"""node/load/loop.py: Load's serial loop — batches in processId order, and a coalescing
target's commits joining every batch whose Extract/Transform is done."""

from __future__ import annotations

import queue
from concurrent.futures import Future
from typing import Any

import pytest

from node.changes import Batch
from node.jobs import Done, Failed, PartResult
from node.load import loop
from shared.errors import LoadError


class Coalescing:
    """A target whose commits take several batches (as a lake's do)."""

    def __init__(self) -> None:
        self.commits: list[list[int]] = []

    def load_many(self, batches: list[tuple[Batch, list[PartResult]]]) -> int:
        self.commits.append([batch.process_id for batch, _ in batches])
        return len(batches)


class OneByOne:
    def __init__(self) -> None:
        self.loaded: list[int] = []

    def load_units(self, batch: Batch, results: list[PartResult], redo: Any = None) -> int:
        self.loaded.append(batch.process_id)
        return 1


def handed(process_ids: range, pending: frozenset[int] = frozenset()) -> queue.Queue[Any]:
    """Batches handed off by Select, each E/T done but those in ``pending``."""
    handoff: queue.Queue[Any] = queue.Queue()
    for process_id in process_ids:
        future: Future[Done] = Future()
        if process_id not in pending:
            future.set_result(Done([], None, 1.0, 0))
        handoff.put((Batch("c.p", process_id), future))
    return handoff


def test_a_coalescing_target_commits_every_done_batch_at_once_up_to_the_cap() -> None:
    count = loop.COALESCE * 2 + 3
    handoff, target, loaded = handed(range(1, count + 1)), Coalescing(), []
    handoff.put(None)
    loop.run(target, handoff, lambda batch, *_: loaded.append(batch.process_id))
    assert [len(commit) for commit in target.commits] == [loop.COALESCE, loop.COALESCE, 3]
    assert [p for commit in target.commits for p in commit] == list(range(1, count + 1))
    assert loaded == list(range(1, count + 1))  # each batch told, in order


class Running:
    """A batch's E/T still running when Load finds it: done only once Load waits for it
    (``then`` runs meanwhile: Select goes on cutting)."""

    def __init__(self, then: Any = None) -> None:
        self.waited, self.then = False, then

    def done(self) -> bool:
        return self.waited

    def result(self) -> Done:
        self.waited = True
        if self.then is not None:
            self.then()
        return Done([], None, 1.0, 0)


def test_the_batches_handed_off_join_the_commit_once_their_et_is_done() -> None:
    handoff, target = handed(range(1, 3)), Coalescing()

    def cut_more() -> None:  # while the commit waits, Select cuts 5, its E/T under way
        handoff.put((Batch("c.p", 5), Running()))
        handoff.put(None)
    third = Running()
    handoff.put((Batch("c.p", 3), third))
    handoff.put((Batch("c.p", 4), Running(then=cut_more)))
    loop.run(target, handoff, lambda *_: None)
    # a backlog: one commit for the four, not one a batch; the one cut since goes next
    assert target.commits == [[1, 2, 3, 4], [5]]
    assert third.waited


def test_a_commit_waits_for_no_batch_select_has_not_cut() -> None:
    handoff, target = handed(range(1, 3)), Coalescing()

    def loaded(batch: Batch, *_: Any) -> None:
        if batch.process_id == 2:  # Select cuts batch 3 after 1 and 2 committed
            for item in list(handed(range(3, 4)).queue):
                handoff.put(item)
            handoff.put(None)

    loop.run(target, handoff, loaded)
    assert target.commits == [[1, 2], [3]]


def test_a_failure_in_its_place_stops_load_before_what_follows() -> None:
    handoff, target = handed(range(1, 3)), OneByOne()
    handoff.put(Failed(LoadError("select failed")))
    handoff.put((Batch("c.p", 3), Future()))
    with pytest.raises(LoadError, match="select failed"):
        loop.run(target, handoff, lambda *_: None)
    assert target.loaded == [1, 2]


def test_a_coalescing_target_gets_room_in_the_window_for_one_more_commit() -> None:
    assert loop.window(5, OneByOne()).size == 5  # type: ignore[arg-type]
    assert loop.window(5, Coalescing()).size == 5 + loop.COALESCE  # type: ignore[arg-type]
