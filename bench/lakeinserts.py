"""CPU per inserted row of one part's Extract/Transform for a lake table (issue 31): the
general path (decode, row changes, target changes, Arrow) against runs of inserts straight
to Arrow (:mod:`node.extract.lakeinserts`), for a change log and a mirror.

    PYTHONPATH=. python -m bench.lakeinserts [rows]

A sysbench-like table (INT id, INT k, CHAR(120) c, CHAR(60) pad), 40 rows an event, five
events a transaction; the best of five runs of :func:`node.extract.job.run_part`. Then the
worker's Arrow step alone for an OLTP mix (:func:`node.target.delta.units.render` of target
changes: two updates with their before images, a delete and an insert a transaction).
"""

from __future__ import annotations

import sys
import time
from array import array

from bench.rowsevents import INT, VARCHAR, insert_events, schema
from node.changes import ChangeType, TargetChange
from node.extract import insertlines, lakeinserts
from node.extract.etl import CompiledPipeline
from node.extract.job import Part, run_part
from node.jobs import ROW_BITS, JobSpec
from node.target.delta import units
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


def oltp(count: int) -> tuple[list[TargetChange], tuple[tuple[int, str, str, int], ...]]:
    """``count`` changes of a sysbench-like table, four a transaction (of six events)."""
    def row(n: int, k: int) -> dict[str, object]:
        return {"id": n, "k": k, "c": (f"{n:011d}-" * 10).encode(),
                "pad": (f"{k:011d}-" * 5).encode()}
    changes, txns = [], []
    for n in range(count):
        place = n // 4 * 6
        if n % 4 == 0:
            txns.append((place, f"bin.000001:{place}", f"0-1-{place}",
                         1_700_000_000_000 + place))
        seq, kind = (place + 1 + n % 4) << ROW_BITS, n % 4
        if kind == 3:
            changes.append(TargetChange(*TARGET, ChangeType.INSERT, ("id",), None, row(n, n),
                                        0, seq))
        else:
            changes.append(TargetChange(
                *TARGET, ChangeType.UPDATE if kind < 2 else ChangeType.DELETE, ("id",), (n,),
                row(n, n + 1) if kind < 2 else None, 0, seq, before=row(n, n)))
    return changes, tuple(txns)


def render_per_change(mode: str, count: int) -> float:
    changes, txns = oltp(count)
    layout = part(1)[0].layouts[1]
    facts = LakeFacts(tuple(table_columns(layout, lambda name: name)), ("id",), mode)
    spec = JobSpec(7, True, {TARGET: facts}, target="delta", transactions=txns)
    best = float("inf")
    for _ in range(7):
        start = time.process_time()
        units.render(changes, spec)
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
    for mode in ("changelog", "mirror"):
        print(f"{mode:9}: Arrow of an OLTP mix (units.render) "
              f"{render_per_change(mode, count):.2f} µs/change")


if __name__ == "__main__":
    main()
