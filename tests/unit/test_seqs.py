"""A change's seq in its batch (node.jobs): its event's place << ROW_BITS | its row in the
event, rows read in a window between two events with READ_BIT set. The row part holds far
more rows than one event or one window can (a window of 530,000 rows — more than 2**19, the
old room — joins marked and in place), an event that would hold more stops the batch
instead of taking the next event's seqs, and a lake's _setl_seq still fits its int64."""

from __future__ import annotations

import pytest

from node.changes import ChangeType, RowChange
from node.extract import inserts, job
from node.extract.reads import INSIDE, Read, changed_keys, joined, packed
from node.jobs import EVENT_ROWS, PAST, READ_BIT, ROW_BITS, JobSpec
from node.target.delta.units import read_ipc
from shared.errors import SourceError
from tests.unit.test_etl import compiled
from tests.unit.test_lakeinserts import LOG_PAIR, TARGET, facts, part
from tests.unit.test_lakeinserts import inserts as events

BIG = (1 << 19) + 1  # rows of one window: more than the old room (the reviewer's 530,000)


def test_the_layout_keeps_an_events_rows_its_own_and_a_windows_rows_between_events() -> None:
    place = (1 << 32) - 1  # the largest place (places are uint32)
    last_row = (place << ROW_BITS) + EVENT_ROWS - 1  # the last row an event may hold
    assert INSIDE == READ_BIT == EVENT_ROWS == 1 << 31 and ROW_BITS == 32
    assert last_row >> ROW_BITS == place and not last_row & READ_BIT
    assert last_row < (place << ROW_BITS) + READ_BIT < PAST == 1 << 64
    assert EVENT_ROWS > (1 << 30)  # an event is at most 1 GiB, a row at least a byte


def window(count: int, first: int = 2, end: int = 5) -> Read:
    rows = [(n,) for n in range(count)]
    return Read(1, "s", "t", ("id",), ("id",), packed(rows), count, first=first, end=end)


def test_a_window_of_more_rows_than_two_to_the_nineteen_joins_marked_between_events(
        ) -> None:
    # at the window's start (a MySQL target): right before its first event (place 2),
    # after every row place 1's event may hold
    seqs = [seq for seq, _ in joined([window(BIG)], [], at_start=True)]
    assert len(seqs) == BIG and seqs == sorted(set(seqs))
    assert all(seq & READ_BIT for seq in seqs)
    assert (1 << ROW_BITS) + EVENT_ROWS <= seqs[0] and seqs[-1] < 2 << ROW_BITS
    # at its end: right after its last event (place 4), before place 5
    seqs = [seq for seq, _ in joined([window(3)], [])]
    assert seqs == [(4 << ROW_BITS) + READ_BIT + n for n in range(3)]


def test_a_window_too_large_to_place_says_what_helps(monkeypatch) -> None:
    """(2**31 rows cannot be made here: the room is made small for the test.)"""
    monkeypatch.setattr("node.extract.reads.INSIDE", 8)
    with pytest.raises(SourceError, match="key_columns") as caught:
        joined([window(8)], [], at_start=True)
    assert "snapshot_chunk_size, apply" not in str(caught.value)
    assert len(joined([window(7)], [], at_start=True)) == 7


class Crowded:
    """Rows decoded from an event: ``count`` of them, as its length says (only a few are
    made: more than 2**31 rows cannot be)."""

    def __init__(self, count: int, made: list) -> None:
        self.count, self.made = count, made

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
        return iter(self.made)


def crowd(module, count: int, monkeypatch) -> None:
    real = module.decode_rows
    monkeypatch.setattr(module, "decode_rows",
                        lambda *args: Crowded(count, real(*args)))


def test_an_event_of_more_rows_than_its_seqs_hold_stops_the_batch(monkeypatch) -> None:
    made = part(events(1, 2), places=(9,))
    crowd(job, EVENT_ROWS - 1, monkeypatch)
    assert [seq for seq, _ in job.decoded(made, True)] == [9 << ROW_BITS, (9 << ROW_BITS) + 1]
    crowd(job, EVENT_ROWS, monkeypatch)
    with pytest.raises(SourceError, match="binlog_row_event_max_size") as caught:
        job.decoded(made, True)
    assert "`shop`.`items` (place 9" in str(caught.value)


def test_a_lakes_rows_straight_from_a_crowded_event_stop_the_batch_too(monkeypatch) -> None:
    lake = facts(LOG_PAIR, "changelog")
    spec = JobSpec(7, True, {TARGET: lake}, target="delta", transactions=((0, "b:4", "", 0),))
    crowd(inserts, EVENT_ROWS, monkeypatch)  # (the general path decodes them as they are)
    with pytest.raises(SourceError, match="binlog_row_event_max_size"):
        job.run_part(compiled(LOG_PAIR), spec, part(events(1, 2), places=(3,)))


@pytest.mark.parametrize("straight", [True, False])
def test_a_lakes_setl_seq_fits_its_int64_at_a_transactions_last_place(
        straight: bool, monkeypatch) -> None:
    """2**31 - 1 events after its transaction's first (and a window's row after that:
    READ_BIT) a seq less the transaction's first place << ROW_BITS is below 2**63."""
    lake = facts(LOG_PAIR, "changelog")
    first = 5
    last = first + (1 << 31) - 1
    spec = JobSpec(7, True, {TARGET: lake}, target="delta",
                   transactions=((first, "b:4", "", 0),))
    if not straight:
        monkeypatch.setattr("node.extract.lakeinserts.units",
                            lambda *args: ([], frozenset(), 0))
    made = part(events(1), events(2, 3), places=(first, last))
    [unit] = job.run_part(compiled(LOG_PAIR), spec, made).units
    seqs = read_ipc(unit.data).column("_setl_seq").to_pylist()
    top = ((1 << 31) - 1) << ROW_BITS
    assert seqs == [0, top, top + 1] and top + READ_BIT < 1 << 63


def test_keys_changed_up_to_a_batchs_last_place_are_found() -> None:
    """changed_keys(to_end) looks up to PAST: a change at the largest place counts."""
    last = ((1 << 32) - 1) << ROW_BITS
    change = RowChange("s", "t", ChangeType.UPDATE, ("id",), {"id": 7}, {"id": 8})
    assert changed_keys(window(1), [(last, change)], to_end=True) >= {(7,), (8,)}
