"""What a pipeline runner keeps for status as batches load and as it fails: its error
once the pipeline moves again, the rows skip_load_exception skipped, and the PAUSE of a
failure for good, which must reach ZooKeeper."""

from __future__ import annotations

import threading
from collections import deque
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from node import pause
from node import pipeline as pipelines
from node.changes import Batch
from node.jobs import Done, PartResult
from node.metrics import NodeMetrics, PipelineMetrics
from shared.errors import CoordinationError, LoadError
from shared.model import ChannelStatus, PipelineParams
from shared.retry import RetryPolicy

COMMITTED = 1_700_000_000_000


def runner(**values: Any) -> pipelines.PipelineRunner:
    found = object.__new__(pipelines.PipelineRunner)
    found.pipeline_id, found.state, found.last_error = "shop.forward", "running", ""
    found.ctx = SimpleNamespace(pipeline=SimpleNamespace(params=PipelineParams()),
                                channel=SimpleNamespace(name="shop"), version=1, client=None,
                                paths=None,
                                backoff=RetryPolicy(delay_s=0.0, max_delay_s=0.0))
    found._snapshots, found.cursor, found._progress = None, None, threading.Event()
    found.window_peak, found.last_commit_ts_ms, found.rows_skipped = 0, 0, 0
    found._in_flight, found._loaded, found.batches_loaded = deque(), deque(), 0
    found.metrics = PipelineMetrics("shop", "forward", NodeMetrics())
    found.stop_event = threading.Event()
    found.__dict__.update(values)
    return found


def load(found: pipelines.PipelineRunner, process_id: int, rows: int, skipped: int) -> None:
    batch = Batch("shop.forward", process_id, commit_ts_ms=COMMITTED)
    loader = SimpleNamespace(run="r", written={}, take_skipped=lambda: skipped)
    done = Done([PartResult([], [], rows)], None, 1.0, 0)
    found._loaded_one(loader, SimpleNamespace(release=lambda size: None, peak=1),  # type: ignore[arg-type]
                      SimpleNamespace(publish=lambda cursor: None), batch, done, rows, 0.0,
                      0.0)


def test_a_load_after_a_retry_clears_the_error_it_recovered_from() -> None:
    """Each retry set last_error and the next attempt ran on with it: status showed an
    error long over, and hid the problems shown only without one (a copy's)."""
    found = runner(last_error="stage load, ...: Lock wait timeout exceeded")
    load(found, 7, rows=10, skipped=0)
    assert found.last_error == ""


def test_a_runner_still_retrying_keeps_its_error() -> None:
    found = runner(state="retrying", last_error="cannot reach the source")
    load(found, 7, rows=10, skipped=0)  # a batch of the attempt that failed, loaded
    assert found.last_error == "cannot reach the source"


def test_rows_skipped_add_up_and_are_not_counted_as_loaded() -> None:
    found = runner(_in_flight=deque([(7, COMMITTED), (8, COMMITTED)]))
    load(found, 7, rows=10, skipped=2)
    load(found, 8, rows=5, skipped=1)
    assert found.rows_skipped == 3
    assert [rows for _, rows in found._loaded] == [8, 4]
    assert not found._in_flight  # both loaded: nothing behind


class FlakyCatalog:
    """ZooKeeper refusing the first ``fails`` writes of a channel's status."""

    writes: ClassVar[list[tuple[str, ChannelStatus]]] = []
    fails: ClassVar[int] = 0

    def __init__(self, client: object, paths: object) -> None:
        pass

    def channel(self, name: str) -> SimpleNamespace:
        return SimpleNamespace(version=1, status=ChannelStatus.START, status_version=4)

    def set_status_over(self, channel: str, status: ChannelStatus, version: int) -> None:
        assert version == 4
        if FlakyCatalog.fails:
            FlakyCatalog.fails -= 1
            raise CoordinationError("ZooKeeper did not answer in 5 s")
        FlakyCatalog.writes.append((channel, status))


def test_a_pause_zookeeper_refuses_is_written_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure for good pauses the channel; when that write failed the runner only
    logged it and ended, the channel stayed started and nothing retried the pause."""
    monkeypatch.setattr(pause, "Catalog", FlakyCatalog)
    FlakyCatalog.writes, FlakyCatalog.fails = [], 3
    found = runner()
    found.publish = lambda: None  # type: ignore[method-assign]
    found._fail_for_good("definition error")
    assert FlakyCatalog.writes == [("shop", ChannelStatus.PAUSE)]
    assert found.state == "failed" and found.last_error == "definition error"


def test_a_stopped_runner_gives_the_pause_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pause, "Catalog", FlakyCatalog)
    FlakyCatalog.writes, FlakyCatalog.fails = [], 10**9
    found = runner()
    found.publish = lambda: None  # type: ignore[method-assign]
    found.stop_event.set()  # the session was lost: the next owner pauses it again
    found._fail_for_good("definition error")
    assert FlakyCatalog.writes == []


class Unheld(SimpleNamespace):
    """A loader that holds nothing until its reader acknowledges it (a subscription's):
    ``acks`` of them per attempt."""

    durable = False


def attempts(monkeypatch: pytest.MonkeyPatch, acks: int, limit: int = 30
             ) -> tuple[pipelines.PipelineRunner, list[str]]:
    """Run a runner whose every attempt hands two batches over and fails on the third
    (LoadError: retried), with a reader that acknowledges ``acks`` batches per attempt;
    stopped after ``limit`` attempts. Its tries, and the pauses it wrote."""
    monkeypatch.setattr(pipelines.kinds, "kind_of", lambda pipeline_id, targets: "subscription")
    monkeypatch.setattr(pipelines.CompiledPipeline, "compile",
                        lambda *args, **kwargs: None)
    found = runner(_attempt_loader=None, _switch=threading.Event(), _central=None)
    found.ctx.pipeline = SimpleNamespace(pairs=[], source="src",
                                         params=PipelineParams(max_retries=3))
    found.ctx.sources = {"src": None}
    found.ctx.channel.two_way = False
    found.publish = lambda: None  # type: ignore[method-assign]
    paused: list[str] = []
    found._pause = lambda: paused.append(found.last_error)  # type: ignore[method-assign]
    tries: list[str] = []

    def run_from(compiled: object, resume: object, loader: Unheld, source: object) -> None:
        tries.append("try")
        if len(tries) >= limit:
            found.stop_event.set()
        loader.acks = acks
        for process_id in (1, 2):  # handed over: "loaded" as far as the runner sees
            load_one(found, loader, process_id)
        raise LoadError("batch 3: the target refused it")

    monkeypatch.setattr(found, "_open", lambda compiled: (None, None))
    monkeypatch.setattr(found, "_loader", lambda hint: Unheld(
        run="r", written={}, take_skipped=lambda: 0, close=lambda: None))
    monkeypatch.setattr(found, "_resume", lambda loader, source, hint: None)
    monkeypatch.setattr(found, "_run_from", run_from)
    found.run()
    return found, paused


def load_one(found: pipelines.PipelineRunner, loader: object, process_id: int) -> None:
    batch = Batch("shop.forward", process_id, commit_ts_ms=COMMITTED)
    found._loaded_one(loader, SimpleNamespace(release=lambda size: None, peak=1),  # type: ignore[arg-type]
                      SimpleNamespace(publish=lambda cursor: None), batch,
                      Done([PartResult([], [], 1)], None, 1.0, 0), 1, 0.0, 0.0)


def test_batches_handed_to_a_reader_that_never_acks_are_no_progress(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A subscription's batches handed over counted as loaded, so each failed attempt reset
    the failure count to one and started again from the acknowledged position: with a slow
    or absent reader, the pipeline re-sent the same batches forever and never paused."""
    found, paused = attempts(monkeypatch, acks=0)
    assert found.state == "failed" and paused == ["batch 3: the target refused it"]
    assert found.batches_loaded == 2 * 4  # max_retries 3: paused on the 4th failure


def test_an_acknowledgement_is_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    found, paused = attempts(monkeypatch, acks=1, limit=8)
    assert paused == [] and found.state == "stopped" and found.batches_loaded == 2 * 8
