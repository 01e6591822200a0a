"""node/select/selector.py and watermark windows: a batch is not cut inside a window and is cut
at its high watermark; a window whose read failed (its abandon mark), that stays open too long
on a busy stream, or that holds its batch open past a bound is abandoned and the batch cut."""

from __future__ import annotations

import dataclasses

from node.changes import Transaction
from node.select.selector import WINDOW_BATCH_FACTOR, WINDOW_TIMEOUT_S, Selector
from shared.model import BinlogPosition, PipelineParams
from tests.unit.test_selector import Clock, ClockWindow, Source, cut, txn

WINDOW = 7


class Marks:
    """The snapshot side: which windows it opened, and when the selector gave each up."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.open = clock, {WINDOW}
        self.abandoned_at: dict[int, float] = {}

    def expects(self, window_id: int) -> bool:
        return window_id in self.open

    def abandoned(self, window_id: int) -> None:
        self.open.discard(window_id)
        self.abandoned_at[window_id] = self.clock.now


def marked(n: int, *signals: tuple[str, int], rows: int = 1) -> Transaction:
    return dataclasses.replace(txn(n, rows=rows), signals=signals)


def selecting(source: Source, clock: Clock, marks: Marks, batch_size: int = 100) -> Selector:
    window = ClockWindow(5)
    window.source = source
    return Selector("c.p", source, BinlogPosition("binlog.000001", 1000), 1,
                    PipelineParams(batch_size=batch_size, batch_timeout_ms=100), window,
                    clock=clock, watermarks=marks)


def test_a_window_holds_its_batch_open_and_the_batch_ends_at_its_high_watermark() -> None:
    clock = Clock()
    source = Source(clock, step_s=0.001)
    source.items.append(marked(1, ("L", WINDOW)))
    source.items.extend(txn(n, rows=1) for n in range(2, 250))  # past batch_size: not cut
    source.items.append(marked(250, ("H", WINDOW)))
    source.items.extend(txn(n, rows=1) for n in range(251, 300))
    marks = Marks(clock)
    batch = cut(selecting(source, clock, marks))
    assert batch.end == BinlogPosition("binlog.000001", 1250)
    assert [window for window, _, _ in batch.windows] == [WINDOW]
    assert marks.abandoned_at == {}


def test_a_window_whose_read_failed_lets_the_batch_be_cut_at_once() -> None:
    clock = Clock()
    source = Source(clock, step_s=0.05)  # a busy source: 20 transactions a second, never quiet
    source.items.append(marked(1, ("L", WINDOW)))
    source.items.append(marked(2, ("A", WINDOW), rows=0))  # the read after it failed
    source.items.extend(txn(n, rows=1) for n in range(3, 6001))
    marks, started = Marks(clock), clock.now
    batch = cut(selecting(source, clock, marks))
    assert batch.rows <= 100 and batch.windows == []
    assert marks.abandoned_at[WINDOW] - started < 1  # not held until a quiet moment


def test_a_window_left_open_on_a_busy_stream_is_abandoned_after_its_timeout() -> None:
    clock = Clock()
    source = Source(clock, step_s=0.05)  # never quiet for the 0.1 s an idle check needs
    source.items.append(marked(1, ("L", WINDOW)))  # its high watermark never comes
    source.items.extend(txn(n, rows=0) for n in range(2, 6001))  # 300 s of it
    marks, started = Marks(clock), clock.now
    batch = cut(selecting(source, clock, marks, batch_size=10_000))
    assert WINDOW_TIMEOUT_S <= marks.abandoned_at[WINDOW] - started <= WINDOW_TIMEOUT_S + 2
    assert batch.windows == []


def test_a_window_holding_its_batch_open_past_the_bound_is_abandoned() -> None:
    clock = Clock()
    source = Source(clock)  # a backlog read at once: the window's timeout is far
    source.items.append(marked(1, ("L", WINDOW)))
    source.items.extend(txn(n, rows=10) for n in range(2, 1000))
    marks = Marks(clock)
    batch = cut(selecting(source, clock, marks, batch_size=10))
    assert batch.rows == 10 * WINDOW_BATCH_FACTOR + 1 and batch.windows == []
    assert WINDOW in marks.abandoned_at
