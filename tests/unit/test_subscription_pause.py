"""A subscription's pause waits for its reader to acknowledge every batch handed over
before the failed one (the outbox drains), so that its position is right before that batch
and a move past it — what a pause says to do — skips that batch alone; a stop or a lost
ownership meanwhile leaves them unacknowledged (the next run sends them again), and the
pause's text says how many and from where."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from node import pipeline as pipelines
from node.target.subscription.loader import SubscriptionLoader
from node.target.subscription.outbox import Outbox, Parcel
from shared.errors import ConfigError, LoadError
from shared.model import PipelineParams
from tests.unit.test_position_replays import Zk
from tests.unit.test_runner_state import Unheld, load_one, runner
from tests.unit.test_subscription import parcel


def handed(box: Outbox, *ids: int) -> int:
    """``ids`` handed over and sent to a reader: its stream."""
    stop = threading.Event()
    for batch_id in ids:
        assert box.put(parcel(batch_id), stop)
    reader = box.attach("r")
    for _ in ids:
        assert box.take(reader) is not None
    return reader


def test_a_drain_ends_once_the_reader_acknowledged_every_batch_handed_over() -> None:
    acked: list[int] = []
    box = Outbox("c.p", 5, lambda p: acked.append(p.batch_id))
    reader = handed(box, 1, 2)
    heard: list[list[int]] = []
    left: list[list[Parcel]] = []
    drain = threading.Thread(target=lambda: left.append(box.drain(
        threading.Event(), lambda: True, lambda ps: heard.append([p.batch_id for p in ps]))))
    drain.start()
    drain.join(0.3)
    assert drain.is_alive() and heard == [[1, 2]]  # waits, and says for what
    box.ack(reader, 1)
    deadline = time.monotonic() + 5
    while heard[-1] != [2] and time.monotonic() < deadline:  # told what is left
        time.sleep(0.01)
    assert heard == [[1, 2], [2]] and drain.is_alive()
    box.ack(reader, 2)
    drain.join(5)
    assert not drain.is_alive() and left == [[]] and acked == [1, 2]
    assert box.acked_end == parcel(2).end


@pytest.mark.parametrize("how", ["stopped", "lost"])
def test_a_drain_stopped_or_lost_leaves_the_batches_unacknowledged(how: str) -> None:
    box = Outbox("c.p", 5, lambda p: None)
    handed(box, 1, 2)
    stop = threading.Event()
    if how == "stopped":
        stop.set()
    left = box.drain(stop, lambda: how != "lost", lambda ps: None)
    assert [p.batch_id for p in left] == [1, 2] and box.waiting == 2


def test_the_pause_text_says_what_the_reader_has_not_acknowledged() -> None:
    loader = object.__new__(SubscriptionLoader)
    loader.pipeline_id, loader.name, loader.dropped = "feed.forward", "feed-s", []
    loader.store, loader.unacked_path = SimpleNamespace(client=Zk()), "/u"  # type: ignore[assignment]
    loader.outbox = Outbox("feed.forward", 5, lambda p: None)
    loader.outbox.acked_end = parcel(1).end
    handed(loader.outbox, 2, 3)
    stop = threading.Event()
    stop.set()
    note, left = loader.drain(stop, lambda: True, "feed", lambda text, n: None)
    assert left == 2
    assert "has not acknowledged 2 batch(es)" in note and str(parcel(1).end) in note
    assert str(parcel(3).end) in note and "setl channel start feed" in note
    box = loader.outbox = Outbox("feed.forward", 5, lambda p: None)
    box.acked_end = parcel(3).end
    assert loader.drain(threading.Event(), lambda: True, "feed", lambda text, n: None) == \
        ("", 0)  # nothing handed over was unacknowledged: nothing to say
    reader = handed(box, 4)
    threading.Timer(0.2, box.ack, (reader, 4)).start()
    note, left = loader.drain(threading.Event(), lambda: True, "feed", lambda text, n: None)
    assert left == 0 and "acknowledged every batch before the failed one" in note
    assert str(parcel(4).end) in note


class Draining(Unheld):
    """A subscription's loader whose drain is recorded (a reader acknowledged everything)."""

    def drain(self, stop: threading.Event, owns: object, channel: str,
              report: object) -> tuple[str, int]:
        self.drained.append(channel)
        return "\nsubscription feed-s: acknowledged", 0


def attempt(monkeypatch: pytest.MonkeyPatch, error: Exception, limit: int = 30
            ) -> tuple[pipelines.PipelineRunner, list[str], list[str]]:
    """A runner whose every attempt hands two batches over and fails with ``error``: the
    pauses it wrote, and each attempt's drains (in order with the loader's close)."""
    monkeypatch.setattr(pipelines.kinds, "kind_of", lambda pipeline_id, targets: "subscription")
    monkeypatch.setattr(pipelines.CompiledPipeline, "compile", lambda *args, **kwargs: None)
    found = runner(_attempt_loader=None, _switch=threading.Event(), _central=None)
    found.ctx.pipeline = SimpleNamespace(pairs=[], source="src",
                                         params=PipelineParams(max_retries=3))
    found.ctx.sources = {"src": None}
    found.ctx.channel.two_way = False
    found.ctx.owns = lambda: True
    found.publish = lambda: None  # type: ignore[method-assign]
    paused: list[str] = []
    found._pause = lambda: paused.append(found.last_error)  # type: ignore[method-assign]
    events: list[str] = []
    tries: list[int] = []

    def run_from(compiled: object, resume: object, loader: Draining, source: object) -> None:
        tries.append(1)
        if len(tries) >= limit:
            found.stop_event.set()
        for process_id in (1, 2):
            load_one(found, loader, process_id)
        raise error

    monkeypatch.setattr(found, "_open", lambda compiled: (None, None))
    monkeypatch.setattr(found, "_loader", lambda hint: Draining(
        run="r", written={}, take_skipped=lambda: 0, acks=0, drained=events,
        close=lambda: events.append("close")))
    monkeypatch.setattr(found, "_resume", lambda loader, source, hint: None)
    monkeypatch.setattr(found, "_run_from", run_from)
    found.run()
    return found, paused, events


def test_a_pause_at_once_drains_before_the_outbox_closes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    found, paused, events = attempt(monkeypatch, ConfigError("the source ran 'TRUNCATE t'"))
    assert events == ["shop", "close"]
    assert paused == ["the source ran 'TRUNCATE t'\nsubscription feed-s: acknowledged"]
    assert found.state == "failed"


def test_a_retried_failure_drains_only_when_it_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each retry sends what is unacknowledged again: no wait; the failure that pauses
    (max_retries 3: the 4th) waits for the reader first."""
    found, paused, events = attempt(monkeypatch, LoadError("batch 3: refused"))
    assert found.state == "failed"
    assert events == ["close"] * 3 + ["shop", "close"]
    assert paused == ["batch 3: refused\nsubscription feed-s: acknowledged"]
