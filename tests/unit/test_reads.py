"""Rows read in a watermark window joining the stream (node.extract.reads): keys the stream
changed inside the window are left to the stream, deletes asked for come at the window's
start (before the stream's changes inside it and the rows read), keys asked for are typed
as the decoder types their columns, and a request's keys match the decoded rows loosely for
its note."""

from __future__ import annotations

import datetime
import decimal

from node.changes import ChangeType, RowChange, TargetChange
from node.extract.reads import (
    INSIDE,
    ROW_BITS,
    Read,
    ReadColumn,
    joined,
    loose,
    mend,
    packed,
    typed,
)
from node.merge import merge


def read(rows: list[tuple], deletes: tuple = ()) -> Read:
    return Read(1, "s", "t", ("id",), ("id", "v"), packed(rows), len(rows), first=2, end=5,
                deletes=deletes)


def test_keys_changed_inside_the_window_are_left_to_the_stream() -> None:
    inside = (3 << ROW_BITS, RowChange("s", "t", ChangeType.UPDATE, ("id",), {"id": 2, "v": 0},
                                       {"id": 2, "v": 9}))
    before = (1 << ROW_BITS, RowChange("s", "t", ChangeType.UPDATE, ("id",), {"id": 1, "v": 0},
                                       {"id": 1, "v": 5}))  # before the window: older
    out = joined([read([(1, "a"), (2, "b"), (3, "c")], deletes=((2,), (4,)))],
                 [before, inside])
    assert [(change.type, change.before or change.after) for _, change in out] == [
        (ChangeType.DELETE, {"id": 2}), (ChangeType.DELETE, {"id": 4}),  # at the start
        (ChangeType.INSERT, {"id": 1, "v": "a"}), (ChangeType.INSERT, {"id": 3, "v": "c"})]
    seqs = [seq for seq, _ in out]
    assert seqs == sorted(seqs)
    assert seqs[:2] == [(2 << ROW_BITS) - 2, (2 << ROW_BITS) - 1]  # before the window's events
    assert before[0] < seqs[0] and seqs[1] < inside[0]  # so the stream's update follows them
    assert seqs[2] == (4 << ROW_BITS) + INSIDE  # the rows at the window's end


def _empty_window(first: int, deletes: tuple, rows: list[tuple]) -> Read:
    return Read(1, "s", "t", ("id",), ("id", "v"), packed(rows), len(rows), first=first,
                end=first, deletes=deletes)


def test_deletes_asked_in_a_window_without_events_come_before_the_rows_read() -> None:
    """A window with no event of its own (first == end: no replicated change between its
    watermarks) after events of the batch: its start and end are one place, and the rows
    read were put before the deletes (the delete at the window's start, the rows after the
    event before it), so a D of a row the source still has removed it after writing it.
    Deletes come first whatever the window's place, however many, and for every read of the
    window; all after the events before it."""
    for first in (0, 1, 3):
        events = [((place << ROW_BITS) + row, RowChange("s", "other", ChangeType.INSERT,
                                                         ("id",), None, {"id": place}))
                  for place in range(first) for row in range(3)]
        asked = tuple((key,) for key in range(1_000))  # a read's most (door.KEYS_PER_READ)
        reads = [_empty_window(first, asked, [(2, "source"), (7, "x")]),
                 _empty_window(first, ((5,),), [(5, "again")])]  # a second read of it
        out = joined(reads, events)
        deletes = [seq for seq, change in out if change.type is ChangeType.DELETE]
        inserts = [seq for seq, change in out if change.type is ChangeType.INSERT]
        assert len(deletes) == 1_001 and len(inserts) == 3
        assert max(deletes) < min(inserts), first
        assert all(seq < min(deletes) for seq, _ in events), first


def test_a_row_asked_deleted_that_the_source_has_is_written_after_its_delete() -> None:
    """What the merge makes of it: the delete, then the source's row (an upsert); the row
    read before its delete merged to nothing, and the target kept its stale row."""
    event = (0, RowChange("s", "other", ChangeType.INSERT, ("id",), None, {"id": 1}))
    out = joined([_empty_window(1, ((2,),), [(2, "source")])], [event])
    changes = [TargetChange("db", "s", "t", change.type, ("id",),
                            (2,) if change.type is ChangeType.DELETE else None, change.after,
                            seq=seq) for seq, change in out]
    writes = merge(changes)
    assert [(write.deletes, write.upserts) for write in writes] == [
        ([], [{"id": 2, "v": "source"}])]


def test_request_keys_match_decoded_keys_loosely() -> None:
    assert loose([1, "2020-01-02", "abc "]) == loose([decimal.Decimal("1.0"),
                                                       datetime.date(2020, 1, 2), "ABC"])
    assert loose(["10:00:00.500"]) == loose([datetime.time(10, 0, 0, 500000)])
    assert loose([b"\x00\xff"]) == loose([b"\x00\xff"]) and loose([1]) != loose([2])


def test_a_delete_asked_with_a_padded_binary_key_comes_before_the_streams_change_of_it(
        ) -> None:
    """A BINARY(4) key as a request gives it (padded) and as the binlog gives it (not): the
    delete goes first, by the key as the binlog gives it, and the stream's update follows."""
    inside = (3 << ROW_BITS, RowChange("s", "t", ChangeType.UPDATE, ("id",),
                                       {"id": b"\x01\x02", "v": 0}, {"id": b"\x01\x02", "v": 9}))
    asked = mend([ReadColumn("id", "binary", "binary(4)")],  # as node.snapshot.tasks does
                 [(b"\x01\x02\x00\x00",), (b"\x03\x00",)])
    out = joined([read([], deletes=tuple(asked))], [inside])
    assert [change.before for _, change in out] == [{"id": b"\x01\x02"}, {"id": b"\x03"}]
    assert all(seq < inside[0] for seq, _ in out)
    assert loose([b"a\x00"]) != loose([b"a"])  # a VARBINARY's zero bytes are its own


def test_a_delete_asked_is_never_matched_to_another_key_the_stream_changed() -> None:
    """'007' and '7' are two rows of a VARCHAR key (the loose match of a request's note takes
    them for one): the delete of '007' is not skipped because the stream changed '7'. And 'e'
    asked deleted while the stream inserts 'é' (one key to utf8mb4_unicode_ci): the delete
    comes first, so the target's collation cannot make it remove the row the stream wrote."""
    changes = [(3 << ROW_BITS, RowChange("s", "t", ChangeType.UPDATE, ("id",),
                                         {"id": "7", "v": 0}, {"id": "7", "v": 1})),
               (4 << ROW_BITS, RowChange("s", "t", ChangeType.INSERT, ("id",), None,
                                         {"id": "é", "v": 2}))]
    out = joined([read([], deletes=(("007",), ("e",)))], changes)
    assert [change.before for _, change in out] == [{"id": "007"}, {"id": "e"}]
    assert max(seq for seq, _ in out) < min(seq for seq, _ in changes)


def test_keys_asked_are_typed_as_the_decoder_types_their_columns() -> None:
    columns = [ReadColumn("i", "int"), ReadColumn("d", "decimal"), ReadColumn("day", "date"),
               ReadColumn("at", "datetime"), ReadColumn("t", "time"),
               ReadColumn("s", "varchar"), ReadColumn("b", "varbinary")]
    assert typed(columns, [("007", "1.50", "2020-01-02", "2020-01-02 03:04:05.5", "-26:00:01.25",
                            7, b"\x00")]) == ((
        7, decimal.Decimal("1.50"), datetime.date(2020, 1, 2),
        datetime.datetime(2020, 1, 2, 3, 4, 5, 500000),
        -datetime.timedelta(hours=26, seconds=1, microseconds=250000), "7", b"\x00"),)
    # what does not convert stays as given: a zero date, text for a number, a fraction
    assert typed(columns[:3], [("abc", "x", "0000-00-00")]) == (("abc", "x", "0000-00-00"),)
    assert typed(columns[:1], [("7.5",)]) == (("7.5",),)
    assert typed([ReadColumn("c", "char")], [("ab  ",)]) == (("ab",),)


def test_a_zero_timestamp_with_a_fraction_is_read_as_the_decoder_gives_it() -> None:
    """The server sends the zero TIMESTAMP(6) as '0000-00-00 00:00:00.000000', the decoder
    gives '0000-00-00 00:00:00': read rows take the decoder's form, so the stream's update
    of that key inside the window drops the (older) row read."""
    columns = [ReadColumn("id", "timestamp", "timestamp(6)"), ReadColumn("v", "int", "int(11)")]
    rows = mend(columns, [("0000-00-00 00:00:00.000000", 1),
                          (datetime.datetime(2020, 1, 2, 3, 4, 5, 6), 2)])
    assert rows == [("0000-00-00 00:00:00", 1), (datetime.datetime(2020, 1, 2, 3, 4, 5, 6), 2)]
    zero = {"id": "0000-00-00 00:00:00", "v": 1}
    inside = (3 << ROW_BITS, RowChange("s", "t", ChangeType.UPDATE, ("id",), zero,
                                       {**zero, "v": 9}))
    out = joined([read(rows)], [inside])
    assert [change.after["id"] for _, change in out] == [datetime.datetime(2020, 1, 2, 3, 4, 5, 6)]


def test_an_empty_text_of_a_charset_read_as_bytes_is_read_as_the_decoder_gives_it() -> None:
    """An sjis column is read as its bytes (Python does not read the charset exactly), and
    the decoder gives its empty value as '', not b'': a read row keyed by '' was not the key
    the stream updated inside the window, so the older row read went in after the update."""
    columns = [ReadColumn("id", "varchar", "varchar(10)", "sjis"),
               ReadColumn("v", "int", "int(11)")]
    rows = mend(columns, [(b"", 1), (b"\x83\x41", 2)])
    assert rows == [("", 1), (b"\x83\x41", 2)]
    inside = (3 << ROW_BITS, RowChange("s", "t", ChangeType.UPDATE, ("id",), {"id": "", "v": 1},
                                       {"id": "", "v": 9}))
    out = joined([read(rows)], [inside])
    assert [change.after["id"] for _, change in out] == [b"\x83\x41"]


def test_for_a_mysql_target_the_rows_go_at_the_windows_start_after_its_deletes() -> None:
    """A parent the stream deletes inside the window, after the read, took the child rows
    read with it on the source (a cascade: not in the binlog). At the window's start, the
    rows come before that delete, and the target's own foreign key takes them too."""
    parent_gone = (3 << ROW_BITS, RowChange("s", "parent", ChangeType.DELETE, ("id",),
                                            {"id": 7}, None))
    out = joined([read([(1, "a"), (3, "c")], deletes=((4,),))], [parent_gone], at_start=True)
    assert [(change.type, change.before or change.after) for _, change in out] == [
        (ChangeType.DELETE, {"id": 4}), (ChangeType.INSERT, {"id": 1, "v": "a"}),
        (ChangeType.INSERT, {"id": 3, "v": "c"})]
    seqs = [seq for seq, _ in out]
    assert seqs == [(2 << ROW_BITS) - 3, (2 << ROW_BITS) - 2, (2 << ROW_BITS) - 1]
    assert all(seq & INSIDE for seq in seqs) and seqs[-1] < parent_gone[0]


def test_a_quiet_windows_rows_and_deletes_for_a_mysql_target_are_marked_read() -> None:
    """A window with no event of its own (first == end) after events of the batch: its
    rows and deletes at its start go after the event before it and before the next, every
    place with INSIDE set — Load writes them unchecked (foreign_key_checks = 0). Placed from
    the window's end they lost the mark, and a child read before its parent was refused."""
    for first in (1, 3):
        before = ((first - 1) << ROW_BITS, RowChange("s", "other", ChangeType.INSERT, ("id",),
                                                     None, {"id": 0}))
        out = joined([_empty_window(first, ((4,),), [(1, "a"), (3, "c")])], [before],
                     at_start=True)
        seqs = [seq for seq, _ in out]
        assert [change.type for _, change in out] == [ChangeType.DELETE, ChangeType.INSERT,
                                                     ChangeType.INSERT]
        assert seqs == sorted(seqs) and before[0] < seqs[0] and seqs[-1] < first << ROW_BITS
        assert all(seq & INSIDE for seq in seqs), [hex(seq) for seq in seqs]
