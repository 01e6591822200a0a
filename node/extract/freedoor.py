"""The free door (自由门): backfill requests from ``retl.retl_buffer``, served in order.

A request is a buffer row: ``FULL_NAME`` (``schema.table``), ``TYPE`` (I/U: copy the row as
it is now, D: delete it on the target) and ``PK_DATA`` (the key, a JSON array; see
:func:`shared.retl.encode_key`).

- **Per instance** (Otter's form): the buffer sits on the pipeline's source, so the INSERT
  into it comes through the binlog like any change, in order. Rows with an empty
  ``CHANNEL_ID`` are requests for every pipeline reading that source.
- **Central** (DRC's form): one buffer on any server; rows carry ``CHANNEL_ID`` and
  ``PIPELINE_ID``. The owning pipeline polls them (:class:`CentralDoor`) and injects at most
  ``free_door_slice`` of them into its next batch.

Either way the request is served *inside the pipeline's ordered stream*, as a snapshot
chunk is: its row is read between a low and a high watermark and joins the stream at the
high one unless the stream changed the key inside the window (:mod:`node.snapshot.door`,
:mod:`node.extract.reads`). So an old row can never overwrite a newer one, and a reader of
the target never sees a mix of source states. ``D`` deletes the row on the target (where
the source still has a row of that key at the window, it is written right after).
Served buffer rows are deleted after their window's batch is loaded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pymysql

from node.changes import ChangeType, RowChange
from shared import identifiers
from shared.endpoint import connect, lost
from shared.errors import ConfigError, FreeDoorRequestError, SetlError
from shared.model import DataSource
from shared.retl import BUFFER_TABLE, SOURCE_DDL, SOURCE_TABLES, decode_key

log = logging.getLogger("setl.node.extract.freedoor")
COLUMNS = "ID, FULL_NAME, TYPE, PK_DATA, CHANNEL_ID, PIPELINE_ID"
T = TypeVar("T")


@dataclass(frozen=True)
class Note:
    """What became of one request; E/T returns these beside the target changes."""

    outcome: str  # loaded | missing | rejected
    buffer_id: int
    central: bool
    detail: str = ""


@dataclass(frozen=True)
class Request:
    buffer_id: int
    schema: str
    table: str
    type: str
    key: list[Any]
    central: bool


def is_request(change: RowChange) -> bool:
    return (change.schema, change.table) == BUFFER_TABLE and change.type is ChangeType.INSERT


def as_change(row: dict[str, Any], central: bool) -> RowChange:
    """A buffer row as the change E/T serves it."""
    image = {**row, "central": central}
    return RowChange(*BUFFER_TABLE, ChangeType.INSERT, ("ID",), None, image)


def parse(change: RowChange) -> Request:
    row = change.after or {}
    buffer_id = int(row.get("ID") or 0)
    full_name = str(row.get("FULL_NAME") or "")
    try:
        schema, table = map(identifiers.unquote, identifiers.split_qualified(full_name))
    except ConfigError:
        raise FreeDoorRequestError(f"FULL_NAME must be schema.table (a name that holds a dot "
                                   f"in backticks: `my-db`.`t.1`), got {full_name!r}") from None
    kind = str(row.get("TYPE") or "").upper()
    if kind not in ("I", "U", "D"):
        raise FreeDoorRequestError(f"TYPE must be I, U or D, got {row.get('TYPE')!r}")
    return Request(buffer_id, schema, table, kind,
                   decode_key(str(row.get("PK_DATA") or "")), bool(row.get("central")))


@dataclass
class DoorStats:
    requested: int = 0
    loaded: int = 0
    missing: int = 0
    rejected: int = 0
    pending: int = 0

    def count(self, notes: Iterable[Note], pipeline_id: str) -> None:
        for note in notes:
            self.requested += 1
            setattr(self, note.outcome, getattr(self, note.outcome) + 1)
            if note.outcome == "rejected":
                log.warning("event=free_door_rejected pipeline=%s buffer_id=%d central=%s "
                            "reason=%s", pipeline_id, note.buffer_id, note.central,
                            note.detail)


@dataclass
class CentralDoor:
    """The requests of a central buffer for one pipeline: polled in slices, read in
    watermark windows, deleted once their window's batch is loaded."""

    buffer: DataSource
    channel: str
    pipeline: str
    slice: int
    siblings: tuple[str, ...] = ()  # the channel's pipelines, given to its first pipeline
    # ids handed out and not deleted yet (in flight): a poll takes the lowest others, so a
    # request whose transaction commits after higher ids were taken is still found
    _taken: set[int] = field(default_factory=set)
    _orphans: set[int] = field(default_factory=set)  # rows naming no pipeline, the same
    _conn: Any = None
    _counted_at: float = 0.0
    _asked_at: float = 0.0
    seen_waiting: bool = False  # what waiting() last found (read where asking again costs)
    pending: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def use(self, buffer: DataSource) -> None:
        """Read the buffer at ``buffer`` from now on (a replica-set source's new primary)."""
        with self._lock:
            if buffer != self.buffer:
                self.buffer = buffer
                self._drop()

    def _cursor(self) -> Any:
        if self._conn is None or not self._conn.open:
            self._conn = connect(self.buffer, autocommit=True)
            with self._conn.cursor() as cursor:
                create_retl(cursor)
        return self._conn.cursor()

    def _on_connection(self, work: Callable[[Any], T]) -> T:
        """``work`` with a cursor of the buffer's connection (under the lock). One found
        lost (the server's ``wait_timeout``, a proxy's, a restart, a KILL) is opened again
        once for it: every query here is a read, or a DELETE of served ids, which deletes
        nothing more when made again."""
        for again in (False, True):
            try:
                with self._cursor() as cursor:
                    return work(cursor)
            except pymysql.MySQLError as exc:
                self._drop()  # a query cut off midway leaves the connection unusable
                if again or not lost(exc):
                    raise
                log.info("event=free_door_reconnect channel=%s pipeline=%s buffer=%s "
                         "error=%r", self.channel, self.pipeline, self.buffer.name,
                         exc.args[-1])
        raise AssertionError("unreachable")

    def take(self, most: int) -> list[RowChange]:
        """The next requests for this pipeline, at most ``most`` and ``slice`` (the
        channel's first pipeline also takes rows naming no pipeline of the channel, to
        reject them)."""
        with self._lock:
            return self._take(min(most, self.slice))

    def _take(self, most: int) -> list[RowChange]:
        def read(cursor: Any) -> tuple[list[dict[str, Any]], int | None]:
            rows = self._orphan_rows(cursor) if self.siblings else []
            # the ids on the index alone, past those in flight; then the rows of the first
            cursor.execute("SELECT ID FROM retl.retl_buffer WHERE CHANNEL_ID = %s AND "
                           "PIPELINE_ID = %s ORDER BY ID LIMIT %s",
                           (self.channel, self.pipeline, len(self._taken) + most))
            ids = [int(row[0]) for row in cursor.fetchall()
                   if int(row[0]) not in self._taken][:most]
            if ids:
                cursor.execute(f"SELECT {COLUMNS} FROM retl.retl_buffer WHERE ID IN "
                               f"({', '.join(['%s'] * len(ids))}) ORDER BY ID", ids)
                rows += _dicts(cursor)
            counted = None
            if time.monotonic() - self._counted_at > 5 or len(ids) < most:
                cursor.execute("SELECT COUNT(*) FROM retl.retl_buffer WHERE CHANNEL_ID = %s "
                               "AND PIPELINE_ID = %s", (self.channel, self.pipeline))
                counted, self._counted_at = int(cursor.fetchone()[0]), time.monotonic()
            return rows, counted
        try:
            rows, counted = self._on_connection(read)
        except pymysql.MySQLError as exc:
            raise SetlError(f"central free door on {self.buffer.name}: "
                            f"{exc.args[-1] if exc.args else exc}") from None
        # (noted once read whole: a read cut off takes its orphans again)
        self._orphans.update(int(row["ID"]) for row in rows if "reject" in row)
        mine = [int(row["ID"]) for row in rows if "reject" not in row]
        self._taken.update(mine)
        self.pending = max(0, counted - len(self._taken) if counted is not None
                           else self.pending - len(mine))
        return [as_change(row, central=True) for row in rows]

    def _orphan_rows(self, cursor: Any) -> list[dict[str, Any]]:
        marks = ", ".join(["%s"] * len(self.siblings))
        cursor.execute(f"SELECT {COLUMNS} FROM retl.retl_buffer WHERE CHANNEL_ID = %s AND "
                       f"(PIPELINE_ID IS NULL OR PIPELINE_ID NOT IN ({marks})) "
                       "ORDER BY ID LIMIT %s",
                       (self.channel, *self.siblings, len(self._orphans) + 1000))
        rows = [row for row in _dicts(cursor) if int(row["ID"]) not in self._orphans][:1000]
        for row in rows:
            row["reject"] = (f"channel {self.channel} has no pipeline "
                             f"{row['PIPELINE_ID']!r} (it has {', '.join(self.siblings)})")
        return rows

    def waiting(self) -> bool:
        """Whether requests wait (asked at most every 0.2 s; errors surface in take).
        The snapshot controller asks while Load deletes served requests: the connection
        is used under the lock, one query at a time."""
        now = time.monotonic()
        if now - self._asked_at < 0.2:
            return False
        self._asked_at = now

        def ask(cursor: Any) -> bool:  # more rows than in flight: one waits
            cursor.execute("SELECT COUNT(*) FROM (SELECT 1 FROM retl.retl_buffer WHERE "
                           "CHANNEL_ID = %s AND PIPELINE_ID = %s LIMIT %s) AS mine",
                           (self.channel, self.pipeline, len(self._taken) + 1))
            return int(cursor.fetchone()[0]) > len(self._taken)
        with self._lock:
            try:
                self.seen_waiting = self._on_connection(ask)
            except pymysql.MySQLError:
                return True  # take() reports it
            return self.seen_waiting

    def rewind(self) -> None:
        """After a failure: requests of windows not loaded are taken again."""
        with self._lock:
            self._taken.clear()
            self._orphans.clear()

    def delete(self, ids: list[int]) -> None:
        """Served requests' rows (their windows are loaded)."""
        with self._lock:
            self._on_connection(lambda cursor: delete_ids(cursor, ids))
            self._taken.difference_update(ids)
            self._orphans.difference_update(ids)

    def close(self) -> None:
        """The connection closed (after a query another thread runs on it, if any)."""
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # a broken connection (its server gone): nothing to end
                pass
            self._conn = None


def create_retl(cursor: Any) -> None:
    """The retl schema with retl_buffer and retl_mark, created only where missing (so no
    DDL reaches the binlog when nothing is)."""
    cursor.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = "
                   "'retl' AND TABLE_NAME IN %s", (SOURCE_TABLES,))
    if cursor.fetchone()[0] < len(SOURCE_TABLES):
        for statement in SOURCE_DDL:
            cursor.execute(statement)


def ensure_buffer(source: DataSource, pipeline_id: str) -> None:
    """Create the retl schema (retl_buffer, retl_mark) on the source if it is missing; a
    user without the right to do so gets a warning (``setl retl init`` does it by hand)."""
    try:
        with connect(source, autocommit=True) as conn, conn.cursor() as cursor:
            create_retl(cursor)
    except (pymysql.MySQLError, SetlError) as exc:
        log.warning("event=free_door_unavailable pipeline=%s source=%s error=%s", pipeline_id,
                    source.name, exc.args[-1] if exc.args else exc)


def _dicts(cursor: Any) -> list[dict[str, Any]]:
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def delete_ids(cursor: Any, ids: list[int], pending: str | None = None) -> None:
    """Served buffer rows are deleted (in chunks) so the buffer does not grow; with
    ``pending``, that pipeline's copies of them in ``retl_pending`` instead."""
    table, only = ("retl.retl_pending", "PIPELINE_ID = %s AND ") if pending is not None \
        else ("retl.retl_buffer", "")
    with cursor:
        for start in range(0, len(ids), 1000):
            part = ids[start:start + 1000]
            cursor.execute(f"DELETE FROM {table} WHERE {only}ID IN "
                           f"({', '.join(['%s'] * len(part))})",
                           [pending, *part] if pending is not None else part)
