"""Select's take from the binlog reader's queue: a backlog taken in one go under one lock,
handed over one transaction at a time in binlog order, with the stream's end last."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from node.changes import Transaction
from node.select.binlog import TAKE_AT_ONCE, BinlogReader, StreamEnded
from shared.errors import SourceError
from shared.model import BinlogPosition, DataSource


def reader(queue_size: int = 10_000) -> BinlogReader:
    """A reader never started: its queue is filled by the test."""
    return BinlogReader(DataSource("src", "127.0.0.1", 1), 1, BinlogPosition("b.000001", 4),
                        lambda schema, table: True, lambda schema: True, ddl=False,
                        queue_size=queue_size)


def txn(n: int) -> Transaction:
    return Transaction((), BinlogPosition("b.000001", 4 + n), 1_000 * n, 0, events=((1, b"x"),),
                       event_rows=1)


def test_a_backlog_is_taken_in_one_go_in_order_and_the_stream_s_end_comes_last() -> None:
    found = reader()
    written = [txn(n) for n in range(1, TAKE_AT_ONCE + 45)]
    for item in [*written, StreamEnded(SourceError("the source went away"))]:
        found.out.put(item)
    gets: list[Any] = []
    get = found.out.get
    found.out.get = lambda *args, **kwargs: gets.append(args) or get(*args, **kwargs)  # type: ignore[method-assign]

    first = found.take(1.0)
    assert first is written[0]
    assert found.backlog == len(written)  # the rest and the stream's end, taken or queued
    assert found.queued_since_ms == written[1].commit_ts_ms
    taken = [first, *(found.take(1.0) for _ in written[1:])]
    assert taken == written
    assert len(gets) == 2  # one lock for each TAKE_AT_ONCE, not one each

    for _ in range(2):  # the stream's end stays the last word
        with pytest.raises(SourceError, match="the source went away"):
            found.take(1.0)
    assert found.backlog == 1


def test_a_reader_waiting_for_room_goes_on_as_select_takes() -> None:
    found = reader(queue_size=8)
    written = [txn(n) for n in range(1, 101)]

    def frame() -> None:
        for item in written:
            found._put(item)

    framing = threading.Thread(target=frame, daemon=True)
    framing.start()
    taken = [found.take(5.0) for _ in written]
    framing.join(5)
    assert taken == written
    assert found.take(0.01) is None and found.backlog == 0
