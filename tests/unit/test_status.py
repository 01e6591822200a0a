"""node/status.py ``delay_ms``: how far behind the source status says a pipeline is, and
what Select tells it of a transaction it is reading."""

from __future__ import annotations

import threading
from collections import deque
from types import SimpleNamespace
from typing import Any

from node.changes import Transaction
from node.select import framing
from node.select.binlog import BinlogReader
from node.select.selector import Selector
from node.status import RunnerStatus, delay_ms
from shared.model import BinlogPosition

NOW = 1_700_000_600_000  # ten minutes after the commits below


def test_a_new_runner_with_a_backlog_reads_its_delay_before_its_first_load() -> None:
    """After a failover the new runner has loaded nothing: its delay read 0 however deep
    the backlog (its DELAY alarm never fired). It reads from the oldest batch selected."""
    assert delay_ms(NOW, True, 0, 1_700_000_000_000) == 599_500
    assert delay_ms(NOW, False, 0, 1_700_000_000_000) == 0  # caught up: nothing to do
    assert delay_ms(NOW, True, 0, 0) == 0  # nothing read yet: not known


def test_the_delay_counts_from_the_oldest_transaction_not_loaded() -> None:
    """The source was idle for ten minutes: the last batch loaded committed at 0 s, and a
    transaction committed at 590 s is in flight. It is 10 s behind, not the 600 s since
    the last load (status read ten minutes while it was in flight: a DELAY alarm fired
    after every quiet spell)."""
    assert delay_ms(NOW, True, 1_700_000_000_000, 1_700_000_590_000) == 9_500
    # transactions read, not taken by Select yet (a moment): from the last load
    assert delay_ms(NOW, True, 1_700_000_590_000, 0) == 9_500


def test_a_transaction_being_read_shows_its_delay_before_its_commit() -> None:
    """Nothing in flight, nothing waiting: caught up, unless Select is reading a transaction
    whose commit has not come (a huge one: minutes without a batch). Then since its first
    event; work in flight counts from its own oldest commit, here 290 s (the last load
    committed at 0 s: the old figure, 599.5 s, counted the quiet ten minutes before)."""
    started = 1_700_000_300_000
    assert delay_ms(NOW, False, 1_700_000_000_000, 0, started) == 299_500
    assert delay_ms(NOW, True, 1_700_000_000_000, 1_700_000_290_000, started) == 309_500
    assert delay_ms(NOW, True, 0, 0, started) == 299_500  # nothing selected yet
    assert delay_ms(NOW, False, 1_700_000_000_000, 0, 0) == 0


def test_a_runner_reads_its_delay_from_its_oldest_batch_in_flight() -> None:
    """Batches 5 (committed at 590 s) and 6 in flight after a quiet stretch: the delay is
    batch 5's; once 5 is loaded, batch 6's; once all are, caught up."""
    in_flight = deque([(5, 1_700_000_590_000), (6, 1_700_000_595_000)])
    runner = SimpleNamespace(_selector=None, _in_flight=in_flight,
                             last_commit_ts_ms=1_700_000_000_000)
    assert RunnerStatus.delay_now(runner, NOW) == 9_500  # type: ignore[arg-type]
    in_flight.popleft()
    assert RunnerStatus.delay_now(runner, NOW) == 4_500  # type: ignore[arg-type]
    in_flight.popleft()
    assert RunnerStatus.delay_now(runner, NOW) == 0  # type: ignore[arg-type]


def event(kind: int, body: bytes, timestamp_s: int = 0) -> bytes:
    """A stream packet: the OK byte, the 19-byte event header, the body."""
    return b"\0" + timestamp_s.to_bytes(4, "little") + bytes([kind]) + \
        (1).to_bytes(4, "little") + (19 + len(body)).to_bytes(4, "little") + \
        (500).to_bytes(4, "little") + b"\0\0" + body


class Reader:
    """What framing and a selector read of a BinlogReader; its commits are the reader's."""

    def __init__(self) -> None:
        self._domains: dict[int, str] = {}
        self.start = BinlogPosition("binlog.000001", 4)
        self._tables = {7: SimpleNamespace(number=1, system=False)}
        self.row_bytes = {1: (10, 10.0)}
        self._stop = threading.Event()
        self._pos, self._in_txn, self.reading_since_ms = 4, False, 0
        self._mid_group = False
        self.loop_channel, self._echoes = None, SimpleNamespace(due=False)
        self.out: list[Transaction] = []
        self._put = self.out.append

    def _position(self, state: str = "") -> BinlogPosition:
        return BinlogPosition("binlog.000001", self._pos, state)

    def _commit(self, *args: Any, **values: Any) -> None:
        BinlogReader._commit(self, *args, **values)  # type: ignore[arg-type]

    @property
    def backlog(self) -> int:
        return len(self.out)


def test_status_reads_the_delay_of_a_huge_transaction_while_select_reads_it() -> None:
    """The source was quiet ten minutes, then one transaction of millions of rows began
    (its GTID event's time): while Select reads its rows events the runner has nothing in
    flight and nothing waiting, and status read 0 (its DELAY alarm could not fire)."""
    reader = Reader()
    selector = Selector("c.p", reader, reader.start, 1, None, None)  # type: ignore[arg-type]
    runner = SimpleNamespace(_selector=selector, _in_flight=deque(),
                             last_commit_ts_ms=1_700_000_000_000)
    rows = event(30, (7).to_bytes(6, "little") + b"\0" * 30, 1_700_000_300)
    packets = [event(162, b"\0" * 13, 1_700_000_300), *[rows] * 3,
               event(16, b"\0" * 8, 1_700_000_590)]  # its XID: committed late
    seen: list[int] = []

    class Packets:
        def next(self) -> bytes:
            seen.append(RunnerStatus.delay_now(runner, NOW))  # type: ignore[arg-type]
            if len(packets) == 1:
                reader._stop.set()
            return packets.pop(0)

    framing.frame(reader, Packets())  # type: ignore[arg-type]
    seen.append(RunnerStatus.delay_now(runner, NOW))  # type: ignore[arg-type]
    assert seen == [0, 299_500, 299_500, 299_500, 299_500,
                    599_500]  # read whole: waiting for Select, from the last load
    assert reader.reading_since_ms == 0 and reader.out[0].commit_ts_ms == 1_700_000_590_000
    reader.out.clear()  # selected and loaded: caught up
    assert RunnerStatus.delay_now(runner, NOW) == 0  # type: ignore[arg-type]


def test_a_mysql_transaction_is_read_from_its_begin() -> None:
    """MySQL writes no MariaDB GTID event: its BEGIN query event starts the transaction."""
    reader = SimpleNamespace(_in_txn=False, loop_channel=None, reading_since_ms=0,
                             _library_event=lambda data: SimpleNamespace(query="BEGIN"))
    begin = event(2, b"\0" * 20, 1_700_000_300)
    assert BinlogReader._query(reader, begin, [], 0, [], "")  # type: ignore[arg-type]
    assert reader._in_txn and reader.reading_since_ms == 1_700_000_300_000


def test_status_shows_the_rows_skip_load_exception_skipped() -> None:
    """Rows the target refused and skip_load_exception skipped are listed, when there are
    any, with where to read which they were."""
    from manager import render
    from shared.rpc import manager_pb2

    skipping = manager_pb2.PipelineState(pipeline_id="c.p", state="running", owner_node=1,
                                         rows_skipped=1234)
    clean = manager_pb2.PipelineState(pipeline_id="c.q", state="running", owner_node=1)
    text = render.pipelines([manager_pb2.ChannelInfo(pipelines=[skipping, clean])])
    assert "ROWS SKIPPED" in text and "event=row_skipped" in text
    line = [line for line in text.splitlines() if "1,234" in line]
    assert line and line[0].startswith("c.p")
    assert "ROWS SKIPPED" not in render.pipelines([manager_pb2.ChannelInfo(pipelines=[clean])])


def test_a_batch_a_watermark_window_holds_open_counts_as_behind() -> None:
    """A snapshot's watermark window keeps Select's batch open, uncut, up to
    WINDOW_TIMEOUT_S: its rows are neither loaded nor in flight, and status read 0 ms the
    whole minute. The selector says since when its open batch holds rows (here on a test
    clock: the minute passes at once)."""
    import dataclasses

    from node.select.selector import WINDOW_TIMEOUT_S
    from tests.unit.test_selector import Clock, Source, txn
    from tests.unit.test_selector_windows import WINDOW, Marks, marked, selecting

    clock, seen = Clock(), []
    committed_ms = 1_700_000_000_000
    runner = SimpleNamespace(_selector=None, _in_flight=deque(), last_commit_ts_ms=0)

    class Watched(Source):  # status looks whenever Select waits for a transaction
        reading_since_ms = 0

        def take(self, timeout_s: float) -> Transaction | None:
            if not self.items:
                now_ms = committed_ms + int((clock.now - 1000.0) * 1000)
                seen.append((clock.now - 1000.0, RunnerStatus.delay_now(runner, now_ms)))
            return super().take(timeout_s)

    source = Watched(clock, step_s=0.001)
    source.items.append(dataclasses.replace(marked(1, ("L", WINDOW)),
                                            commit_ts_ms=committed_ms))
    source.items.append(dataclasses.replace(txn(2, rows=3), commit_ts_ms=committed_ms))
    selector = runner._selector = selecting(source, clock, Marks(clock))
    batch = selector.next_batch(threading.Event())  # cut once the window is abandoned
    assert batch is not None and batch.rows == 4
    held = [(at, delay) for at, delay in seen if 1 < at < WINDOW_TIMEOUT_S]
    assert held and all(at * 1000 - 600 < delay <= at * 1000 for at, delay in held)
    assert max(delay for _, delay in seen) >= (WINDOW_TIMEOUT_S - 1) * 1000


def test_a_retrying_runner_stays_as_behind_as_the_batches_its_failure_dropped() -> None:
    """A failure drops batches 5 and 6 (in flight since 590 s); the runner retries and
    selects them again from the target's position. Between its attempts ('retrying',
    'starting') it read 0 ms, so a pipeline failing over and over looked caught up."""
    in_flight = deque([(5, 1_700_000_590_000), (6, 1_700_000_595_000)])
    runner = SimpleNamespace(_selector=None, _in_flight=in_flight, last_commit_ts_ms=0)
    from node.status import carry_over

    carry_over(in_flight, 5)
    assert RunnerStatus.delay_now(runner, NOW) == 9_500  # type: ignore[arg-type]
    in_flight.append((5, 1_700_000_590_000))  # selected again
    assert [pid for pid, _ in in_flight] == [5, 5]
    carry_over(in_flight, 5)  # failed again before loading it
    assert list(in_flight) == [(5, 1_700_000_590_000)]
    carry_over(deque(), 5)  # nothing in flight: nothing carried


def test_a_transaction_read_and_not_taken_yet_counts_from_its_commit() -> None:
    """After an idle hour, a transaction the reader has queued and Select not taken yet read
    an hour behind (the delay fell back to the last load's commit)."""
    import queue

    from node.select.binlog import BinlogReader
    from node.select.selector import Selector

    reader = SimpleNamespace(out=queue.Queue(), _taken=deque())  # nothing taken in one go yet
    assert BinlogReader.queued_since_ms.fget(reader) == 0  # type: ignore[attr-defined]
    reader.out.put(SimpleNamespace(commit_ts_ms=NOW - 2_000))
    reader.queued_since_ms = BinlogReader.queued_since_ms.fget(reader)  # type: ignore
    selector = SimpleNamespace(transactions=reader, backlog=1, reading_since_ms=0,
                               open_since_ms=0)
    selector.queued_since_ms = Selector.queued_since_ms.fget(selector)  # type: ignore
    runner = SimpleNamespace(_selector=selector, _in_flight=deque(),
                             last_commit_ts_ms=NOW - 3_600_000)
    assert RunnerStatus.delay_now(runner, NOW) == 1_500  # type: ignore[arg-type]
