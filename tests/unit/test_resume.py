"""Where a (re)start resumes (node/cursor.py ``resume``), how Select cuts the stretch it
reads again at the targets' rows, and how Load tells an applied batch: together they apply
each source transaction exactly once on every target, never a prefix of a loaded batch."""

from __future__ import annotations

import re
import threading

import pytest

from node.changes import Batch
from node.cursor import Cursor, Resume, resume
from node.select.selector import Selector
from node.target.mysql.owners import applied as _applied
from shared.errors import LoadError, PositionConflictError, PositionLostError
from shared.model import BinlogPosition, PipelineParams
from tests.unit.test_selector import Clock, ClockWindow, Source, txn


def at(pos: int, file: str = "binlog.000001") -> BinlogPosition:
    return BinlogPosition(file, pos)


def test_nothing_loaded_resumes_at_the_hint() -> None:
    hint = Cursor(at(500), 7)
    assert resume("c.p", hint, {}) == Resume(hint)
    assert resume("c.p", hint, {"t": None, "u": Cursor(BinlogPosition(), 0)}) == Resume(hint)


def test_targets_ahead_of_the_hint_decide_and_each_row_past_the_start_is_a_cut() -> None:
    hint = Cursor(at(500), 7)
    got = resume("c.p", hint, {"a": Cursor(at(900), 12), "b": Cursor(at(700), 10),
                        "c": Cursor(at(900), 12)})
    assert got == Resume(Cursor(at(700), 12), (at(900),))


def test_a_target_behind_the_hint_is_at_the_hint() -> None:
    """Every transaction at or before the hint is on every target (the hint is published
    after all of them committed): a row behind it is a target that had nothing to write."""
    got = resume("c.p", Cursor(at(500), 7), {"a": Cursor(at(300), 3), "b": Cursor(at(800), 9)})
    assert got == Resume(Cursor(at(500), 9), (at(800),))


def test_a_hint_that_names_its_targets_vouches_for_those_only() -> None:
    """A target the hint does not name (left out of the pipeline while it went on, or a dry
    run's) is where its own row is: what came after it is loaded there again."""
    hint = Cursor(at(500), 7, targets={"a": at(500)})
    got = resume("c.p", hint, {"a": Cursor(at(500), 7), "b": Cursor(at(200), 2)})
    assert got == Resume(Cursor(at(200), 7), (at(500),))
    # a hint naming none (older, or set by an operator) vouches for every target
    assert resume("c.p", Cursor(at(500), 7), {"b": Cursor(at(200), 2)}) == \
        Resume(Cursor(at(500), 7))


def test_a_target_without_a_row_is_at_the_hint() -> None:
    got = resume("c.p", Cursor(at(500), 7), {"a": None, "b": Cursor(at(800), 9)})
    assert got == Resume(Cursor(at(500), 9), (at(800),))


def test_files_are_ordered_by_their_number() -> None:
    got = resume("c.p", Cursor(at(4, "binlog.999999"), 1),
                 {"a": Cursor(at(4, "binlog.1000000"), 2), "b": Cursor(at(90, "binlog.999999"), 1)})
    assert got == Resume(Cursor(at(90, "binlog.999999"), 2), (at(4, "binlog.1000000"),))


def test_a_gtid_hint_defers_to_the_rows() -> None:
    hint = Cursor(BinlogPosition(gtid="0-1-5"), 1)
    got = resume("c.p", hint, {"a": Cursor(at(900), 4), "b": Cursor(at(700), 3)})
    assert got == Resume(Cursor(at(700), 4), (at(900),))


def test_a_target_with_nothing_loaded_keeps_a_gtid_start_at_the_hint() -> None:
    """A GTID start (``start: {gtid}``, ``position set --gtid``), two targets, the first
    batch committed on one and refused by the other: the retry starts at the hint for the
    target that has nothing yet, and cuts at the other's row (the stretch in between was
    skipped for that target before)."""
    hint = Cursor(BinlogPosition(gtid="0-11-8"), 0)
    loaded = BinlogPosition("binlog.000001", 4079, "0-11-14")
    got = resume("c.p", hint, {"target": Cursor(loaded, 1), "target2": None})
    assert got == Resume(Cursor(BinlogPosition(gtid="0-11-8"), 1), (loaded,))


def test_a_row_of_another_life_of_the_pipeline_refuses_the_start() -> None:
    """The channel deleted and made again under the same name (or ZooKeeper lost its data):
    the target's row belongs to an earlier run; going on would skip or repeat rows."""
    hint = Cursor(at(500), 0, run="new")
    with pytest.raises(PositionConflictError, match=r"target t .* up to binlog.000001:900 "
                       r"for an earlier life .* starts at binlog.000001:500"):
        resume("c.p", hint, {"t": Cursor(at(900), 12, run="old")})
    with pytest.raises(PositionConflictError, match=re.escape(
            "DELETE FROM retl.retl_position WHERE pipeline_id = 'c.p'")):
        resume("c.p", hint, {"t": Cursor(at(300), 12, run="old")})  # a gap the other way


def test_a_start_exactly_at_an_earlier_lifes_row_goes_on_from_it() -> None:
    got = resume("c.p", Cursor(at(900), 0, run="new"), {"t": Cursor(at(900), 12, run="old")})
    assert got == Resume(Cursor(at(900), 12, run="new"))


def test_rows_and_cursors_without_a_run_are_taken_as_this_lifes() -> None:
    """Rows written before rows carried a run (and cursors of then) are not refused."""
    assert resume("c.p", Cursor(at(500), 3), {"t": Cursor(at(900), 12, run="old")}).start == \
        Cursor(at(900), 12)
    assert resume("c.p", Cursor(at(500), 3, run="r"), {"t": Cursor(at(900), 12)}).start == \
        Cursor(at(900), 12, run="r")


def test_a_target_behind_where_the_cursor_saw_it_is_replayed_from_its_row() -> None:
    """It lost committed transactions (restored, failed over to a lagging replica): the
    restart reads again from its row (never a gap); the other target is cut at its own."""
    hint = Cursor(at(800), 9, run="r", targets={"a": at(800), "b": at(800)})
    got = resume("c.p", hint, {"a": Cursor(at(600), 7, run="r"), "b": Cursor(at(800), 9,
                                                                             run="r")})
    assert got == Resume(Cursor(at(600), 9, run="r"), (at(800),), ("a",))


def test_a_target_that_lost_its_row_refuses_the_start() -> None:
    hint = Cursor(at(800), 9, run="r", targets={"a": at(800)})
    with pytest.raises(PositionConflictError, match="target a has no position row"):
        resume("c.p", hint, {"a": None})


def cut_all(select: Selector) -> list[Batch]:
    batches = []
    while select.transactions.backlog:
        batch = select.next_batch(threading.Event())
        assert batch is not None
        batches.append(batch)
        select.window.release()
    return batches


def selector(source: Source, clock: Clock, cuts: tuple[BinlogPosition, ...]) -> Selector:
    window = ClockWindow(5)
    window.source = source
    return Selector("c.p", source, at(1000), 1, PipelineParams(batch_size=1000),
                    window, clock=clock, cuts=cuts)


def test_select_ends_a_batch_at_every_cut() -> None:
    clock = Clock()
    source = Source(clock)  # a backlog: without cuts all of it would go in one batch
    source.items.extend(txn(n, rows=2) for n in range(1, 11))
    batches = cut_all(selector(source, clock, (at(1003), at(1007))))
    assert [(b.start.pos, b.end.pos) for b in batches] == [(1000, 1003), (1003, 1007),
                                                           (1007, 1010)]


def test_a_row_no_transaction_ends_at_stops_select() -> None:
    """A row between two transactions' ends is not a boundary of this binlog (another
    server's position, a reset binlog): what the target holds cannot be told."""
    clock = Clock()
    source = Source(clock)
    source.items.extend(txn(n, rows=1) for n in range(1, 5))
    source.items[2] = source.items[2].__class__(source.items[2].changes, at(1004), 3, 3)
    source.items[3] = source.items[3].__class__(source.items[3].changes, at(1006), 4, 4)
    with pytest.raises(PositionLostError, match="no transaction of the source's binlog ends"):
        cut_all(selector(source, clock, (at(1005),)))


def row(pos: int, process_id: int = 1, file: str = "binlog.000001") -> tuple[object, ...]:
    return (file, pos, 5, process_id, "", "", "")


def batch(start: int, end: int, process_id: int = 9) -> Batch:
    made = Batch("c.p", process_id, start=at(start))
    made.add(txn(end - 1000, rows=1))
    return made


def test_a_batch_at_or_before_the_row_is_applied_whatever_its_process_id() -> None:
    assert _applied(row(1010, process_id=3), batch(1005, 1010, process_id=9), "here")
    assert _applied(row(1020), batch(1005, 1010), "here")
    assert not _applied(row(1005), batch(1005, 1010), "here")
    # claimed, nothing loaded
    assert not _applied(("", 0, 5, 0, "", "", ""), batch(1005, 1010), "here")


def test_a_row_inside_a_batch_stops_the_load() -> None:
    with pytest.raises(LoadError, match="apply part of it twice"):
        _applied(row(1007), batch(1005, 1010), "stage load, pipeline c.p")


def test_a_cut_of_the_old_primary_the_new_one_orders_otherwise_across_domains_says_so() -> None:
    """Two GTID domains: the old primary logged A (0-41-10), B (1-51-20), C (0-41-11); the
    promoted one applied A, C, B. A target holds up to B (the old primary's row), the stream
    starts after A: no transaction of the new binlog ends at B's state. The stop says that,
    and the GTID to set every target to, not a full copy."""
    old, new = "41@x:3306", "42@y:3306"
    cut = BinlogPosition("binlog.000007", 1400, "0-41-10,1-51-20", old)
    start = BinlogPosition(gtid="0-41-10,1-51-19")
    for ends in (["0-41-11,1-51-19"], ["0-41-11,1-51-19", "0-41-11,1-51-20"]):
        clock = Clock()
        source = Source(clock)
        for n, state in enumerate(ends, 1):
            made = txn(n, rows=1)
            source.items.append(made.__class__(made.changes, BinlogPosition(
                "binlog.000003", 5000 + n, state, new), n, n))
        window = ClockWindow(5)
        window.source = source
        select = Selector("c.p", source, start, 1, PipelineParams(batch_size=1000), window,
                          clock=clock, cuts=(cut,))
        with pytest.raises(PositionLostError) as caught:
            cut_all(select)
        message = str(caught.value)
        assert "holds the transactions of the GTID domains in another order" in message, \
            message
        assert "setl position set c/p --gtid 0-41-10,1-51-19 --replay" in message, message
        assert "copy the paired tables" not in message, message
