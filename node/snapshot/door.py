"""Free-door requests waiting for a watermark window (:mod:`node.snapshot.controller`).

A request is served like a snapshot chunk: its row is read between a low and a high
watermark and joins the stream at the high one, unless the stream changed the key inside
the window (then the stream's change is the newer). So a backfill, an ad-hoc snapshot and
a repair are one mechanism, and a reader of the target never sees a row older than one it
saw, nor a mix of source states.

Where the requests come from:

- **per instance**: inserts into the source's ``retl.retl_buffer`` without a
  ``CHANNEL_ID``, seen in the stream (:meth:`DoorQueue.ask`). The stream's copy of the row
  is the request, so every pipeline reading the source serves it even after another
  deleted the buffer row. Before the batch that carried them can load, the pipeline copies
  its requests into ``retl.retl_pending`` (one multi-row insert), and serves them from there
  in the order it saw them, in pages as windows free up; a served request's copy is
  deleted with its buffer row. So a restart — whose stream begins after those requests —
  finds every one it had not served, however many other pipelines of the source served
  (and deleted) the buffer row meanwhile.
- **central**: the channel's buffer on any server, polled in slices of ``free_door_slice``
  (:class:`~node.extract.freedoor.CentralDoor`).

A served request's buffer row is deleted once its window's batch is loaded.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import secrets
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pymysql

from node.changes import RowChange
from node.extract import chunks
from node.extract.etl import CompiledPipeline
from node.extract.freedoor import (
    CentralDoor,
    DoorStats,
    Note,
    Request,
    as_change,
    delete_ids,
    parse,
)
from node.extract.reads import Read
from node.snapshot.displacing import Moves, Target
from node.snapshot.plan import misfit, request_key
from node.snapshot.sourceof import held_by_none, sources_of, stopped, unaskable, unsure
from shared import identifiers
from shared.endpoint import connect
from shared.errors import ConfigError, FreeDoorRequestError, SetlError
from shared.identifiers import qualified
from shared.model import TWO_WAY_COPY, DataSource
from shared.retl import PENDING_TABLE, encode_key

log = logging.getLogger("setl.node.snapshot.door")
COLUMNS_PENDING = "ID, FULL_NAME, TYPE, PK_DATA"
KEYS_PER_READ = 1_000  # keys of one table one read asks for
# the ids of the requests asking displaced rows again (:meth:`DoorQueue.displaced`): far
# above any buffer row's, whose served copies are deleted by id
DISPLACED_IDS = 1 << 62
PAGE = 5_000  # pending requests read at once
NAMES_KEPT = 1_024  # FULL_NAMEs whose parse :func:`table_named` keeps (the latest used)


@functools.lru_cache(maxsize=NAMES_KEPT)
def table_named(full_name: str) -> tuple[str, str] | None:
    """A FULL_NAME's (schema, table) as written, None where it names no table; kept for
    the next batch's :meth:`DoorQueue.tables` (a backfill asks a few tables, many times)."""
    try:
        schema, table = map(identifiers.unquote, identifiers.split_qualified(full_name))
    except ConfigError:
        return None
    return schema, table


@dataclass
class Asked:
    """Requests of one table read together in a window."""

    schema: str
    table: str
    requests: list[Request]
    rows: list[RowChange]  # the buffer rows they came as
    key: chunks.SplitKey | None = None  # read after the window's low watermark (keyed)

    @property
    def keys(self) -> tuple[tuple[Any, ...], ...]:
        return tuple(tuple(r.key) for r in self.requests if r.type != "D")

    @property
    def deletes(self) -> tuple[tuple[Any, ...], ...]:
        return tuple(tuple(r.key) for r in self.requests if r.type == "D")

    def notes(self, read: Read) -> list[Note]:
        """What became of each request once the read is loaded."""
        missing = set(read.missing)
        return [Note("missing" if r.type != "D" and tuple(r.key) in missing else "loaded",
                     r.buffer_id, r.central) for r in self.requests]


class DoorQueue:
    """The requests of one pipeline (one attempt of its runner) waiting for windows."""

    def __init__(self, pipeline_id: str, source: DataSource, compiled: CompiledPipeline,
                 central: CentralDoor | None, stats: DoorStats, refused: str = "",
                 feeders: Callable[[Target], list[str]] | None = None) -> None:
        self.pipeline_id, self.source, self.compiled = pipeline_id, source, compiled
        self.central, self.stats = central, stats
        self.refused = refused  # why the pipeline takes no request at all (:func:`refusal`)
        self._rows: deque[RowChange] = deque()  # requests of windows that were not loaded
        self._scan_after = self._scan_until = 0  # pending SEQs (after, until] still to read
        self._lock = threading.Lock()
        self._asking = threading.Lock()  # held by ask() from its INSERT to its MAX(SEQ)
        # displaced rows: other pipelines writing a table (``feeders``), keys displaced
        self.moves = Moves(pipeline_id, feeders)

    def start(self) -> None:
        """Requests an earlier run saw and did not serve are read again."""
        try:
            with connect(self.source) as conn, conn.cursor() as cursor:
                self._scan_until = self._last(cursor)
        except (pymysql.MySQLError, SetlError) as exc:
            log.warning("event=free_door_scan_failed pipeline=%s error=%s", self.pipeline_id,
                        exc.args[-1] if exc.args else exc)
        if self._scan_until:
            log.info("event=free_door_resumed pipeline=%s pending_up_to=%d",
                     self.pipeline_id, self._scan_until)

    def ask(self, changes: list[RowChange]) -> None:
        """Requests the stream carried, copied to ``retl_pending`` before their batch can
        load (the runner's thread, before it hands the batch on). A request seen again (a
        replay) is kept once."""
        changes = self._ours(changes)
        if not changes:
            return
        rows = [(self.pipeline_id, int(row.get("ID") or 0), str(row.get("FULL_NAME") or ""),
                 str(row.get("TYPE") or ""), str(row.get("PK_DATA") or ""))
                for row in (change.after or {} for change in changes)]
        try:  # (one asker at a time: its SEQs commit before the next one's are drawn)
            with self._asking, connect(self.source, autocommit=True) as conn, \
                    conn.cursor() as cursor:
                for start in range(0, len(rows), PAGE):
                    part = rows[start:start + PAGE]
                    cursor.execute(f"INSERT IGNORE INTO {'.'.join(PENDING_TABLE)} (PIPELINE_ID, "
                                   "ID, FULL_NAME, TYPE, PK_DATA) VALUES "
                                   + ", ".join(["(%s, %s, %s, %s, %s)"] * len(part)),
                                   [value for row in part for value in row])
                last = self._last(cursor)
        except pymysql.MySQLError as exc:
            raise SetlError(f"pipeline {self.pipeline_id}: keeping {len(rows)} free-door "
                            f"request(s) in {'.'.join(PENDING_TABLE)} on {self.source.name}: "
                            f"{exc.args[-1] if exc.args else exc}; run 'setl retl init "
                            f"{self.source.name}' if the table is missing") from None
        with self._lock:
            self._scan_until = max(self._scan_until, last)

    def _ours(self, changes: list[RowChange]) -> list[RowChange]:
        """The per-instance requests this pipeline serves: every pipeline of the source sees
        each, and one for a table it does not replicate is another channel's — skipped, not
        rejected (a rejection would count against it, and fire its alarm, for a request that
        was never its own). A request whose FULL_NAME names no table is kept: it is rejected
        when taken, by every pipeline that sees it (it names no table to tell whose it is)."""
        ours = [change for change in changes if self._wants(change)]
        if len(ours) < len(changes):
            log.info("event=free_door_not_ours pipeline=%s requests=%d reason=a table this "
                     "pipeline does not replicate (another channel of the source serves it)",
                     self.pipeline_id, len(changes) - len(ours))
        return ours

    def _wants(self, change: RowChange) -> bool:
        """Whether a request's table is this pipeline's (True for one naming no table)."""
        try:
            schema, table = map(identifiers.unquote, identifiers.split_qualified(
                str((change.after or {}).get("FULL_NAME") or "")))
        except ConfigError:
            return True
        return self.compiled.wants(schema, table)
    def displaced(self, target: Target, columns: tuple[str, ...], moved: list[Any],
                  process_id: int) -> None:
        """Target rows removed for rows a window read (they held one of those rows' unique
        values under another key: :mod:`node.target.mysql.displaced`; ``moved``: their
        ``Moved``), asked again: an ``I`` request each, kept in ``retl_pending`` before the
        target commits, served in a later window (a row the source lacks: noted missing).
        Load calls it before it deletes them; raises :class:`DisplacedError` where they must
        not be deleted (:class:`~node.snapshot.displacing.Moves`)."""
        self.moves.check(target, moved, process_id)
        keys = [tuple(one.key) for one in moved]
        found = sources_of(self.compiled, target, columns)
        not_asked = unaskable(self.compiled, target, columns)
        if not_asked:  # (a row one of the tables asked holds is theirs to copy again)
            alone = held_by_none(self.source, self.pipeline_id, found, keys)
            if alone:
                raise stopped(self.compiled, target, not_asked, found, alone)
            log.info("event=displaced_rows_held pipeline=%s target=%s table=%s.%s count=%d: "
                     "a pair that cannot be asked by key writes the table too, and the "
                     "tables asked hold every row displaced", self.pipeline_id, *target,
                     len(keys))
        if found and unsure(self.compiled, target):
            log.warning("event=displaced_rows_not_asked pipeline=%s target=%s table=%s.%s "
                        "count=%d: a pair taking tables by a pattern feeds the table too, and "
                        "its tables are not asked; run setl verify --repair", self.pipeline_id,
                        *target, len(keys))
        if not found:
            log.warning("event=displaced_rows_not_asked pipeline=%s target=%s table=%s.%s "
                        "count=%d: no simple pair maps the table back to its source table; "
                        "run setl verify --repair", self.pipeline_id, *target, len(keys))
            return
        bases = []
        for schema, table, order, _ in found:
            base = DISPLACED_IDS + secrets.randbits(48) * KEYS_PER_READ  # (no buffer row's)
            bases.append(base)
            self.ask([as_change({"ID": base + index, "FULL_NAME": qualified(schema, table),
                                 "TYPE": "I", "PK_DATA": encode_key([key[i] for i in order])},
                                central=False) for index, key in enumerate(keys)])
            log.info("event=displaced_rows_asked pipeline=%s table=%s count=%d",
                     self.pipeline_id, qualified(schema, table), len(keys))
        for index, key in enumerate(keys):
            self.moves.asked(target, key, [base + index for base in bases])

    def _last(self, cursor: Any) -> int:
        cursor.execute(f"SELECT COALESCE(MAX(SEQ), 0) FROM {'.'.join(PENDING_TABLE)} "
                       "WHERE PIPELINE_ID = %s", (self.pipeline_id,))
        return int(cursor.fetchone()[0])

    @property
    def waiting(self) -> bool:
        return bool(self._rows) or self._scan_after < self._scan_until or (
            self.central is not None and self.central.waiting())

    def tables(self) -> set[tuple[str, str]] | None:
        """The source tables of the requests waiting, as far as the node has read them
        (no I/O); None: some are not read yet (kept in ``retl_pending`` since the last scan,
        or waiting in the central buffer), of any table."""
        with self._lock:
            if self._scan_after < self._scan_until:
                return None
            rows = list(self._rows)
        if self.central is not None and (self.central.seen_waiting or self.central.pending):
            return None
        full_names = {str((change.after or {}).get("FULL_NAME") or "") for change in rows}
        found = set()
        for full_name in full_names:  # (each parsed once, not once per request)
            name = table_named(full_name)
            if name is not None:  # (None names no table: rejected when taken)
                found.add(self.compiled.stored(*name))  # (as the binlog names it)
        return found

    def take(self, reads: int) -> list[Asked]:
        """At most ``reads`` groups of requests to read in the next window (:meth:`keyed`
        once its low watermark is written); requests that cannot be served are noted as
        rejected at once."""
        rows: list[RowChange] = []
        with self._lock:
            while self._rows and len(rows) < reads * KEYS_PER_READ:
                rows.append(self._rows.popleft())
        try:
            if len(rows) < reads * KEYS_PER_READ and self._scan_after < self._scan_until:
                rows += self._scan(reads * KEYS_PER_READ - len(rows))
            if len(rows) < reads * KEYS_PER_READ and self.central is not None:
                rows += self.central.take(reads * KEYS_PER_READ - len(rows))
            others = [change for change in rows  # (copies an earlier version kept, or of a
                      if not (change.after or {}).get("central")  # table a new definition
                      and not self._wants(change)]  # dropped)
            if others:
                self._forget(others)
                skipped = {id(change) for change in others}
                rows = [change for change in rows if id(change) not in skipped]
        except SetlError:  # a buffer away: what was taken waits for the next window
            with self._lock:
                self._rows.extendleft(reversed(rows))
            raise
        groups: dict[tuple[str, str], list[Asked]] = {}
        rejected: list[Note] = []
        for change in rows:
            try:
                request = self._checked(change)
            except FreeDoorRequestError as exc:
                row = change.after or {}
                rejected.append(Note("rejected", int(row.get("ID") or 0),
                                     bool(row.get("central")), str(exc)))
                continue
            found = groups.setdefault((request.schema, request.table), [])
            if not found or len(found[-1].requests) >= KEYS_PER_READ:
                found.append(Asked(request.schema, request.table, [], []))
            found[-1].requests.append(request)
            found[-1].rows.append(change)
        if rejected:
            self.noted(rejected)
        return [asked for found in groups.values() for asked in found]

    def keyed(self, asked: list[Asked]) -> None:
        """Each group's key, read as its table is when the window's low watermark is written
        (an ALTER before it is in the key, as it is in the stream's changes; one after it
        abandons the window); requests that cannot be read by it are noted as rejected and
        left out of their group."""
        if not asked:
            return
        names = list(dict.fromkeys((one.schema, one.table) for one in asked))
        try:
            with connect(self.source) as conn, conn.cursor() as cursor:
                keys = {(schema, table): request_key(cursor, schema, table,
                                              self.compiled.key_columns(schema, table))
                        for schema, table in names}
        except pymysql.MySQLError as exc:
            raise SetlError(f"pipeline {self.pipeline_id}: reading the keys of the tables its "
                            f"free-door requests name on {self.source.name}: "
                            f"{exc.args[-1] if exc.args else exc}") from None
        rejected: list[Note] = []
        for one in asked:
            key, kept = keys[(one.schema, one.table)], []
            for request, row in zip(one.requests, one.rows, strict=True):
                problem = key if isinstance(key, str) else misfit(request, key)
                if problem:
                    rejected.append(Note("rejected", request.buffer_id, request.central,
                                         problem))
                else:
                    kept.append((request, row))
            one.requests, one.rows = [r for r, _ in kept], [row for _, row in kept]
            one.key = None if isinstance(key, str) else key
        if rejected:
            self.noted(rejected)

    def noted(self, notes: list[Note]) -> None:
        """Requests served (their windows loaded) or rejected: counted, and their buffer
        rows deleted."""
        self.stats.count(notes, self.pipeline_id)
        self.moves.noted(notes)
        local = [note.buffer_id for note in notes if not note.central]
        if local:
            with connect(self.source, autocommit=True) as conn:
                delete_ids(conn.cursor(), local)
                delete_ids(conn.cursor(), local, self.pipeline_id)
        if self.central is not None:
            self.central.delete([note.buffer_id for note in notes if note.central])
            self.stats.pending = self.central.pending

    def _forget(self, others: list[RowChange]) -> None:
        """Per-instance requests for tables this pipeline does not replicate, found in its
        ``retl_pending``: its copies are deleted, not the buffer rows (:meth:`_ours`)."""
        ids = [int((change.after or {}).get("ID") or 0) for change in others]
        log.info("event=free_door_not_ours pipeline=%s requests=%d reason=kept in %s for a "
                 "table this pipeline does not replicate: its copies deleted",
                 self.pipeline_id, len(ids), ".".join(PENDING_TABLE))
        try:
            with connect(self.source, autocommit=True) as conn:
                delete_ids(conn.cursor(), ids, self.pipeline_id)
        except pymysql.MySQLError as exc:
            raise SetlError(f"pipeline {self.pipeline_id}: deleting {len(ids)} copies of "
                            f"requests it does not serve from {'.'.join(PENDING_TABLE)} on "
                            f"{self.source.name}: {exc.args[-1] if exc.args else exc}") from None

    def again(self, asked: list[Asked]) -> None:
        """Requests of a window that was not loaded wait for the next."""
        with self._lock:
            self._rows.extendleft(reversed([row for one in asked for row in one.rows]))

    def _scan(self, most: int) -> list[RowChange]:
        """The next requests kept in ``retl_pending``, in SEQ order. A locking read: an
        INSERT whose SEQ is drawn but not committed yet (another asker's, below a SEQ
        committed since) is waited for, not passed over (the read moves past it for good)."""
        with self._lock:  # (ask() may raise the end meanwhile: what it adds is read next)
            after, until = self._scan_after, self._scan_until
        try:
            with connect(self.source, autocommit=True) as conn, conn.cursor() as cursor:
                cursor.execute(f"SELECT SEQ, {COLUMNS_PENDING} FROM {'.'.join(PENDING_TABLE)} "
                               "WHERE PIPELINE_ID = %s AND SEQ > %s AND SEQ <= %s ORDER BY SEQ "
                               "LIMIT %s LOCK IN SHARE MODE",
                               (self.pipeline_id, after, until, min(most, PAGE)))
                names = [column[0] for column in cursor.description]
                found = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        except pymysql.MySQLError as exc:
            raise SetlError(f"pipeline {self.pipeline_id}: reading its free-door requests on "
                            f"{self.source.name}: {exc.args[-1] if exc.args else exc}") from None
        with self._lock:
            self._scan_after = int(found[-1]["SEQ"]) if len(found) == min(most, PAGE) \
                else until
        return [as_change({name: value for name, value in row.items() if name != "SEQ"},
                          central=False) for row in found]

    def _checked(self, change: RowChange) -> Request:
        """The request; raises for one that cannot be served whatever its table's key."""
        if (change.after or {}).get("reject"):
            raise FreeDoorRequestError(str(change.after["reject"]))  # type: ignore[index]
        if self.refused:  # (a copy an earlier version kept in retl_pending; a central one)
            raise FreeDoorRequestError(self.refused)
        request = parse(change)  # (named as the source stores it: the window's check
        schema, table = self.compiled.stored(request.schema, request.table)  # matches so)
        request = dataclasses.replace(request, schema=schema, table=table)
        if not self.compiled.wants(request.schema, request.table):
            raise FreeDoorRequestError(f"table {request.schema}.{request.table} is not "
                                       "replicated by this pipeline")
        if request.type == "D" and any(
                entry.pair.merge_part and not entry.include
                for entry in self.compiled.pairs_for(request.schema, request.table)):
            raise FreeDoorRequestError(  # a key alone does not say which columns to clear
                f"a D of {request.schema}.{request.table} clears its columns of a wide row "
                "(merge_part), and its pair does not list them (columns: {include: [...]})")
        if request.type == "D" and len({entry.pair.key_columns for entry in
                                        self.compiled.pairs_for(request.schema,
                                                                request.table)}) > 1:
            raise FreeDoorRequestError(
                f"a D of {request.schema}.{request.table} names a key, and the pairs the table "
                "fans out to find its rows by different key_columns (a key of one pair's "
                "columns finds no row of another's): delete those rows on the targets, or give "
                "the pairs the same key_columns")
        return request


def refusal(pipeline_id: str, target_kind: str, two_way: bool) -> str:
    """Why a pipeline takes no free-door request at all ("" where it takes them): a request's
    rows are read from the tables, which a subscription's reader never gets and a two-way
    channel cannot tell from its other side's newer writes."""
    if two_way:
        return (f"pipeline {pipeline_id} is one of a two-way channel, which takes no rows read "
                f"from the tables: {TWO_WAY_COPY}")
    if target_kind == "subscription":
        return (f"pipeline {pipeline_id} writes a subscription, which carries the binlog's "
                "changes only (its reader reads the tables itself if it needs their rows)")
    return ""
