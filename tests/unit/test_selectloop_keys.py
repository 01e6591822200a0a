"""Select's loop reads the source's keys again after a DDL as soon as it cuts the batch of rows
after it, before the DDL is loaded: that batch waits for the DDL's load only (the read, 60-220
ms a DDL in a catch-up, no longer stands between the two)."""

from __future__ import annotations

import queue
import threading
from collections import deque
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest

from node import etjob, selectloop, start
from node.cursor import Cursor
from node.selectloop import RunnerSelect
from node.target import kinds
from shared.errors import SourceError
from shared.model import BinlogPosition

COMPILED = SimpleNamespace(name="compiled")


class InPlace:
    """An executor that runs what is submitted at once (what ran, and when, is plain)."""

    def submit(self, function: Any, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(function(*args, **kwargs))
        except Exception as exc:
            future.set_exception(exc)
        return future


class Runner(RunnerSelect):
    def __init__(self) -> None:
        self.ctx = SimpleNamespace(spark=None, pipeline="the pipeline")
        self.pipeline_id, self.stop_event = "c.p", threading.Event()
        self.cursor: Cursor | None = None
        self.source, self.target_kind, self.two_way = "the source", "mysql", False  # type: ignore[assignment]
        self.batches_selected, self._in_flight = 0, deque()
        self._progress = threading.Event()
        self.seen: list[str] = []  # what happened, in order

    def _wait_loaded(self, process_id: int, stop: threading.Event) -> bool:
        """Load's thread loads the DDL's batch meanwhile."""
        self.seen.append(f"loaded {process_id}")
        self.cursor = Cursor(BinlogPosition("b.000001", 4), process_id)
        return True


class Stream:
    """Select's batches: two DDLs' (1, 2), then one of rows (3)."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop, self.cut = stop, 0

    def next_batch(self, _: threading.Event) -> Any:
        self.cut += 1
        if self.cut == 4:
            self.stop.set()
            return None
        return SimpleNamespace(process_id=self.cut, transactions=[], commit_ts_ms=0,
                               has_ddl=self.cut < 3, windows=[], changes=lambda: [])


def run(runner: Runner, monkeypatch: pytest.MonkeyPatch, read: Any) -> list[Any]:
    monkeypatch.setattr(start, "keys_read", read)
    # (the read on a thread of its own, run in place here: what ran, and when, is plain)
    monkeypatch.setattr(selectloop, "in_background",
                        lambda name, function, *args: InPlace().submit(function, *args))
    monkeypatch.setattr(start, "keys_again", lambda *args, fresh=None:
                        runner.seen.append(f"keys put: {fresh}"))
    monkeypatch.setattr(kinds, "check_source", lambda *args, **kwargs: None)
    monkeypatch.setattr(etjob, "run_ddl", lambda *args: "ddl done")
    monkeypatch.setattr(etjob, "run", lambda *args: runner.seen.append("E/T of 3"))
    stop, handoff = threading.Event(), queue.Queue[Any]()
    snapshots = SimpleNamespace(ddl=lambda changes: None, copying=lambda: None,
                                ask=lambda requests: None)
    planner = SimpleNamespace(forget=lambda: runner.seen.append("facts forgotten"))
    runner._select_loop(Stream(stop), COMPILED, planner, InPlace(),  # type: ignore[arg-type]
                        handoff, stop, SimpleNamespace(extracting=lambda: None),  # type: ignore[arg-type]
                        snapshots)  # type: ignore[arg-type]
    handed = []
    while (item := handoff.get_nowait()) is not None:
        handed.append(item)
    return handed


def test_the_keys_are_read_as_the_ddl_goes_by_and_put_in_place_after_its_load(
        monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Runner()

    def read(compiled: Any, source: str, pipeline: str, lake: bool,
             subscription: bool) -> str:
        runner.seen.append("keys read")
        assert (compiled, source, pipeline, lake, subscription) == (
            COMPILED, "the source", "the pipeline", False, False)
        return "fresh keys"

    handed = run(runner, monkeypatch, read)
    # read once after the two DDLs, before the last is loaded (while it loads, not after);
    # in place only after the load, before the batch after it goes to E/T (the batches
    # before it keep the keys they had)
    assert runner.seen == ["keys read", "loaded 2", "facts forgotten", "keys put: fresh keys",
                           "E/T of 3"]
    assert [batch.process_id for batch, _ in handed] == [1, 2, 3]


def test_a_read_that_fails_fails_the_batch_after_the_ddl(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As when it was read after the load: the DDLs' batches go to Load, the failure after
    them (Load reports it in order)."""
    runner = Runner()

    def read(*args: Any) -> str:
        raise SourceError("pipeline c.p: cannot read the tables of the source: gone")

    handed = run(runner, monkeypatch, read)
    assert [batch.process_id for batch, _ in handed[:2]] == [1, 2]
    assert "cannot read the tables" in str(handed[2].error)
    assert "E/T of 3" not in runner.seen


def test_the_read_runs_on_a_daemon_thread_a_stop_abandons_and_raises_where_asked() -> None:
    """Not in the attempt's executor, whose end waits for what runs there: a source that
    stops answering mid-read would hold the pipeline's stop."""
    gate = threading.Event()
    held = selectloop.in_background("keys-test", gate.wait, 30)
    thread = next(t for t in threading.enumerate() if t.name == "keys-test")
    assert thread.daemon and not held.done()
    gate.set()
    assert held.result(10) is True
    failing = selectloop.in_background("keys-fail", lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.result(10)
