"""Rows read in a watermark window joining the stream (node.extract.reads): keys the stream
changed inside the window are left to the stream, deletes asked for come before the rows
read, and keys given as a request's JSON match the decoded rows loosely."""

from __future__ import annotations

import datetime
import decimal

from node.changes import ChangeType, RowChange
from node.extract.reads import INSIDE, ROW_BITS, Read, ReadColumn, joined, loose, mend, packed


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
        (ChangeType.DELETE, {"id": 4}),  # deletes first; key 2 is the stream's
        (ChangeType.INSERT, {"id": 1, "v": "a"}), (ChangeType.INSERT, {"id": 3, "v": "c"})]
    seqs = [seq for seq, _ in out]
    assert seqs == sorted(seqs) and seqs[0] == (4 << ROW_BITS) + INSIDE  # at the window's end


def test_request_keys_match_decoded_keys_loosely() -> None:
    assert loose([1, "2020-01-02", "abc "]) == loose([decimal.Decimal("1.0"),
                                                       datetime.date(2020, 1, 2), "ABC"])
    assert loose(["10:00:00.500"]) == loose([datetime.time(10, 0, 0, 500000)])
    assert loose([b"\x00\xff"]) == loose([b"\x00\xff"]) and loose([1]) != loose([2])


def test_a_delete_asked_with_a_padded_binary_key_is_left_to_the_stream_that_changed_it(
        ) -> None:
    """A BINARY(4) key as a request gives it (padded) and as the binlog gives it (not): the
    stream's update in the window is newer, so no delete follows it."""
    inside = (3 << ROW_BITS, RowChange("s", "t", ChangeType.UPDATE, ("id",),
                                       {"id": b"\x01\x02", "v": 0}, {"id": b"\x01\x02", "v": 9}))
    asked = mend([ReadColumn("id", "binary", "binary(4)")],  # as node.snapshot.tasks does
                 [(b"\x01\x02\x00\x00",), (b"\x03\x00",)])
    out = joined([read([], deletes=tuple(asked))], [inside])
    assert [change.before for _, change in out] == [{"id": b"\x03"}]
    assert loose([b"a\x00"]) != loose([b"a"])  # a VARBINARY's zero bytes are its own
