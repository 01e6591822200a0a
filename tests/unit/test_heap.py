"""The node's heap: what lives after a start is frozen out of later collections, and
collections that stop the process are logged."""

from __future__ import annotations

import gc
import logging
import weakref

from shared import heap, logs


def test_settle_freezes_what_lives_and_collects_what_does_not() -> None:
    class Node:
        pass

    cycle, kept = Node(), Node()
    cycle.self = cycle  # type: ignore[attr-defined] - garbage only the cycle collector frees
    gone = weakref.ref(cycle)
    del cycle
    before = gc.get_freeze_count()
    try:
        heap.settle()
        assert gc.get_freeze_count() > before
        assert gone() is None  # collected, not frozen
        assert not any(o is kept for o in gc.get_objects())  # frozen: out of every generation
        frozen = gc.get_freeze_count()
        gc.collect(2)
        assert gc.get_freeze_count() == frozen  # a later full collection leaves them alone
    finally:
        gc.unfreeze()


def test_a_collection_is_logged_with_its_generation_and_time(caplog) -> None:
    timed = logs.log_gc_pauses(min_ms=0)
    try:
        with caplog.at_level(logging.DEBUG, logger="setl.gc"):
            gc.collect(2)
        assert any("event=gc_pause generation=2 ms=" in r.getMessage() for r in caplog.records)
    finally:
        gc.callbacks.remove(timed)
    caplog.clear()
    timed = logs.log_gc_pauses(min_ms=60_000)  # a pause of a minute: none here
    try:
        with caplog.at_level(logging.DEBUG, logger="setl.gc"):
            gc.collect(2)
        assert not caplog.records
    finally:
        gc.callbacks.remove(timed)
