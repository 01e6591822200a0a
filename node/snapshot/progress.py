"""How far a pipeline's table copies got, as status shows it: per table, chunks and rows
done, the rate of the last minute and what is left at that rate."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from node.snapshot.state import TableCopy


def progress(copies: list[TableCopy], rate: float = 0.0) -> list[dict[str, object]]:
    """Per table of ``copies``: chunks done of all, rows, rows/s (``rate``), and an ETA."""
    found: list[dict[str, object]] = []
    for copy in copies:
        left = max(copy.rows - copy.read_rows, 0)
        found.append({"table": f"{copy.schema}.{copy.table}", "state": copy.state,
                      "chunks_done": len(copy.done), "chunks": copy.total,
                      "rows": copy.read_rows, "rows_estimated": copy.rows,
                      "rows_per_s": rate if copy.state == "copying" else 0.0,
                      "eta_s": left / rate if rate and copy.state == "copying" else 0.0,
                      "where": copy.where, "error": copy.error})
    return found


@dataclass
class Rate:
    """Rows a second over the last minute, for :func:`progress`."""

    samples: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=120))

    def add(self, rows: int) -> None:
        self.samples.append((time.monotonic(), rows))

    def per_s(self) -> float:
        now = time.monotonic()
        recent = [(at, rows) for at, rows in self.samples if now - at <= 60]
        if len(recent) < 2:
            return 0.0
        return sum(rows for _, rows in recent[1:]) / max(now - recent[0][0], 1e-3)
