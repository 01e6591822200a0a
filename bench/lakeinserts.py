"""CPU per inserted row of one part's Extract/Transform for a lake table (issue 31): the
general path (decode, row changes, target changes, Arrow) against runs of inserts straight
to Arrow (:mod:`node.extract.lakeinserts`), for a change log and a mirror.

    PYTHONPATH=. python -m bench.lakeinserts [rows]

A sysbench-like table (INT id, INT k, CHAR(120) c, CHAR(60) pad), 40 rows an event, five
events a transaction; the best of five runs of :func:`node.extract.job.run_part`.
"""

from __future__ import annotations

import sys
import time
from array import array

from bench.rowsevents import INT, VARCHAR, insert_events, schema
from node.extract import insertlines, lakeinserts
from node.extract.etl import CompiledPipeline
from node.extract.job import Part, run_part
from node.jobs import JobSpec
from node.target.delta.columns import table_columns
from node.target.delta.tables import LakeFacts
from shared.definitions import load_text

TARGET = ("lake", "bench", "sbtest1")
EVENTS_PER_TXN = 5


def pipeline(mode: str) -> CompiledPipeline:
    text = "\n".join([
        "sources:", "  - {name: src, host: h1}",
        "  - {name: lake, type: delta, location: /tmp/lake}",
        "channels:", "  - name: c", "    pipelines:", "      - name: p",
        "        source: src", "        target: lake", "        pairs:",
        f"          - {{source: bench.sbtest1, target: bench.sbtest1, mode: {mode}}}"]) + "\n"
    found = load_text(text, "bench.yaml").channels[0].pipelines[0]
    return CompiledPipeline.compile("c.p", 1, found)


def part(count: int) -> tuple[Part, tuple[tuple[int, str, str, int], ...]]:
    layout = schema("sbtest1", [("id", INT), ("k", INT), ("c", VARCHAR), ("pad", VARCHAR)])
    rows = [(n, n * 7 % 10000, f"{n:011d}-" * 10 + "0" * 10, f"{n:011d}-" * 5)
            for n in range(1, count + 1)]
    events = insert_events(layout, 1, rows)
    txns = tuple((place, f"bin.000001:{place}", f"0-1-{place}", 1_700_000_000_000 + place)
                 for place in range(0, len(events), EVENTS_PER_TXN))
    return Part({1: layout}, b"".join(events), array("I", map(len, events)),
                array("I", [1] * len(events)), array("I", range(len(events)))), txns


def cpu_per_row(compiled: CompiledPipeline, spec: JobSpec, made: Part, count: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        run_part(compiled, spec, made)
        best = min(best, time.process_time() - start)
    return best / count * 1e6


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    made, txns = part(count)
    straight = lakeinserts.units
    print(f"{'compiled' if insertlines.COMPILED else 'pure Python'} build, {count} rows")
    for mode in ("changelog", "mirror"):
        compiled = pipeline(mode)
        layout = made.layouts[1]
        facts = LakeFacts(tuple(table_columns(layout, lambda name: name)), ("id",), mode)
        spec = JobSpec(7, True, {TARGET: facts}, target="delta", transactions=txns)
        lakeinserts.units = lambda *args: ([], frozenset(), 0)  # type: ignore[assignment]
        general = cpu_per_row(compiled, spec, made, count)
        lakeinserts.units = straight
        fast = cpu_per_row(compiled, spec, made, count)
        print(f"{mode:9}: general {general:.2f} µs/row, straight {fast:.2f} µs/row "
              f"({general / fast:.2f}x)")


if __name__ == "__main__":
    main()
