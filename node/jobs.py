"""What a batch's Extract/Transform job is given and gives back: the contract between the
node's planner (:class:`node.extract.job.Planner`), the Spark workers
(:func:`node.extract.job.run_part`) and the target that loads the result
(:mod:`node.target`).

A job's parts share a :class:`JobSpec`; each part gives a :class:`PartResult` whose
:class:`Unit` s are one target table's writes in the target's own form (for MySQL/MariaDB:
statement texts). Load orders the units of all parts with :func:`in_order`, as one merge of
the whole batch would have (:func:`node.merge.load_order`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from node.changes import TargetChange
from node.merge import load_order
from node.target.mysql.facts import TableFacts, Target
from node.target.mysql.sqltext import Sql
from shared.errors import SourceError
from shared.identifiers import qualified

# A change's seq in its batch: its event's place << ROW_BITS | row in the event. A place is
# below 2**32 (the parts' places are arrays of uint32), so a seq is below 2**64 (PAST); the
# row part has room for EVENT_ROWS rows of a binlog event — more than one can hold (an event
# is at most 1 GiB, slave_max_allowed_packet, and a row takes at least a byte) — and, above
# them, READ_BIT: a seq with it is a row a window read (node.extract.reads.INSIDE), placed
# between two events, not a binlog row's. A lake writes a seq less its transaction's first
# place << ROW_BITS as _setl_seq (int64): room for 2**31 events in one transaction.
ROW_BITS = 32
READ_BIT = 1 << (ROW_BITS - 1)
EVENT_ROWS = READ_BIT  # rows one rows event may hold: more would take seqs not its own
PAST = 1 << (32 + ROW_BITS)  # past every seq of a batch
# a rows event's post-header flag (its first flags byte: the packet's OK byte, the 19-byte
# event header, the 6-byte table id): the source session ran with foreign_key_checks = 0
_FLAGS, NO_FOREIGN_KEY_CHECKS_F = 26, 0x0002


def unchecked_places(events: bytes, lengths: Iterable[int], places: Iterable[int]
                     ) -> list[int]:
    """The places of the rows events (packets one after the other in ``events``, of these
    lengths) that the source wrote with foreign_key_checks off: one byte looked at per
    event, nothing per row."""
    off, at = [], _FLAGS
    for length, place in zip(lengths, places, strict=True):
        if events[at] & NO_FOREIGN_KEY_CHECKS_F:
            off.append(place)
        at += length
    return off


def unchecked_event(data: bytes) -> bool:
    """Whether the source wrote this rows event with foreign_key_checks off."""
    return bool(data[_FLAGS] & NO_FOREIGN_KEY_CHECKS_F)


@dataclass(frozen=True)
class JobSpec:
    """What every part of one batch's job shares."""

    process_id: int
    checksum: bool  # the source's events end with a CRC32
    facts: dict[Target, TableFacts | Any] = field(default_factory=dict)  # the kind's facts
    load_batch_size: int = 1000
    # a merged table's upserts go as LOAD DATA … REPLACE from this many rows on (0: never)
    load_data_min_rows: int = 0
    one_by_one: bool = False  # one statement a row (skip_load_exception's second try)
    changes_only: bool = False  # the target changes come back unrendered (two-way: Load
    # checks conflicts against the target's rows first)
    target: str = "mysql"  # the kind of target whose form the workers render (node.target)
    # a lake's changelog: each transaction of the batch as (its first event's place, its
    # end position, GTID, commit time in ms), in batch order
    transactions: tuple[tuple[int, str, str, int], ...] = ()
    # target tables several source tables feed: merged so that one batch writes what two
    # would (node.merge)
    gathered: frozenset[Target] = frozenset()
    # target tables of wide rows, written a part at a time (node.target.mysql.render.Stamps)
    parted: frozenset[Target] = frozenset()
    # the places of the events the source wrote with foreign_key_checks off; with it, rows a
    # window read are written with checks off too (READ_BIT). None: every change checked
    unchecked: frozenset[int] | None = None
    # the batch's part may hold rows a window read (False: a part of the stream alone, whose
    # changes Load's MySQL side need not look at one by one for them)
    reads: bool = True
    # target tables whose copy is unfinished (a snapshot running or pending, free-door
    # requests waiting): the stream's upserts into them also remove the target rows out of
    # step that hold their unique values under another key (node.target.mysql.displaced)
    copying: frozenset[Target] = frozenset()


def crowded(schema: str, table: str, place: int, rows: int) -> SourceError:
    """The error for a rows event of ``rows`` rows, at least :data:`EVENT_ROWS`: its rows'
    seqs would take the bit that marks rows read in a window, or the next event's."""
    return SourceError(
        f"a binlog rows event of {qualified(schema, table)} (place {place} in its batch) "
        f"holds {rows:,} rows, more than setl numbers in one event ({EVENT_ROWS - 1:,}); "
        "it cannot be loaded. Lower the source's binlog_row_event_max_size so that later "
        "events are smaller; to go on, stop the channel, set the pipeline past this "
        "event's transaction (setl position set) and copy the table again (setl snapshot)")


class Unit(NamedTuple):
    """The statements of one target table (or of one run of an ordered table)."""

    datasource: str
    schema: str
    table: str
    push_weight: int
    first_seq: int
    sqls: list[Sql]
    rows: int
    keys: tuple[str, ...] = ()  # the columns its rows are keyed by (for messages)
    # snapshot lines: loaded after the batch's transaction (node.target.mysql.copies)
    apart: bool = False
    data: bytes = b""  # a lake table's rows: an Arrow IPC stream (node.target.delta.units)
    # a run of an ordered or keyless table: it keeps source order among the runs, whatever
    # its push_weight (node.merge.load_order)
    ordered: bool = False
    # a run of a table with foreign keys written with foreign_key_checks off: the source's
    # session had them off, or the rows were read in a window (Load sets the session's)
    unchecked: bool = False


class PartResult(NamedTuple):
    units: list[Unit]
    changes: list[TargetChange]  # changes_only: the target changes themselves
    rows: int  # source row changes decoded
    sizes: dict[int, tuple[int, int]] = {}  # noqa: RUF012 - by table-map number: (row
    # changes, their events' bytes less the heads), for Select's estimate of a batch's rows
    # by a lines read's place: the key tokens the stream changed inside its window
    dropped: dict[tuple[int, str], frozenset[bytes]] = {}  # noqa: RUF012 - never mutated


def in_order(results: Iterable[PartResult]) -> list[Unit]:
    """The units of every part as one merge of the whole batch orders them (the runs of
    ordered tables all come from one part: see :class:`node.extract.job.Planner`)."""
    return load_order([unit for result in results for unit in result.units])


class Failed:
    """Select's error, handed to Load in batch order."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


@dataclass
class Done:
    """A batch's Extract/Transform, done: rendered parts, or target changes (a DDL batch,
    a two-way batch), and how to render it again row by row."""

    results: list[PartResult]
    changes: list[TargetChange] | None
    et_ms: float
    started_ms: int  # when its E/T began (epoch ms)
    redo: Callable[[], list[PartResult]] | None = None

    @property
    def rows(self) -> int:
        return sum(result.rows for result in self.results)
