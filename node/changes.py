"""The values that flow through a pipeline: row changes, transactions and batches.

Select produces :class:`RowChange` values (never library event classes); Extract/Transform
turns them into :class:`TargetChange` values, which Load merges and writes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from shared.model import BinlogPosition


class ChangeType(enum.Enum):
    INSERT = "I"
    UPDATE = "U"
    DELETE = "D"
    DDL = "DDL"


Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RowChange:
    """One row of one source statement (or one DDL statement)."""

    schema: str
    table: str
    type: ChangeType
    keys: tuple[str, ...] = ()  # primary key columns
    before: Row | None = None  # UPDATE and DELETE
    after: Row | None = None  # INSERT and UPDATE
    ddl: str = ""
    commit_ts_ms: int = 0

    def key(self, image: Row | None = None) -> tuple[Any, ...]:
        image = image if image is not None else (self.after if self.after is not None
                                                 else self.before)
        return tuple(image[name] for name in self.keys) if image else ()

    @property
    def key_changed(self) -> bool:
        return self.type is ChangeType.UPDATE and self.key(self.before) != self.key(self.after)


@dataclass(frozen=True, slots=True)
class Transaction:
    """The row changes of one committed source transaction, with the position after it."""

    changes: tuple[RowChange, ...]
    end: BinlogPosition
    commit_ts_ms: int
    read_at_ms: int

    @property
    def is_ddl(self) -> bool:
        return any(change.type is ChangeType.DDL for change in self.changes)


@dataclass(frozen=True, slots=True)
class TargetChange:
    """A change addressed to one target table, after Extract/Transform."""

    datasource: str
    schema: str
    table: str
    type: ChangeType
    keys: tuple[str, ...]
    before_key: tuple[Any, ...] | None  # UPDATE/DELETE: the key the row had
    after: Row | None  # INSERT/UPDATE: the full target row
    push_weight: int = 0
    seq: int = 0  # order within the batch
    ddl: str = ""
    before: Row | None = None  # the mapped before image (two-way channels: conflict checks)
    requested: bool = False  # served for a free-door request (a lookup, not a binlog image)


@dataclass(slots=True)
class Batch:
    """Whole transactions cut by Select, numbered by processId."""

    pipeline_id: str
    process_id: int
    transactions: list[Transaction] = field(default_factory=list)
    start: BinlogPosition = field(default_factory=BinlogPosition)

    @property
    def end(self) -> BinlogPosition:
        return self.transactions[-1].end if self.transactions else self.start

    @property
    def rows(self) -> int:
        return sum(len(txn.changes) for txn in self.transactions)

    @property
    def has_ddl(self) -> bool:
        return any(txn.is_ddl for txn in self.transactions)

    @property
    def commit_ts_ms(self) -> int:
        return self.transactions[-1].commit_ts_ms if self.transactions else 0

    def changes(self) -> list[RowChange]:
        return [change for txn in self.transactions for change in txn.changes]
