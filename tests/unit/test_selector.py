"""node/select/selector.py: batches cut at commits by rows, by transactions spanned and by time,
whether the stream is busy or quiet; fed by a transaction source the test controls."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from node.changes import Batch, ChangeType, RowChange, Transaction
from node.select.selector import IDLE_BATCH_INTERVAL_S, MAX_TRANSACTIONS, Selector
from node.window import Window
from shared.model import BinlogPosition, PipelineParams


class Clock:
    """A clock that moves only when the test (or a take from the source) moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Source:
    """Transactions handed out in order; each take costs ``step_s`` on the test clock and an
    empty source waits (on the test clock) the whole timeout it is given."""

    def __init__(self, clock: Clock, step_s: float = 0.0) -> None:
        self.clock, self.step_s = clock, step_s
        self.items: collections.deque[Transaction] = collections.deque()
        self.takes = 0
        self.waits = 0  # sleeps on the window (Arrivals)

    def begin(self) -> None:
        pass

    def stop(self) -> None:
        pass

    @property
    def backlog(self) -> int:
        return len(self.items)

    def take(self, timeout_s: float) -> Transaction | None:
        self.takes += 1
        if not self.items:
            self.clock.now += timeout_s
            return None
        self.clock.now += self.step_s
        return self.items.popleft()

    def wait(self, timeout_s: float) -> None:
        """Time passing while Select sleeps on the window (nothing arrives here)."""
        self.waits += 1
        self.clock.now += timeout_s


class ClockWindow(Window):
    """A window whose waits pass on the test clock, through the source's ``wait``."""

    def __init__(self, size: int, saturation: int = 99) -> None:
        super().__init__(size, saturation)
        self.source: Source | None = None

    def wait_alone(self, timeout_s: float) -> bool:
        assert self.source is not None
        if not self.alone():
            self.source.wait(timeout_s)
        return self.alone()


def txn(n: int, rows: int = 0, ddl: bool = False) -> Transaction:
    if ddl:
        changes: tuple[RowChange, ...] = (RowChange("db", "", ChangeType.DDL, ddl="ALTER …"),)
    else:
        changes = tuple(RowChange("db", "t", ChangeType.INSERT, ("id",), None, {"id": n * 100 + i})
                        for i in range(rows))
    return Transaction(changes, BinlogPosition("binlog.000001", 1000 + n), n, n)


def selector(source: Source, clock: Clock, busy: bool = False, **params: int) -> Selector:
    settings = PipelineParams(**({"batch_size": 100, "batch_timeout_ms": 100} | params))
    window = ClockWindow(5, saturation=0 if busy else 99)
    window.source = source
    return Selector("c.p", source, BinlogPosition("binlog.000001", 1000), 1, settings,
                    window, clock=clock)


def cut(select: Selector) -> Batch:
    batch = select.next_batch(threading.Event())
    assert batch is not None
    return batch


def test_empty_transactions_of_a_busy_stream_are_cut_by_count() -> None:
    clock = Clock()
    source = Source(clock)  # a backlog: the source never waits
    source.items.extend(txn(n) for n in range(1, MAX_TRANSACTIONS + 11))
    select = selector(source, clock)
    batch = cut(select)
    assert (batch.spanned, batch.rows, batch.transactions) == (MAX_TRANSACTIONS, 0, [])
    assert batch.end == BinlogPosition("binlog.000001", 1000 + MAX_TRANSACTIONS)
    assert select.position == batch.end and select.next_process_id == 2
    assert cut(select).start == batch.end


def test_empty_transactions_of_a_steady_stream_are_cut_by_time() -> None:
    clock = Clock()
    source = Source(clock, step_s=1 / 64)  # a transaction every 1/64 s, never quiet
    source.items.extend(txn(n) for n in range(1, 5000))
    batch = cut(selector(source, clock))
    assert batch.rows == 0
    # the first transaction starts the clock; the cut comes after the idle interval
    assert batch.spanned == IDLE_BATCH_INTERVAL_S * 64 + 1


def test_a_backlog_lets_a_batch_grow_past_its_timeout() -> None:
    """A catch-up: transactions already read wait, so the timeout waits too (each Spark job
    has a fixed cost) and the batch is cut by size."""
    clock = Clock()
    source = Source(clock, step_s=1 / 64)
    source.items.extend(txn(n, rows=1) for n in range(1, 500))
    batch = cut(selector(source, clock, batch_size=40, batch_timeout_ms=125))
    assert batch.rows == batch.spanned == 40
    assert clock.now - 1000.0 > 0.125 * 4  # well past the timeout


def test_rows_are_cut_by_size_and_transactions_stay_whole() -> None:
    clock = Clock()
    source = Source(clock)
    source.items.extend(txn(n, rows=30) for n in range(1, 10))
    batch = cut(selector(source, clock, batch_size=100))
    assert batch.rows == 120 and batch.spanned == 4  # the cut waits for the commit


def test_busy_extract_lets_a_batch_grow_past_its_timeout() -> None:
    clock = Clock()
    source = Source(clock, step_s=1 / 16)
    source.items.extend(txn(n, rows=1) for n in range(1, 500))
    batch = cut(selector(source, clock, busy=True, batch_size=40, batch_timeout_ms=100))
    assert batch.rows == 40


def test_a_quiet_stream_cuts_what_it_has() -> None:
    clock = Clock()
    source = Source(clock)
    source.items.extend([txn(1, rows=2), txn(2), txn(3, rows=1)])
    batch = cut(selector(source, clock))
    assert (batch.rows, batch.spanned, len(batch.transactions)) == (3, 3, 2)
    assert [c.after for c in batch.changes()] == [{"id": 100}, {"id": 101}, {"id": 300}]
    assert batch.end == BinlogPosition("binlog.000001", 1003)
    assert batch.commit_ts_ms == 3


def test_ddl_travels_alone_and_takes_the_empty_stretch_before_it() -> None:
    clock = Clock()
    source = Source(clock)
    source.items.extend([txn(1, rows=1), txn(2, ddl=True), txn(3), txn(4), txn(5, ddl=True),
                         txn(6, rows=1)])
    select = selector(source, clock)
    first, second, third, fourth = (cut(select) for _ in range(4))
    assert (first.rows, first.has_ddl) == (1, False)
    assert (second.spanned, second.has_ddl) == (1, True)
    assert (third.spanned, third.rows, third.has_ddl) == (3, 1, True)  # 3, 4 and the DDL
    assert fourth.rows == 1 and fourth.end.pos == 1006


def test_counting_is_not_recomputed_per_transaction() -> None:
    batch = Batch("c.p", 1)
    big = txn(1, rows=50)
    for n in range(1000):
        batch.add(big if n % 2 else txn(n))
    assert (batch.rows, batch.spanned, len(batch.transactions)) == (25_000, 1000, 500)
    assert batch.end == big.end and not batch.has_ddl
    # Batch.rows is a counter, not a property over the transactions
    assert "rows" in Batch.__slots__ and not isinstance(getattr(Batch, "rows", None), property)


def test_a_batch_of_two_way_echoes_only_is_marked_so_load_writes_no_position() -> None:
    echo = Transaction((), BinlogPosition("binlog.000001", 1001), 1, 1, echo=True)
    assert Batch("c.p", 1, [echo, echo]).echo_only
    assert not Batch("c.p", 1, [echo, txn(2)]).echo_only  # a neighbour's stretch moves it
    assert not Batch("c.p", 1, [echo, txn(2, rows=1)]).echo_only


def test_a_gtid_start_follows_the_server_kind() -> None:
    from node.select.source import gtid_start

    assert gtid_start("10.11.6-MariaDB-0+deb12u1-log", "0-11-42") == {
        "auto_position": "0-11-42", "is_mariadb": True}
    mysql_set = "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5"
    assert gtid_start("8.0.36", mysql_set) == {"auto_position": mysql_set, "is_mariadb": False}


class Arrivals(Source):
    """Transactions that arrive at given times on the test clock; ``then`` runs once the
    clock passes a time (e.g. the batch before this one gets loaded)."""

    def __init__(self, clock: Clock, arrivals: list[tuple[float, Transaction]],
                 then: tuple[float, Callable[[], None]] | None = None) -> None:
        super().__init__(clock)
        self.arrivals = collections.deque(arrivals)
        self.then = then

    @property
    def backlog(self) -> int:
        return sum(1 for at, _ in self.arrivals if at <= self.clock.now)

    def take(self, timeout_s: float) -> Transaction | None:
        self.takes += 1
        if not self.arrivals or self.arrivals[0][0] > self.clock.now:
            upto = self.clock.now + timeout_s
            if self.arrivals and self.arrivals[0][0] <= upto:
                self.clock.now = self.arrivals[0][0]
            else:
                self.clock.now = upto
        if self.then is not None and self.clock.now >= self.then[0]:
            self.then[1]()
            self.then = None
        if self.arrivals and self.arrivals[0][0] <= self.clock.now:
            return self.arrivals.popleft()[1]
        return None

    def wait(self, timeout_s: float) -> None:
        """Time passing while Select sleeps on the window: arrivals only queue, ``then``
        (the batch before loaded) runs and ends the sleep."""
        self.waits += 1
        upto = self.clock.now + timeout_s
        if self.then is not None and self.then[0] <= upto:
            self.clock.now = max(self.clock.now, self.then[0])
            self.then[1]()
            self.then = None
        else:
            self.clock.now = upto


def on_its_way(clock: Clock, arrivals: list[tuple[float, Transaction]], loaded_at: float | None,
               batch_timeout_ms: int = 100) -> tuple[Selector, Arrivals]:
    """Select with a batch before it on its way, loaded at ``loaded_at`` (None: never)."""
    window = ClockWindow(5)
    assert window.acquire(threading.Event())  # the batch before
    source = window.source = Arrivals(
        clock, arrivals, then=None if loaded_at is None else (loaded_at, window.release))
    return Selector("c.p", source, BinlogPosition("binlog.000001", 1000), 1,
                    PipelineParams(batch_size=100, batch_timeout_ms=batch_timeout_ms), window,
                    clock=clock), source


def test_a_caught_up_pipeline_sends_a_transaction_at_once() -> None:
    """Nothing on its way, nothing waiting: no batch timeout is waited for."""
    clock = Clock()
    start = clock.now
    source = Arrivals(clock, [(start + 0.001, txn(1, rows=2)), (start + 0.5, txn(2, rows=1))])
    batch = cut(selector(source, clock, batch_timeout_ms=100))
    assert batch.rows == 2 and clock.now - start < 0.002


def test_while_a_batch_is_on_its_way_the_next_gathers_until_it_is_loaded() -> None:
    """A group commit: the next batch takes what arrives until the window is empty again
    (here the batch before is loaded 35 ms on), well before its 100 ms timeout."""
    clock = Clock()
    start = clock.now
    select, _ = on_its_way(clock, [(start + n * 0.01, txn(n + 1, rows=1)) for n in range(20)],
                           loaded_at=start + 0.035)
    batch = cut(select)
    assert batch.rows == 4 and clock.now - start < 0.045  # 0, 10, 20, 30 ms; cut at ~35-40


def test_while_a_batch_is_on_its_way_select_sleeps_on_the_window_not_per_transaction() -> None:
    """A transaction a millisecond: Select is not woken by each (it was, 1,000 times a second
    at 1,000 tx/s); it wakes when the batch before is loaded and takes what queued, at once."""
    clock = Clock()
    start = clock.now
    select, source = on_its_way(
        clock, [(start + n * 0.001, txn(n + 1, rows=1)) for n in range(100)],
        loaded_at=start + 0.0355)
    batch = cut(select)
    assert batch.rows == 36 and clock.now - start < 0.0356  # 0..35 ms, cut when loaded
    assert source.waits == 1  # one sleep on the window
    assert source.takes == batch.rows  # every take found a transaction ready: no waiting


def test_a_batch_past_its_timeout_takes_what_queued_while_it_slept() -> None:
    """The batch before is not loaded by this one's timeout: it is cut then (E/T is not
    saturated), with what arrived until then, not only the first transaction."""
    clock = Clock()
    start = clock.now
    select, source = on_its_way(
        clock, [(start + n * 0.01, txn(n + 1, rows=1)) for n in range(30)], loaded_at=None,
        batch_timeout_ms=100)
    batch = cut(select)
    assert batch.rows == 11 and clock.now - start < 0.101  # 0, 10, …, 100 ms
    assert source.waits == 1


def test_a_batch_counts_the_bytes_of_its_rows_events_for_the_window() -> None:
    events = ((1, b"x" * 300), (2, b"y" * 50))
    batch = Batch("c.p", 1)
    batch.add(Transaction((), BinlogPosition("binlog.000001", 1001), 1, 1, events=events,
                          event_rows=3))
    batch.add(Transaction((), BinlogPosition("binlog.000001", 1002), 2, 2,
                          events=events[:1], event_rows=1))
    assert (batch.size, batch.events, batch.rows) == (650, 3, 4)
