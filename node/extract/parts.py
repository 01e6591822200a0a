"""A batch's rows events packed flat into parts (:class:`Part`), and the ways the planner
(:class:`node.extract.job.Planner`) cuts a batch into them: whole transactions in binlog
order (:func:`in_order`), or groups of tables packed into parts of about equal size
(:func:`packed`). No per-row value is made here: a part is the events' bytes joined, their
lengths, table-map numbers and places in the batch as arrays.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any, NamedTuple

from node.changes import Batch, RowChange
from node.extract.decode import TableSchema
from node.extract.reads import ROW_BITS, Read


class Part(NamedTuple):
    """Rows events of one part of a batch, packed flat (and the rows read in its windows)."""

    layouts: dict[int, TableSchema]  # by table-map number, those its events use
    events: bytes  # the events' packets, one after the other
    lengths: array  # each event's length in ``events``
    numbers: array  # each event's table-map number
    places: array  # each event's place in the batch
    # changes decoded already (tests, tools), numbered after the events
    decoded: list[tuple[int, RowChange]] = []  # noqa: RUF012 - never mutated
    reads: list[Read] = []  # noqa: RUF012 - rows read in watermark windows (node.snapshot)

    @classmethod
    def of_changes(cls, changes: list[RowChange]) -> Part:
        """A part of decoded changes only (tests, tools)."""
        return cls({}, b"", array("I"), array("I"), array("I"),
                   [(seq << ROW_BITS, change) for seq, change in enumerate(changes)])


def pack(layouts: dict[int, TableSchema], datas: list[bytes], numbers: array,
         places: array) -> Part:
    """Events as one part, with the layouts (by table-map number) of those it holds."""
    used = {number: layouts[number] for number in set(numbers)}
    return Part(used, b"".join(datas), array("I", map(len, datas)), numbers, places)


def whole(layouts: dict[int, TableSchema], transactions: Sequence[Any],
          place: int = 0) -> Part:
    """Transactions as one part, their events numbered from ``place`` on."""
    datas: list[bytes] = []
    numbers, places = array("I"), array("I")
    for txn in transactions:
        for number, data in txn.events:
            datas.append(data)
            numbers.append(number)
            places.append(place)
            place += 1
    return pack(layouts, datas, numbers, places)


def in_order(layouts: dict[int, TableSchema], batch: Batch, partitions: int) -> list[Part]:
    """Runs of whole transactions of about equal size, in binlog order (a part's changes
    are delivered as they are, one part after the other)."""
    if partitions <= 1:
        return [whole(layouts, batch.transactions)]
    sizes = [sum(len(data) for _, data in txn.events) for txn in batch.transactions]
    share = sum(sizes) / partitions
    parts: list[Part] = []
    first = place = size = 0
    for index, txn_size in enumerate(sizes):
        size += txn_size
        if size >= share * (len(parts) + 1) and len(parts) < partitions - 1:
            parts.append(whole(layouts, batch.transactions[first:index + 1], place))
            place += sum(len(t.events) for t in batch.transactions[first:index + 1])
            first = index + 1
    if first < len(batch.transactions) or not parts:
        parts.append(whole(layouts, batch.transactions[first:], place))
    return parts


def packed(layouts: dict[int, TableSchema], groups: dict[int, tuple[list[bytes], array, array]],
           partitions: int) -> list[Part]:
    """Groups (each one's events, table-map numbers and places) packed into parts of about
    equal size, biggest first."""
    by_size = sorted(groups.items(), key=lambda item: -sum(map(len, item[1][0])))
    bins: list[list[int]] = [[] for _ in range(min(partitions, max(len(by_size), 1)))]
    loads = [0] * len(bins)
    for group, (datas, _, _) in by_size:
        lightest = loads.index(min(loads))
        bins[lightest].append(group)
        loads[lightest] += sum(map(len, datas))
    parts = []
    for members in bins:
        datas, numbers, places = [], array("I"), array("I")
        for group in sorted(members, key=lambda g: groups[g][2][0]):
            datas += groups[group][0]
            numbers.extend(groups[group][1])
            places.extend(groups[group][2])
        if datas:
            parts.append(pack(layouts, datas, numbers, places))
    return parts or [pack(layouts, [], array("I"), array("I"))]
