"""The values that flow through a pipeline: row changes, transactions and batches.

Select frames the binlog into :class:`Transaction` values holding raw rows events;
Extract decodes those into :class:`RowChange` values (never library event classes) and
Transform turns them into :class:`TargetChange` values, which are merged and rendered as
SQL for Load.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from shared.model import BinlogPosition


class ChangeType(enum.Enum):
    INSERT = "I"
    UPDATE = "U"
    DELETE = "D"
    DDL = "DDL"


Row = dict[str, Any]
# The settings of the source session a DDL ran in, as (variable, value) pairs
# (node.ddlsession): the target runs the statement under them.
Session = tuple[tuple[str, Any], ...]


class RowChange(NamedTuple):
    """One row of one source statement (or one DDL statement).

    Row changes and target changes are named tuples, not dataclasses: a frozen dataclass
    builds itself with one ``object.__setattr__`` call per field, and every row is built
    once in Select and once more on each side of Spark; a tuple is built in one call (about
    3× faster to make and 2× faster to unpickle, measured on 10,000 rows)."""

    schema: str
    table: str
    type: ChangeType
    keys: tuple[str, ...] = ()  # primary key columns
    before: Row | None = None  # UPDATE and DELETE
    after: Row | None = None  # INSERT and UPDATE
    ddl: str = ""
    commit_ts_ms: int = 0
    session: Session = ()  # DDL: the source session's settings

    def __reduce__(self) -> tuple[Any, ...]:
        # by reference to this class (pyspark's namedtuple pickling would send the fields by
        # name and make a bare class on the worker, without this one's methods)
        return RowChange, tuple(self)

    def key(self, image: Row | None = None) -> tuple[Any, ...]:
        image = image if image is not None else (self.after if self.after is not None
                                                 else self.before)
        return tuple(image[name] for name in self.keys) if image else ()


# A rows event as Select keeps it: (the number Select gave its table map, the packet bytes).
# Select never decodes rows; Extract does, in Spark workers (node.extract.decode).
Event = tuple[int, bytes]


@dataclass(slots=True)
class Transaction:
    """One committed source transaction, with the position after it: its rows events as
    Select framed them (``events``, bytes), and the few changes Select decodes itself
    (``changes``: a DDL statement, free-door requests of the source's retl_buffer).

    Never changed once made, though not frozen: Select makes one per source transaction
    (four rows an ``oltp_write_only`` one), and a frozen dataclass's ``__init__`` sets
    each field through ``object.__setattr__``, 5x the plain one's CPU."""

    changes: tuple[RowChange, ...]
    end: BinlogPosition
    commit_ts_ms: int
    read_at_ms: int
    echo: bool = False  # written by the opposite pipeline of a two-way channel
    events: tuple[Event, ...] = ()
    event_rows: int = 0  # the rows its events hold, as estimated from their size
    # this pipeline's watermarks in it: ("L" low | "H" high | "A" abandoned, window id)
    signals: tuple[tuple[str, int], ...] = ()
    # a two-way channel: the opposite pipeline's intent of a DROP is read and its DROP not
    # yet, so no batch ends here (restarted here, Select would not know the intent and
    # would send the DROP back: node.select.statements.DropEchoes)
    drop_due: bool = False

    @property
    def rows(self) -> int:
        return len(self.changes) + self.event_rows

    @property
    def is_ddl(self) -> bool:
        return bool(self.changes) and any(change.type is ChangeType.DDL
                                          for change in self.changes)


# what ``TargetChange.ddl`` holds on an UPDATE that clears a wide row's part (a
# ``merge_part`` pair's source row went), and on any write of a part whose row another pair
# makes (node.extract.joins.where_made): the row is updated where it is, never made
CLEAR = "-- clear a part"


class TargetChange(NamedTuple):
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
    session: Session = ()  # DDL: the source session's settings, to run it under

    def __reduce__(self) -> tuple[Any, ...]:
        return TargetChange, tuple(self)


@dataclass(slots=True)
class Batch:
    """Whole transactions cut by Select, numbered by processId.

    Only transactions with changes are kept; one without (a stretch of the binlog on tables
    the pipeline does not replicate) only moves the batch's end. Every count is kept as
    transactions are added, so adding is O(1) however large the batch grows.
    """

    pipeline_id: str
    process_id: int
    transactions: list[Transaction] = field(default_factory=list)  # those with changes
    start: BinlogPosition = field(default_factory=BinlogPosition)
    spanned: int = 0  # transactions read into the batch, with changes or without
    echoes: int = 0  # of those, written by the opposite pipeline of a two-way channel
    rows: int = 0  # row changes: decoded ones, and those its rows events hold (estimated)
    events: int = 0  # rows events
    size: int = 0  # the bytes of its rows events
    has_ddl: bool = False
    commit_ts_ms: int = 0
    # watermark windows closed in it: (window id, place of its first event, of the event
    # after its last) — the rows read inside each go in at its end (node.snapshot)
    windows: list[tuple[int, int, int]] = field(default_factory=list)
    _end: BinlogPosition | None = None

    def __post_init__(self) -> None:
        given, self.transactions = self.transactions, []
        for txn in given:
            self.add(txn)

    def add(self, txn: Transaction) -> None:
        self.spanned += 1
        self.echoes += txn.echo
        self._end = txn.end
        self.commit_ts_ms = txn.commit_ts_ms
        if txn.changes or txn.events:
            self.transactions.append(txn)
            self.rows += txn.rows
            self.events += len(txn.events)
            size = 0
            for _, event in txn.events:  # (a loop: no generator a transaction)
                size += len(event)
            self.size += size
            self.has_ddl = self.has_ddl or txn.is_ddl

    @property
    def end(self) -> BinlogPosition:
        return self._end if self._end is not None else self.start

    @property
    def echo_only(self) -> bool:
        """Nothing but the opposite pipeline's own writes: writing a position for them would
        be read back by that pipeline as a change of its own source, and so on forever."""
        return not self.rows and self.spanned == self.echoes

    def changes(self) -> list[RowChange]:
        """The changes Select decoded (a DDL, free-door requests); rows events are not."""
        return [change for txn in self.transactions for change in txn.changes]


def differs(before: Any, after: Any) -> bool:
    """Whether a column's value changed as the server sees it: ``-0.0`` is not ``0.0`` (a
    DOUBLE stores its sign), though Python finds them equal."""
    return before != after or (type(before) is float and type(after) is float
                               and math.copysign(1.0, before) != math.copysign(1.0, after))
