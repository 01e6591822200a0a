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
take — goes the general way, and the result is the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from node.extract.decode import decode_rows
from node.extract.reads import ROW_BITS
from node.jobs import JobSpec, Unit
from node.target.mysql import loaddata
from node.target.mysql.facts import TableFacts, Target

if TYPE_CHECKING:
    from node.extract.etl import CompiledPipeline
    from node.extract.job import Part

INSERTS = frozenset({23, 30, 166, 169})  # WRITE_ROWS event types (v0, v1/v2, MariaDB's)
_NO_FACTS = TableFacts()


def units(compiled: CompiledPipeline, spec: JobSpec, part: Part, sizes: dict[int, list[int]]
          ) -> tuple[list[Unit], frozenset[int], int]:
    """The units of the part's insert-only target tables, the table-map numbers whose events
    they took (the general path leaves those out), and the rows they hold. ``sizes`` gets
    [row changes, event bytes] of those numbers as :func:`node.extract.job.decoded` counts."""

    found: list[Unit] = []
    taken: set[int] = set()
    count = 0
    for target, (numbers, mapping) in _candidates(compiled, part).items():
        table = spec.facts.get(target, _NO_FACTS)
        if table.ordered(mapping.target_keys) or \
                loaddata.plan(table.columns, table.triggers) is None:  # (before decoding)
            continue
        first, rows, counted = _rows(spec, part, frozenset(numbers), mapping)
        if len(rows) < spec.load_data_min_rows:
            continue
        sqls = loaddata.replaces(target[1], target[2], rows, table.columns, table.triggers)
        if sqls is None:
            continue
        found.append(Unit(*target, mapping.push_weight, first, sqls, len(rows),
                          mapping.target_keys))
        taken.update(numbers)
        count += len(rows)
        for number, (rows_of, size) in counted.items():
            sizes[number] = [rows_of, size]
    return found, frozenset(taken), count


def _candidates(compiled: CompiledPipeline, part: Part
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


def _rows(spec: JobSpec, part: Part, numbers: frozenset[int], mapping: Any
          ) -> tuple[int, list[dict[str, Any]], dict[int, tuple[int, int]]]:
    """The first row's place, the rows as the target takes them (in source order) and the
    [row changes, their bytes] of each number (as :func:`node.extract.job.decoded`)."""
    rows: list[dict[str, Any]] = []
    first = -1
    counted: dict[int, tuple[int, int]] = {}
    events, layouts, at = part.events, part.layouts, 0
    map_row, keys = mapping.entry.map_row, mapping.keys
    for length, number, place in zip(part.lengths, part.numbers, part.places, strict=True):
        if number in numbers:
            images = decode_rows(layouts[number], events[at:at + length], spec.checksum)
            if first < 0:
                first = place << ROW_BITS
            rows += [map_row(after, keys) for _, after in images]
            had = counted.get(number, (0, 0))
            counted[number] = (had[0] + len(images),
                               had[1] + length - layouts[number].event_head())
        at += length
    return first, rows, counted
