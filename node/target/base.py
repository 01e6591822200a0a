"""What a kind of target provides to the node (see :mod:`node.target`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from node.changes import Batch, TargetChange
from node.cursor import Cursor
from node.jobs import PartResult
from shared.model import BinlogPosition, DataSource


class TargetTables(Protocol):
    """What merging and rendering need to know of the target's tables (read once per table
    in the node, again after a DDL)."""

    def of(self, target: tuple[str, str, str], layout: Any = None) -> Any:
        """What is known of one target table (read on first use); ``layout``: the table map
        of a source table written to it, when there is one (a lake's types come from it)."""

    def forget(self) -> None:
        """After a DDL: every table is read again on its next use."""

    def close(self) -> None:
        """The connections it read with."""


class TargetLoader(Protocol):
    """The load side of a kind of target for one running pipeline."""

    targets: dict[str, DataSource]
    run: str  # the pipeline's life, written with every position
    written: dict[str, BinlogPosition]  # each target's position, as last written

    def claim(self) -> dict[str, Cursor | None]:
        """Fence older owners, then where each target stands (None: nothing loaded)."""

    def take_over(self, name: str, found: int) -> list[int] | None:
        """Adopt a target's owner epoch ``found`` (a ZooKeeper restored from a backup)."""

    def load(self, batch: Batch, changes: list[TargetChange]) -> int:
        """Apply a batch given as target changes (a DDL, a two-way batch) with its position."""

    def load_units(self, batch: Batch, results: list[PartResult],
                   redo: Callable[[], list[PartResult]] | None = None) -> int:
        """Apply a batch in the target's form with its position, atomically."""

    def close(self) -> None: ...
