"""A subscription's wait for its reader before a pause, cut short (the node shuts down,
loses the pipeline or is fenced; or the operator stops it), leaves the batches
unacknowledged and the pause to whoever runs the pipeline next: no PAUSE is written over a
started channel (another node taking it over hands them over again and waits); the state
published says what is unacknowledged."""

from __future__ import annotations

import threading

import pytest

from shared.errors import ConfigError
from tests.unit import test_subscription_pause as pausing


def cut_short(monkeypatch: pytest.MonkeyPatch, stopped: bool) -> tuple[object, list[str]]:
    def drain(self: pausing.Draining, stop: threading.Event, owns: object, channel: str,
              report: object) -> tuple[str, int]:
        if stopped:
            stop.set()  # (a shutdown, a lost session, the operator's stop)
        return "\n2 batch(es) not acknowledged", 2
    monkeypatch.setattr(pausing.Draining, "drain", drain)
    found, paused, _ = pausing.attempt(monkeypatch, ConfigError("the source ran 'TRUNCATE t'"))
    return found, paused


def test_a_wait_stopped_leaves_the_pause_to_the_next_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    found, paused = cut_short(monkeypatch, stopped=True)
    assert paused == []
    assert found.state == "failed" and found.unacked_left == 2  # type: ignore[attr-defined]
    assert "not acknowledged" in found.last_error  # type: ignore[attr-defined]


def test_a_wait_ended_by_a_lost_ownership_lets_the_supervisor_take_it_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    found, paused = cut_short(monkeypatch, stopped=False)
    assert paused == [] and found.state == "lost ownership"  # type: ignore[attr-defined]
