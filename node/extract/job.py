"""A batch's Extract/Transform as one job: planned in the node, run where Spark puts it.

The node plans (:class:`Planner`): it splits the batch's rows events into parts so that
every change of one target table lands in one part, in source order — rows events of
source tables that share a target table go together, and so do all tables linked by
foreign keys on the target (their statements must interleave in source order) — and packs
each part into a few flat values (the events' bytes joined, their lengths, table-map
numbers and places in the batch as arrays). No per-row value is made in the node.

A part runs :func:`run_part`: decode the rows (:mod:`node.extract.decode`), the Extract
chain and Transform (:mod:`node.extract.etl`), merge per target key
(:mod:`node.extract.merge`) and render the statements as SQL text
(:mod:`node.extract.render`, :mod:`node.extract.sqltext`). What comes back is a handful of
statement texts per target table (:class:`Unit`); Load orders the units of all parts by
``push_weight`` and first change, as one merge of the whole batch would have.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from node.changes import Batch, ChangeType, RowChange, TargetChange
from node.extract import copylines, inserts, loaddata
from node.extract.decode import TableSchema, decode_rows
from node.extract.etl import CompiledPipeline, extract_transform_lists
from node.extract.facts import TableFacts, Target, TargetFacts
from node.extract.merge import TableWrites, merge
from node.extract.reads import ROW_BITS, Read, ReadColumn, changed_keys, joined
from node.extract.render import BIG_VALUE, statements
from node.extract.sqltext import Sql, texts
from shared.errors import SetlError
from shared.model import PipelineParams

_KINDS = {23: ChangeType.INSERT, 24: ChangeType.UPDATE, 25: ChangeType.DELETE,
          30: ChangeType.INSERT, 31: ChangeType.UPDATE, 32: ChangeType.DELETE,
          166: ChangeType.INSERT, 167: ChangeType.UPDATE, 168: ChangeType.DELETE,
          169: ChangeType.INSERT, 170: ChangeType.UPDATE, 171: ChangeType.DELETE}
ORDERED = 0  # the group of tables linked by foreign keys on the target
_CHANGE = tuple.__new__


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


@dataclass(frozen=True)
class JobSpec:
    """What every part of one batch's job shares."""

    process_id: int
    checksum: bool  # the source's events end with a CRC32
    facts: dict[Target, TableFacts] = field(default_factory=dict)
    load_batch_size: int = 1000
    # a merged table's upserts go as LOAD DATA … REPLACE from this many rows on (0: never)
    load_data_min_rows: int = 0
    one_by_one: bool = False  # one statement a row (skip_load_exception's second try)
    changes_only: bool = False  # the target changes come back unrendered (two-way: Load
    # checks conflicts against the target's rows first)


class Unit(NamedTuple):
    """The statements of one target table (or of one run of an ordered table)."""

    datasource: str
    schema: str
    table: str
    push_weight: int
    first_seq: int
    sqls: list[Sql]
    rows: int
    keys: tuple[str, ...] = ()  # the columns its rows are keyed by (for messages)
    apart: bool = False  # snapshot lines: loaded after the batch's transaction (node.load.copies)


class PartResult(NamedTuple):
    units: list[Unit]
    changes: list[TargetChange]  # changes_only: the target changes themselves
    rows: int  # source row changes decoded
    sizes: dict[int, tuple[int, int]] = {}  # noqa: RUF012 - by table-map number: (row
    # changes, bytes of their events), for Select's estimate of a batch's rows
    # by a lines read's place: the key tokens the stream changed inside its window
    dropped: dict[tuple[int, str], frozenset[bytes]] = {}  # noqa: RUF012 - never mutated


def decoded(part: Part, checksum: bool, sizes: dict[int, list[int]] | None = None,
            skip: frozenset[int] = frozenset()) -> list[tuple[int, RowChange]]:
    """The part's row changes, numbered by their place in the batch; ``sizes`` gets
    [row changes, event bytes] by table-map number. Events of the table-map numbers in
    ``skip`` are left out (:mod:`node.extract.inserts` took them)."""
    out: list[tuple[int, RowChange]] = []
    append, events, layouts, at = out.append, part.events, part.layouts, 0
    sizes = {} if sizes is None else sizes
    for length, number, place in zip(part.lengths, part.numbers, part.places, strict=True):
        if skip and number in skip:
            at += length
            continue
        data = events[at:at + length]
        at += length
        layout = layouts[number]
        kind = _KINDS[data[5]]
        ts = int.from_bytes(data[1:5], "little") * 1000
        base = place << ROW_BITS
        schema, table, keys = layout.schema, layout.table, layout.primary_key
        images = decode_rows(layout, data, checksum)
        for row, (before, after) in enumerate(images):  # tuple.__new__: no per-row __new__
            append((base + row, _CHANGE(RowChange, (schema, table, kind, keys, before, after,
                                                    "", ts, ()))))
        size = sizes.get(number)
        if size is None:
            size = sizes[number] = [0, 0]
        size[0] += len(images)
        size[1] += length
    out.extend(part.decoded)
    return out


def run_part(compiled: CompiledPipeline, spec: JobSpec, part: Part) -> PartResult:
    """Decode, Extract/Transform, merge and render one part (in a Spark worker, or in the
    node for a small batch)."""
    counted: dict[int, list[int]] = {}
    as_rows = [read for read in part.reads if read.lines is None]
    # a value over render.BIG_VALUE needs statements of its own; only an event that large, a
    # lookup (free door) or a transform that makes values can bring one
    big = bool(part.decoded) or bool(as_rows) or \
        not all(entry.simple for entry in compiled.pairs) or \
        max(part.lengths, default=0) > BIG_VALUE // 4
    straight: list[Unit] = []
    taken, straight_rows = frozenset[int](), 0
    if not (big or part.reads or spec.one_by_one or spec.changes_only) and \
            spec.load_data_min_rows:  # runs of inserts go straight to LOAD DATA lines
        straight, taken, straight_rows = inserts.units(compiled, spec, part, counted)
    numbered = decoded(part, spec.checksum, counted, taken)
    if as_rows:
        numbered += joined(as_rows, numbered)
    # a lines read comes without its lines (they stay in the node, and load after the
    # batch's transaction): what the part finds is which keys the batch writes from its
    # window's low watermark on (the stream's changes, rows read for the free door)
    dropped = {read.place: copylines.tokens(read, changed_keys(read, numbered, to_end=True))
               for read in part.reads if read.lines is not None}
    sizes = {number: (rows, size) for number, (rows, size) in counted.items()}
    changes = extract_transform_lists(compiled, numbered)
    if spec.changes_only:
        if dropped:  # never planned for a two-way pipeline (copylines.plan)
            raise SetlError("a two-way pipeline's snapshot read lines")
        return PartResult([], changes, len(numbered), sizes)
    # (rows read in windows are never written by a replay: a replayed batch's windows are
    # gone with the attempt that opened them)
    return PartResult(render(changes, spec, big) + straight, [],
                      len(numbered) + straight_rows, sizes, dropped)


def render(changes: list[TargetChange], spec: JobSpec, big: bool = True) -> list[Unit]:
    """Merged and rendered statements of the changes, a unit per table (or run)."""
    facts = spec.facts
    size = 1 if spec.one_by_one else spec.load_batch_size
    units = []

    def ordered(name: Target, keys: tuple[str, ...]) -> bool:
        return facts.get(name, _NO_FACTS).ordered(keys)

    for writes in merge(changes, ordered):
        name = (writes.datasource, writes.schema, writes.table)
        table = facts.get(name, _NO_FACTS)
        sqls = _replaced(writes, table, spec) if not big else None
        if sqls is None:
            sqls = [sql for statement in statements(writes, size, table.columns, big)
                    for sql in texts(statement, keep_what=spec.one_by_one)]
        units.append(Unit(*name, writes.push_weight, writes.first_seq, sqls, writes.rows,
                          writes.keys))
    return units


def _replaced(writes: TableWrites, table: TableFacts, spec: JobSpec) -> list[Sql] | None:
    """A merged table's deletes, then its upserts as LOAD DATA … REPLACE (see
    :mod:`node.extract.loaddata`); None where they go as INSERTs."""
    if spec.one_by_one or not spec.load_data_min_rows or writes.steps or writes.changes or \
            len(writes.upserts) < spec.load_data_min_rows:
        return None
    replaced = loaddata.replaces(writes.schema, writes.table, writes.upserts, table.columns,
                                 table.triggers)
    if replaced is None:
        return None
    deletes = dataclasses.replace(writes, upserts=[])
    return [sql for statement in statements(deletes, spec.load_batch_size, table.columns)
            for sql in texts(statement)] + replaced


_NO_FACTS = TableFacts()


def with_lines(results: list[PartResult], reads: Sequence[Read]) -> list[PartResult]:
    """The results with the lines reads' units (made here, in the node) in front: their
    lines never went to a part, only their windows' places did."""
    lines = [read for read in reads if read.lines is not None]
    if not lines:
        return results
    dropped = {place: tokens for result in results for place, tokens in result.dropped.items()}
    units = copylines.units(lines, lambda read: dropped.get(read.place, frozenset()))
    return [PartResult(units, [], sum(read.count for read in lines)), *results]


def in_order(results: Iterable[PartResult]) -> list[Unit]:
    """The units of every part as one merge of the whole batch orders them."""
    units = [unit for result in results
             for unit in result.units]
    return sorted(units, key=lambda unit: (unit.push_weight, unit.first_seq))


class Planner:
    """Cuts batches into parts (in the node's Select thread)."""

    def __init__(self, compiled: CompiledPipeline, layouts: dict[int, TableSchema],
                 facts: TargetFacts, checksum: Callable[[], bool], params: PipelineParams,
                 learn: Callable[[dict[int, tuple[int, int]]], None] = lambda sizes: None
                 ) -> None:
        self.compiled, self.layouts, self.facts = compiled, layouts, facts
        self.checksum, self.params = checksum, params
        self.learn = learn  # Select's: the row changes and bytes of each table's events
        self._group: dict[tuple[str, str], int] = {}  # source table → group
        self._owner: dict[Target, int] = {}  # target table → group
        self._parent: dict[int, int] = {}
        self._targets: dict[tuple[str, str], list[Target]] = {}

    def forget(self) -> None:
        """After a DDL: tables may have new keys, columns and foreign keys."""
        self._group.clear()
        self._owner.clear()
        self._parent.clear()
        self.facts.forget()

    def lines_plan(self, schema: str, table: str, columns: Sequence[ReadColumn],
                   keys: Sequence[str]) -> copylines.LinesPlan | None:
        """How a snapshot reads a table's chunks as LOAD DATA lines; None: as rows."""
        if not self.params.load_data_min_rows:  # the user keeps LOAD DATA off
            return None
        return copylines.plan(self.compiled, self.facts.of, schema, table, columns, keys)

    def spec(self, batch: Batch, parts: list[Part], **options: Any) -> JobSpec:
        facts: dict[Target, TableFacts] = {}
        for name in self._tables(parts):
            for target in self._targets_of(name):
                if target not in facts:
                    facts[target] = self.facts.of(target)
        return JobSpec(batch.process_id, self.checksum(), facts, self.params.load_batch_size,
                       self.params.load_data_min_rows, **options)

    def parts(self, batch: Batch, partitions: int,
              reads: list[Read] = ()) -> list[Part]:  # type: ignore[assignment]
        """The batch's events (and the rows read in its watermark windows) cut into at most
        ``partitions`` parts."""
        made = self._parts(batch, partitions)
        if reads:
            windows = {window: (first, end) for window, first, end in batch.windows}
            for read in reads:
                first, end = windows[read.window]
                group = self._find(self._table_group((read.schema, read.table)))
                index = next((i for i, part in enumerate(made)
                              if any(self._find(self._group_of(n)) == group
                                     for n in set(part.numbers))),
                             0)
                # a lines read goes without its lines: they stay here (with_lines)
                made[index] = made[index]._replace(reads=[*made[index].reads, read._replace(
                    first=first, end=end, rows=b"" if read.lines else read.rows)])
        return made

    def _parts(self, batch: Batch, partitions: int) -> list[Part]:
        place = 0
        if partitions <= 1:
            datas: list[bytes] = []
            numbers, places = array("I"), array("I")
            for txn in batch.transactions:
                for number, data in txn.events:
                    datas.append(data)
                    numbers.append(number)
                    places.append(place)
                    place += 1
            return [self._pack(datas, numbers, places)]
        groups: dict[int, tuple[list[bytes], array, array]] = {}
        memo: dict[int, int] = {}
        for txn in batch.transactions:
            for number, data in txn.events:
                group = memo.get(number)
                if group is None:
                    group = memo[number] = self._find(self._group_of(number))
                found = groups.get(group)
                if found is None:
                    found = groups[group] = ([], array("I"), array("I"))
                found[0].append(data)
                found[1].append(number)
                found[2].append(place)
                place += 1
        return self._packed(groups, partitions)

    def _packed(self, groups: dict[int, tuple[list[bytes], array, array]],
                partitions: int) -> list[Part]:
        """Groups packed into parts of about equal size, biggest first."""
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
                parts.append(self._pack(datas, numbers, places))
        return parts or [self._pack([], array("I"), array("I"))]

    def _pack(self, datas: list[bytes], numbers: array, places: array) -> Part:
        layouts = {number: self.layouts[number] for number in set(numbers)}
        return Part(layouts, b"".join(datas), array("I", map(len, datas)), numbers, places)

    def _tables(self, parts: list[Part]) -> set[tuple[str, str]]:
        names = {(layout.schema, layout.table) for part in parts
                 for layout in part.layouts.values()}
        names |= {(read.schema, read.table) for part in parts for read in part.reads}
        return names

    def _targets_of(self, name: tuple[str, str]) -> list[Target]:
        found = self._targets.get(name)
        if found is None:
            found = self._targets[name] = self.compiled.targets_of(*name)
        return found

    def _group_of(self, number: int) -> int:
        layout = self.layouts[number]
        return self._table_group((layout.schema, layout.table))

    def _table_group(self, name: tuple[str, str]) -> int:
        group = self._group.get(name)
        if group is not None:
            return group
        targets = self._targets_of(name)
        if any(self.facts.of(target).foreign_keys for target in targets):
            group = ORDERED
        else:
            joined = {self._find(self._owner[t]) for t in targets if t in self._owner}
            group = min(joined) if joined else len(self._parent) + 1
            self._parent.setdefault(group, group)
            for other in joined:
                self._parent[other] = group
        for target in targets:
            self._owner.setdefault(target, group)
        self._group[name] = group
        return group

    def _find(self, group: int) -> int:
        while self._parent.get(group, group) != group:
            group = self._parent[group]
        return group

