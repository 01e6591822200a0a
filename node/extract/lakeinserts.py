"""Runs of inserts straight from the decoded rows to a lake table's Arrow rows.

The lake's twin of :mod:`node.extract.inserts`: for the target tables that a part only
inserts into, through one pair that only renames and chooses columns, from one source
table, keyed (:func:`node.extract.inserts.candidates`), the rows go from the decoder through
the pair's mapping straight to :func:`node.target.delta.units.inserted`, which makes the
table :func:`node.target.delta.units.render` makes of their changes — a change log's rows
each with ``I``, its transaction and order in it, no before image; a mirror's rows as they
came (each key once: a key inserted twice goes the general way) — without a row change, a
target change or a merge per row.

Everything else goes the general way, and the result is the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.extract import inserts
from node.jobs import JobSpec, Unit
from node.target.delta import units as lake

if TYPE_CHECKING:
    from node.extract.etl import CompiledPipeline
    from node.extract.job import Part


def units(compiled: CompiledPipeline, spec: JobSpec, part: Part, sizes: dict[int, list[int]]
          ) -> tuple[list[Unit], frozenset[int], int]:
    """The units of the part's insert-only lake tables, the table-map numbers whose events
    they took (the general path leaves those out), and the rows they hold. ``sizes`` gets
    [row changes, event bytes] of those numbers as :func:`node.extract.job.decoded` counts."""
    found: list[Unit] = []
    taken: set[int] = set()
    count = 0
    for target, (numbers, mapping) in inserts.candidates(compiled, part).items():
        runs: list[tuple[int, int]] = []
        _, rows, counted = inserts.mapped_rows(spec, part, frozenset(numbers), mapping, runs)
        unit = lake.inserted(target, mapping.push_weight, mapping.target_keys, rows, runs,
                             spec)
        if unit is not None:
            found.append(unit)
        elif rows:  # a key inserted twice: the merge settles it
            continue
        count += inserts.took(taken, sizes, numbers, counted, len(rows))
    return found, frozenset(taken), count
