"""Runs of inserts straight from the decoded rows to ``LOAD DATA`` lines.

A catch-up is mostly inserts (a bulk load, an import, a backlog of new orders). The general
path makes every decoded row a row change, then a target change, then merges it by key before
rendering it; for the rows of a target table that this part of the batch only *inserts*,
through a pair that only renames and chooses columns, into a table merged by key (no foreign
key, no second unique key, no trigger), all of that changes nothing: merged, the rows are
the inserted rows in source order (a key inserted twice would need a delete or an update in
between, and then the table is not insert-only), and ``LOAD DATA … REPLACE`` of them in that
order writes what the merge would. :func:`units` takes those tables' events out of the part
and renders them at once; Load orders the units as ever (``push_weight``, first change). On
the development machine the general path spent about 60% of a Spark worker's time per
inserted row in the steps this one leaves out.

Everything else — another kind of change to the table in the part, a pair that is not
simple, a target merged in source order, too few rows for ``LOAD DATA`` or a value it cannot
take, a target server that takes no ``LOAD DATA LOCAL`` (``local_infile`` OFF) — goes the
general way, and the result is the same.

In the compiled build, a run whose columns are integers and text (whose bytes the target
takes as they are), through a pair that neither renames nor chooses columns, does not even
decode: :mod:`node.extract.insertlines` reads the lines straight from the events' bytes
(the same bytes; anything it cannot read exactly goes the decoded way).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from node.extract import insertlines
from node.extract.decode import decode_rows
from node.extract.reads import ROW_BITS
from node.jobs import EVENT_ROWS, JobSpec, Unit, crowded
from node.target.mysql import loaddata
from node.target.mysql.facts import TableFacts, Target
from node.target.mysql.sqltext import Sql

if TYPE_CHECKING:
    from node.extract.etl import CompiledPipeline
    from node.extract.job import Part

INSERTS = frozenset({23, 30, 166, 169})  # WRITE_ROWS event types (v0, v1/v2, MariaDB's)
_NO_FACTS = TableFacts()
_ROOM = 1 << 18  # bytes of lines written before they are copied out


def units(compiled: CompiledPipeline, spec: JobSpec, part: Part, sizes: dict[int, list[int]]
          ) -> tuple[list[Unit], frozenset[int], int]:
    """The units of the part's insert-only target tables, the table-map numbers whose events
    they took (the general path leaves those out), and the rows they hold. ``sizes`` gets
    [row changes, event bytes] of those numbers as :func:`node.extract.job.decoded` counts."""

    found: list[Unit] = []
    taken: set[int] = set()
    count = 0
    for target, (numbers, mapping) in candidates(compiled, part).items():
        table = spec.facts.get(target, _NO_FACTS)
        plan = loaddata.plan(table.columns, table.triggers)
        if not table.local_infile or table.ordered(mapping.target_keys) or plan is None or \
                table.unkeyed(mapping.target_keys):  # (before decoding)
            continue
        made = _lines(spec, part, frozenset(numbers), mapping, table, plan) \
            if insertlines.COMPILED else None  # straight from the events' bytes
        if made is None:
            made = _decoded(spec, part, frozenset(numbers), mapping, table)
        first, rows, counted, sqls = made
        if sqls is None:  # too few rows for LOAD DATA, or a value it cannot take
            continue
        found.append(Unit(*target, mapping.push_weight, first, sqls, rows,
                          mapping.target_keys))
        count += took(taken, sizes, numbers, counted, rows)
    return found, frozenset(taken), count


def took(taken: set[int], sizes: dict[int, list[int]], numbers: list[int],
         counted: dict[int, tuple[int, int]], rows: int) -> int:
    """A table's events taken out of the general path: their numbers noted, and their
    [row changes, bytes] in ``sizes`` as :func:`node.extract.job.decoded` counts them; its
    rows."""
    taken.update(numbers)
    for number, (rows_of, size) in counted.items():
        sizes[number] = [rows_of, size]
    return rows


def candidates(compiled: CompiledPipeline, part: Part
                ) -> dict[Target, tuple[list[int], Any]]:
    """Target tables fed in this part only by inserts, each through one simple pair from
    source tables that feed nothing else: their table-map numbers and that pair's mapping."""
    inserts: dict[int, bool] = {}
    events, at = part.events, 0
    for length, number in zip(part.lengths, part.numbers, strict=True):
        only = inserts.get(number, True)
        if only:
            inserts[number] = events[at + 5] in INSERTS
        at += length
    by_target: dict[Target, list[int]] = {}
    mappings: dict[Target, Any] = {}
    refused: set[Target] = set()
    for number, only in inserts.items():
        layout = part.layouts[number]
        plain = compiled.plain(layout.schema, layout.table, layout.primary_key)
        if plain is None:
            return {}  # (never: the caller takes this path only when every pair is simple)
        for mapping in plain:
            target = (mapping.datasource, mapping.schema, mapping.table)
            by_target.setdefault(target, []).append(number)
            mappings[target] = mapping
            if not only or len(plain) != 1 or mapping.keyless:
                refused.add(target)
    return {target: (numbers, mappings[target]) for target, numbers in by_target.items()
            if target not in refused and len({(part.layouts[n].schema, part.layouts[n].table)
                                               for n in numbers}) == 1}


Made = tuple[int, int, dict[int, tuple[int, int]], list[Sql] | None]


def _decoded(spec: JobSpec, part: Part, numbers: frozenset[int], mapping: Any,
             table: TableFacts) -> Made:
    """The first row's place, the rows, their [row changes, bytes] by number and their
    statements (None: too few rows for LOAD DATA, or a value it cannot take), decoded."""
    first, rows, counted = mapped_rows(spec, part, numbers, mapping)
    sqls = loaddata.replaces(mapping.schema, mapping.table, rows, table.columns,
                             table.triggers) if len(rows) >= spec.load_data_min_rows else None
    return first, len(rows), counted, sqls


def _lines(spec: JobSpec, part: Part, numbers: frozenset[int], mapping: Any,
           table: TableFacts, plan: list[tuple[str, str | None]]) -> Made | None:
    """As :func:`_decoded`, but the rows' LOAD DATA lines read straight from the events'
    bytes (:mod:`node.extract.insertlines`); None where a table, a column or an event cannot
    go that way (the decoded path then gives the same lines, or says what is wrong)."""
    entry = mapping.entry
    if entry.renames or entry.include or entry.exclude or \
            any(table.columns[name].data_type == "enum" for name, _ in plan):
        return None  # renamed or chosen columns, or an ENUM's empty value to refuse
    # per number: its columns' kinds and order (None: not this way), and its events' head
    ways: dict[int, tuple[Any, int]] = {}
    # the lines are written into a buffer kept in the cache, a few events at a time, then
    # copied out (zeroing and growing a buffer as large as all the lines cost more)
    out, end, done = bytearray(_ROOM), 0, []
    first = -1
    counted: dict[int, tuple[int, int]] = {}
    events, layouts, at, rows = part.events, part.layouts, 0, 0
    for length, number, place in zip(part.lengths, part.numbers, part.places, strict=True):
        if number in numbers:
            if number not in ways:
                layout = layouts[number]
                ways[number] = (insertlines.way(layout, plan), layout.event_head())
            way, head = ways[number]
            if way is None:
                return None
            found, end = insertlines.lines(events[at:at + length], spec.checksum, *way, out,
                                           end)
            if found < 0:
                return None
            if first < 0:
                first = place << ROW_BITS
            rows += found
            if end > _ROOM >> 1:
                done.append(out[:end])
                end = 0
            had = counted.get(number, (0, 0))
            counted[number] = (had[0] + found, had[1] + length - head)
        at += length
    if rows < spec.load_data_min_rows:
        return first, rows, counted, None
    done.append(out[:end])
    names = [name for name, _ in plan]
    return first, rows, counted, loaddata.from_lines(mapping.schema, mapping.table, names,
                                                     b"".join(done))


def mapped_rows(spec: JobSpec, part: Part, numbers: frozenset[int], mapping: Any,
                runs: list[tuple[int, int]] | None = None
                ) -> tuple[int, list[dict[str, Any]], dict[int, tuple[int, int]]]:
    """The first row's place, the rows as the target takes them (in source order) and the
    [row changes, their bytes] of each number (as :func:`node.extract.job.decoded`);
    ``runs`` gets each event's place in the batch and rows."""
    rows: list[dict[str, Any]] = []
    first = -1
    counted: dict[int, tuple[int, int]] = {}
    events, layouts, at = part.events, part.layouts, 0
    map_row, keys = mapping.entry.map_row, mapping.keys
    for length, number, place in zip(part.lengths, part.numbers, part.places, strict=True):
        if number in numbers:
            images = decode_rows(layouts[number], events[at:at + length], spec.checksum)
            if len(images) >= EVENT_ROWS:  # (a lake numbers each row: place << ROW_BITS | row)
                raise crowded(layouts[number].schema, layouts[number].table, place,
                              len(images))
            if first < 0:
                first = place << ROW_BITS
            rows += [map_row(after, keys) for _, after in images]
            if runs is not None:
                runs.append((place, len(images)))
            had = counted.get(number, (0, 0))
            counted[number] = (had[0] + len(images),
                               had[1] + length - layouts[number].event_head())
        at += length
    return first, rows, counted
