"""A batch's Extract/Transform as one job: planned in the node, run where Spark puts it.

The node plans (:class:`Planner`): it splits the batch's rows events into parts so that
every change of one target table lands in one part, in source order — rows events of
source tables that share a target table go together, and so do all tables linked by
foreign keys on the target (their statements must interleave in source order) — and packs
each part into a few flat values (the events' bytes joined, their lengths, table-map
numbers and places in the batch as arrays: :mod:`node.extract.parts`). No per-row value is
made in the node.

A part runs :func:`run_part`: decode the rows (:mod:`node.extract.decode`), the Extract
chain and Transform (:mod:`node.extract.etl`), merge per target key
(:mod:`node.merge`) and render the statements as SQL text
(:mod:`node.target.mysql.render`, :mod:`node.target.mysql.sqltext`). What comes back is a handful of
statement texts per target table (:class:`Unit`); Load orders the units of all parts by
``push_weight`` and first change, as one merge of the whole batch would have.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
from array import array
from collections.abc import Callable, Sequence
from typing import Any

from node.changes import Batch, ChangeType, RowChange
from node.extract import copylines, inserts, lakeinserts, reach
from node.extract.decode import TableSchema, decode_rows
from node.extract.etl import CompiledPipeline, extract_transform_lists
from node.extract.keycheck import KeyCollations, read_source_columns
from node.extract.parts import Part, in_order, packed, whole
from node.extract.reads import ROW_BITS, Read, ReadColumn, changed_keys, joined
from node.jobs import EVENT_ROWS, JobSpec, PartResult, Unit, crowded, unchecked_places
from node.target.mysql.facts import Target, TargetFacts
from node.target.mysql.pieces import BIG_VALUE, room
from node.target.renderers import render
from shared.errors import ConfigError, SetlError
from shared.model import TWO_WAY_COPY, PipelineParams

_KINDS = {23: ChangeType.INSERT, 24: ChangeType.UPDATE, 25: ChangeType.DELETE,
          30: ChangeType.INSERT, 31: ChangeType.UPDATE, 32: ChangeType.DELETE,
          166: ChangeType.INSERT, 167: ChangeType.UPDATE, 168: ChangeType.DELETE,
          169: ChangeType.INSERT, 170: ChangeType.UPDATE, 171: ChangeType.DELETE}
ORDERED = 0  # the group of tables linked by foreign keys on the target
_CHANGE = tuple.__new__


def decoded(part: Part, checksum: bool, sizes: dict[int, list[int]] | None = None,
            skip: frozenset[int] = frozenset()) -> list[tuple[int, RowChange]]:
    """The part's row changes, numbered by their place in the batch; ``sizes`` gets
    [row changes, event bytes] by table-map number. Events of the table-map numbers in
    ``skip`` are left out (:mod:`node.extract.inserts` took them)."""
    out: list[tuple[int, RowChange]] = []
    append, events, at = out.append, part.events, 0
    sizes = {} if sizes is None else sizes
    # per table-map number, what each of its events needs: most events of an OLTP part
    # hold one row, so what is the same for all of them is looked up once
    tables: dict[int, tuple[TableSchema, str, str, tuple[str, ...], int, list[int]]] = {}
    for length, number, place in zip(part.lengths, part.numbers, part.places, strict=True):
        if skip and number in skip:
            at += length
            continue
        data = events[at:at + length]
        at += length
        table_of = tables.get(number)
        if table_of is None:
            layout = part.layouts[number]
            size = sizes.get(number)
            if size is None:
                size = sizes[number] = [0, 0]
            table_of = tables[number] = (layout, layout.schema, layout.table,
                                         layout.primary_key, layout.event_head(), size)
        layout, schema, table, keys, head, size = table_of
        kind = _KINDS[data[5]]
        ts = int.from_bytes(data[1:5], "little") * 1000
        base = place << ROW_BITS
        images = decode_rows(layout, data, checksum)
        count = len(images)
        if count >= EVENT_ROWS:  # (once an event: its rows' seqs stay its own)
            raise crowded(schema, table, place, count)
        if count == 1:  # an OLTP statement's event: its one row
            before, after = images[0]
            append((base, _CHANGE(RowChange, (schema, table, kind, keys, before, after,
                                              "", ts, ()))))
        else:
            for row, (before, after) in enumerate(images):  # tuple.__new__: no __new__ a row
                append((base + row, _CHANGE(RowChange, (schema, table, kind, keys, before,
                                                        after, "", ts, ()))))
        size[0] += count
        size[1] += length - head
    out.extend(part.decoded)
    return out


def run_part(compiled: CompiledPipeline, spec: JobSpec, part: Part) -> PartResult:
    """Decode, Extract/Transform, merge and render one part (in a Spark worker, or in the
    node for a small batch), with the cycle collector held off meanwhile.

    A part makes a few tracked objects per row (the row changes, their images, the target
    changes) that all live until it ends: the collector's passes over them found nothing to
    free and cost ~10% of an OLTP part's CPU (more as a part grows: each pass walks what the
    part made so far). Refcounting frees them as ever; the collector is turned back on when
    the part ends (only if it was on: nothing else turns it off). Only on a process's main
    thread, a Spark worker's: in the node's threads, parts back to back would hold the
    daemon's collector off nearly all the time (a review)."""
    if not gc.isenabled() or threading.current_thread() is not threading.main_thread():
        return _run_part(compiled, spec, part)
    gc.disable()
    try:
        return _run_part(compiled, spec, part)
    finally:
        gc.enable()


def _run_part(compiled: CompiledPipeline, spec: JobSpec, part: Part) -> PartResult:
    counted: dict[int, list[int]] = {}
    as_rows = [read for read in part.reads if read.lines is None]
    # a value over pieces.BIG_VALUE, or a row too large for a statement under the target's
    # max_allowed_packet, needs statements of its own; only an event that large (a row's
    # text takes up to 4 bytes for each of its bytes), a lookup (free door) or a transform
    # that makes values can bring one
    big = bool(part.decoded) or bool(as_rows) or \
        not all(entry.simple for entry in compiled.pairs) or \
        max(part.lengths, default=0) > _small(spec) // 4
    straight: list[Unit] = []
    taken, straight_rows = frozenset[int](), 0
    straightway = not (big or part.reads or spec.one_by_one or spec.changes_only)
    if straightway and spec.target == "delta":  # runs of inserts go straight to Arrow rows
        straight, taken, straight_rows = lakeinserts.units(compiled, spec, part, counted)
    elif straightway and spec.load_data_min_rows:  # … or to LOAD DATA lines
        straight, taken, straight_rows = inserts.units(compiled, spec, part, counted)
    numbered = decoded(part, spec.checksum, counted, taken)
    if as_rows:
        numbered += joined(as_rows, numbered, at_start=spec.target == "mysql")
    # a lines read comes without its lines (they stay in the node, and load after the
    # batch's transaction): what the part finds is which keys the batch writes from its
    # window's low watermark on (the stream's changes, rows read for the free door)
    dropped = {read.place: copylines.tokens(read, changed_keys(read, numbered, to_end=True))
               for read in part.reads if read.lines is not None}
    sizes = {number: (rows, size) for number, (rows, size) in counted.items()}
    changes = extract_transform_lists(compiled, numbered)
    off = unchecked_places(part.events, part.lengths, part.places)
    if off or as_rows:  # foreign_key_checks off: the source's for its events, and the rows
        # read (node.merge); rows read are also looked at for other keys' rows they meet
        spec = dataclasses.replace(spec, unchecked=frozenset(off), reads=bool(as_rows))
    elif spec.reads:  # a part of the stream alone: no change to look at for that
        spec = dataclasses.replace(spec, reads=False)
    if spec.changes_only:
        if dropped:  # never planned for a two-way pipeline (copylines.plan)
            raise SetlError("a two-way pipeline's snapshot read lines")
        return PartResult([], changes, len(numbered), sizes)
    # (rows read in windows are never written by a replay: a replayed batch's windows are
    # gone with the attempt that opened them)
    return PartResult(render(changes, spec, big) + straight, [],
                      len(numbered) + straight_rows, sizes, dropped)


def _small(spec: JobSpec) -> int:
    """The bytes of values any statement to the part's targets may carry (see
    :func:`pieces.room`), at most BIG_VALUE."""
    small = BIG_VALUE
    for facts in spec.facts.values():
        packet = getattr(facts, "packet", 0)
        if packet:
            small = min(small, room(packet))
    return small


def transactions(batch: Batch) -> tuple[tuple[int, str, str, int], ...]:
    """Each transaction of the batch with changes: the place of its first event (as
    :meth:`Planner.parts` numbers them), its end position, GTID and commit time."""
    found, place = [], 0
    for txn in batch.transactions:
        found.append((place, f"{txn.end.file}:{txn.end.pos}", txn.end.gtid, txn.commit_ts_ms))
        place += len(txn.events)
    if not found:  # none with changes (a watermark window on a quiet source): the rows read
        end = batch.end  # in it are the source's as of the batch's end, its high watermark
        found.append((0, f"{end.file}:{end.pos}", end.gtid, batch.commit_ts_ms))
    return tuple(found)


def with_lines(results: list[PartResult], reads: Sequence[Read]) -> list[PartResult]:
    """The results with the lines reads' units (made here, in the node) in front: their
    lines never went to a part, only their windows' places did."""
    lines = [read for read in reads if read.lines is not None]
    if not lines:
        return results
    dropped = {place: tokens for result in results for place, tokens in result.dropped.items()}
    units = copylines.units(lines, lambda read: dropped.get(read.place, frozenset()))
    return [PartResult(units, [], sum(read.count for read in lines)), *results]


class Planner:
    """Cuts batches into parts (in the node's Select thread)."""

    def __init__(self, compiled: CompiledPipeline, layouts: dict[int, TableSchema],
                 facts: TargetFacts, checksum: Callable[[], bool], params: PipelineParams,
                 learn: Callable[[dict[int, tuple[int, int]]], None] = lambda sizes: None,
                 target: str = "mysql",
                 source_columns: Callable[[str, str], dict[str, tuple[str, str | None]]]
                 | None = None) -> None:
        self.compiled, self.layouts, self.facts = compiled, layouts, facts
        self.keys = KeyCollations(compiled, facts, source_columns or (
            lambda schema, table: read_source_columns(compiled.source, schema, table)))
        self.checksum, self.params = checksum, params
        self.learn = learn  # Select's: the row changes and bytes of each table's events
        self.target = target  # the kind of target the workers render for
        self._group: dict[tuple[str, str], int] = {}  # source table → group
        self._owner: dict[Target, int] = {}  # target table → group
        self._parent: dict[int, int] = {}
        self._targets: dict[tuple[str, str], list[Target]] = {}
        self._gathered: dict[tuple[str, str], bool] = {}  # source table → gathered(table)
        self._parted: dict[tuple[str, str], bool] = {}  # source table → reach.parted

    def forget(self) -> None:
        """After a DDL: tables may have new keys, columns and foreign keys."""
        self._group.clear()
        self._owner.clear()
        self._parent.clear()
        self.keys.forget()
        self.facts.forget()

    def lines_plan(self, schema: str, table: str, columns: Sequence[ReadColumn],
                   keys: Sequence[str]) -> copylines.LinesPlan | None:
        """How a snapshot reads a table's chunks as LOAD DATA lines; None: as rows."""
        if not self.params.load_data_min_rows or self.target != "mysql":  # LOAD DATA off,
            return None  # or a target that takes no LOAD DATA (a lake)
        plan = copylines.plan(self.compiled, self.facts_of, schema, table, columns, keys)
        if plan is not None:  # checked before the copy reads a row
            self.keys.check((schema, table), plan.target, self.facts_of(plan.target),
                            tuple(keys))
        return plan

    def facts_of(self, target: Target, layout: Any = None) -> Any:
        """A target table's facts. A MySQL table stops the pipeline when its engine does not
        roll back, unless ``write_non_transactional`` (exactly-once rests on the batch's
        transaction), and when it has triggers, unless ``fire_target_triggers``: each would
        fire for every row written (native row replication fires none), and the rows a
        source trigger wrote come in the binlog."""
        found = self.facts.of(target, layout)
        if self.target != "mysql":
            return found
        if not found.transactional and not self.params.write_non_transactional:
            raise ConfigError(
                f"pipeline {self.compiled.pipeline_id}: target table {target[1]}.{target[2]} "
                f"on {target[0]} is {found.engine}, whose writes do not roll back: a reader "
                "would see a batch's rows before its position commits, and a crash would "
                "write them again (a keyless table's twice), so neither exactly-once nor "
                "whole transactions would hold. Convert it (ALTER TABLE "
                f"{target[1]}.{target[2]} ENGINE=InnoDB), or set 'write_non_transactional: "
                "true' on the pipeline to write it without those guarantees; then resume the "
                "channel")
        names = found.trigger_names
        if names and not self.params.fire_target_triggers:
            raise ConfigError(
                f"pipeline {self.compiled.pipeline_id}: target table {target[1]}.{target[2]} "
                f"on {target[0]} has trigger{'s' if len(names) > 1 else ''} "
                f"{', '.join(names)}, which would fire for every row setl writes (native row "
                "replication fires none): the rows a source trigger wrote come in the binlog "
                "already, so they would be written twice, or differ. Drop the triggers on the "
                "target (DROP TRIGGER; a schema copied with mysqldump brings them), or, where "
                "each writes nothing setl replicates, set 'fire_target_triggers: true' on the "
                "pipeline and apply it; then resume the channel")
        return found

    def spec(self, batch: Batch, parts: list[Part],
             copying: Callable[[str, str], bool] | None = None, **options: Any) -> JobSpec:
        """What the batch's parts share; ``copying``: whether a source table's copy is
        unfinished (:meth:`node.snapshot.controller.Snapshots.copying`)."""
        facts: dict[Target, Any] = {}
        layouts = {(layout.schema, layout.table): layout for part in parts
                   for layout in part.layouts.values()}
        for name in self._tables(parts):
            for target in self._targets_of(name):
                if target not in facts:
                    facts[target] = self.facts_of(target, layouts.get(name))
                if self.target == "mysql":
                    layout = layouts.get(name)
                    self.keys.check(name, target, facts[target],
                                    getattr(layout, "primary_key", ()) or ())
        if self.target != "mysql":  # a lake's changelog tells each change's transaction
            options.setdefault("transactions", transactions(batch))
        options.setdefault("gathered", frozenset(
            target for name in self._tables(parts) if self._gathers(name)
            for target in self._targets_of(name)))
        options.setdefault("copying", frozenset(  # (copying: of the source tables)
            target for name in self._tables(parts) if copying is not None and
            self.target == "mysql" and copying(*name)
            for target in self._targets_of(name)))
        options.setdefault("parted", frozenset(
            target for name in self._tables(parts) if self._wide(name)
            for target in self._targets_of(name)))
        return JobSpec(batch.process_id, self.checksum(), facts, self.params.load_batch_size,
                       self.params.load_data_min_rows if self.target == "mysql" else 0,
                       target=self.target, **options)

    def parts(self, batch: Batch, partitions: int,
              reads: list[Read] = ()) -> list[Part]:  # type: ignore[assignment]
        """The batch's events (and the rows read in its watermark windows) cut into at most
        ``partitions`` parts."""
        if self.target == "subscription":  # whole transactions, in binlog order
            if reads:
                raise ConfigError(
                    f"pipeline {self.compiled.pipeline_id}: a subscription takes no snapshot, "
                    "backfill or verify repair (rows read from the tables): its reader gets "
                    "the binlog's changes only. Cancel the copy (setl snapshot cancel) and "
                    "resume the channel (free-door requests are rejected before they are read)")
            return in_order(self.layouts, batch, partitions)
        if reads and self.compiled.two_way:
            raise ConfigError(
                f"pipeline {self.compiled.pipeline_id} takes no snapshot, backfill or verify "
                f"repair (rows read from the tables): {TWO_WAY_COPY}. Cancel the copy (setl "
                "snapshot cancel) and resume the channel (free-door requests are rejected "
                "before they are read)")
        for read in reads:  # a table met only by a read may join groups: before placing
            self._table_group((read.schema, read.table))
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
        if partitions <= 1:
            return [whole(self.layouts, batch.transactions)]
        place = 0
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
        if any(self._find(group) != group for group in groups):
            # a table first met in this batch joined groups whose events were placed
            # already: place them again, by the groups as they are now (met: no joins)
            return self._parts(batch, partitions)
        return packed(self.layouts, groups, partitions)

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

    def _gathers(self, name: tuple[str, str]) -> bool:
        found = self._gathered.get(name)
        if found is None:
            found = self._gathered[name] = self.compiled.gathered(*name)
        return found

    def _wide(self, name: tuple[str, str]) -> bool:
        found = self._parted.get(name)
        if found is None:
            found = self._parted[name] = reach.parted(self.compiled,
                                                      *self.compiled.stored(*name))
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
