"""What one ``setl verify`` of a pipeline found (:mod:`node.verify.run`), table by table:
the keys that differ by kind (missing, extra, different), the first of them listed, what was
re-checked and repaired, and notes that say why a table's figures read as they do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from node.verify.plan import Skipped, TablePlan
from node.verify.readers import Key
from node.verify.settle import Outcome, Seen, kinds
from shared.retl import encode_key

LISTED = 1000  # differing keys listed per table in the report


@dataclass
class TableReport:
    table: str
    method: str
    targets: list[str]
    rows: int = 0
    chunks: int = 0
    seconds: float = 0.0
    differences: list[tuple[str, str, str]] = field(default_factory=list)  # kind, key, table
    counts: dict[str, int] = field(default_factory=dict)  # kind → keys
    keys: int = 0  # keys that differ
    unsettled: int = 0
    rechecked: int = 0  # candidates read again
    notes: list[str] = field(default_factory=list)
    repaired: int = 0  # free-door requests written
    remaining: int = -1  # keys still different after repair (-1: no repair asked)


@dataclass
class Report:
    pipeline_id: str
    tables: list[TableReport] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    buffer: str = ""  # where repair requests went
    seconds: float = 0.0


def fill(out: TableReport, outcome: Outcome, table: TablePlan) -> None:
    """The table's report from what its checks confirmed: the kinds counted, the first keys
    listed, and notes where a lake holds a key twice or a keyless table's rows differ in
    number."""
    counts: dict[str, set[Key]] = {"missing": set(), "extra": set(), "different": set()}
    differences = []
    for key, seen in sorted(outcome.confirmed.items(), key=lambda item: repr(item[0])):
        for kind, target in kinds(seen):
            counts[kind].add(key)
            differences.append((kind, encode_key(key), target))
    out.differences = differences[:LISTED]
    out.counts = {kind: len(keys) for kind, keys in counts.items()}
    lakes = {target.id for target in table.targets if target.lake}
    doubled = [{name for name, rows in seen.actual if len(rows) > 1 and name in lakes}
               for seen in outcome.confirmed.values()]
    held = sorted(set().union(*doubled))
    if held:
        out.notes.append(f"{sum(map(bool, doubled))} key(s) held by more than one row in "
                         f"lake table {', '.join(held)} (a Delta table has no unique key): "
                         "reported as different or extra; --repair deletes every row of "
                         "such a key and writes the source's row again")
    if not table.unique:
        counted = sum(1 for seen in outcome.confirmed.values() if counts_differ(seen))
        if counted:
            out.notes.append(
                f"{counted} key(s) of ({', '.join(table.key.columns)}) have another number "
                f"of rows on a target than on the source: rows duplicated or lost (these "
                f"columns need not identify one row of {table.name}); reported as "
                "different, or missing or extra where a side has none")
    out.keys = len(outcome.confirmed)
    out.unsettled = len(outcome.unsettled)


def counts_differ(seen: Seen) -> bool:
    """Whether a key has another number of rows on some target than the source gives."""
    expected, actual = dict(seen.expected), dict(seen.actual)
    return any(len(rows) != len(actual[name]) for name, rows in expected.items()
               if name in actual)
