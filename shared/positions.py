"""A pipeline's stored cursor (``pipelines/{pid}/cursor`` in ZooKeeper) and where a pipeline
that has none begins, shared by the manager (which fixes it when the user starts the
channel) and the node (which resumes from it).

``start: latest`` (and ``snapshot``) means the source's position at the moment the user
started the pipeline: the manager reads it and stores the cursor before it sets the
channel's status, so a row committed after ``setl channel start`` returned is always
replicated, however long a node takes to get going (or when none runs yet).
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pymysql
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from shared import gtid
from shared.endpoint import connect, server_answered
from shared.errors import ConflictError, PositionConflictError, SourceError
from shared.model import BinlogPosition, DataSource, Pipeline, StartupMode

log = logging.getLogger("setl.positions")


@dataclass(frozen=True)
class Cursor:
    position: BinlogPosition
    process_id: int = 0
    # fixed at the channel's start, before any runner: the node does a first start's work
    # (a snapshot's table requests) and stores it again without the mark
    first: bool = False
    # this life of the pipeline (made with its first cursor, written into every target's
    # position row): a row of another life — a channel deleted and made again under the
    # same name, a ZooKeeper that lost its data — is never taken for this one's
    run: str = ""
    # where each target was when this cursor was published (its position row then): a row
    # found behind it later means the target lost committed transactions
    targets: dict[str, BinlogPosition] = field(default_factory=dict, compare=False)

    def to_json(self) -> bytes:
        body: dict[str, object] = {"file": self.position.file, "pos": self.position.pos,
                                   "gtid": self.position.gtid, "process_id": self.process_id}
        if self.position.server:
            body["server"] = self.position.server
        if self.first:
            body["first"] = True
        if self.run:
            body["run"] = self.run
        if self.targets:
            body["targets"] = {name: [p.file, p.pos, p.gtid, p.server]
                               for name, p in self.targets.items()}
        return json.dumps(body).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Cursor:
        raw = json.loads(data)
        return cls(BinlogPosition(raw["file"], int(raw["pos"]), raw.get("gtid", ""),
                                  str(raw.get("server", ""))),
                   int(raw.get("process_id", 0)), bool(raw.get("first", False)),
                   str(raw.get("run", "")),
                   {name: BinlogPosition(str(at[0]), int(at[1]), *map(str, at[2:4]))
                    for name, at in raw.get("targets", {}).items()})


def server_identity(cursor: Any) -> str:
    """Which server a connection reached, as positions name it: MySQL's ``server_uuid``, or
    ``server_id@hostname:port`` (MariaDB has no server uuid; members of a replica set differ
    in server_id, unrelated servers in where they run)."""
    try:
        cursor.execute("SELECT @@server_uuid")  # MySQL: made with its data, kept across hosts
        return str(cursor.fetchone()[0])
    except pymysql.MySQLError as exc:
        if not server_answered(exc):
            raise
    cursor.execute("SELECT @@server_id, @@hostname, @@port")
    server_id, hostname, port = cursor.fetchone()
    return f"{server_id}@{hostname}:{port}"


def gtid_at(cursor: Any, position: BinlogPosition) -> str:
    """MariaDB's GTID state at ``position`` of the connected server's binlog ('' where the
    server has none: MySQL, or a position that is not an event boundary)."""
    try:
        cursor.execute("SELECT BINLOG_GTID_POS(%s, %s)", (position.file, position.pos))
        return str(cursor.fetchone()[0] or "")
    except pymysql.MySQLError as exc:
        if not server_answered(exc):
            raise  # a lost connection is no answer: the position must not lose its GTIDs
        return ""  # MySQL has no BINLOG_GTID_POS


def named(cursor: Any, at: BinlogPosition) -> BinlogPosition:
    """``at`` of the connected server, with its GTID state there and the server's name."""
    return BinlogPosition(at.file, at.pos, gtid_at(cursor, at), server_identity(cursor))


def binlog_end(cursor: Any, name: str) -> BinlogPosition:
    """The connected server's binlog end now, named (``name``: the source, for errors).
    Where MariaDB cannot say its GTID state there (BINLOG_GTID_POS is NULL after an event
    larger than max_allowed_packet earlier in the file: :func:`check_start`), the state is
    the server's own ``gtid_binlog_pos``, read before and after the end: the same twice, no
    transaction was written meanwhile (a position without its state would resume unchecked,
    and a switchover by GTID would start the domains it lacks from their beginning)."""
    for _ in range(_END_TRIES):
        before = _binlog_state(cursor)
        cursor.execute("SHOW MASTER STATUS")
        row = cursor.fetchone()
        if not row:
            raise SourceError(f"source {name}: SHOW MASTER STATUS is empty; is log_bin on?")
        at = named(cursor, BinlogPosition(str(row[0]), int(row[1])))
        if at.gtid or not before:
            return at
        if _binlog_state(cursor) == before:
            return BinlogPosition(at.file, at.pos, before, at.server)
    return at


_END_TRIES = 5  # a source committing all the time: its end with the state left unknown


def _binlog_state(cursor: Any) -> str:
    """MariaDB's GTID state at its binlog's end ('' on MySQL)."""
    try:
        cursor.execute("SELECT @@GLOBAL.gtid_binlog_pos")
    except pymysql.MySQLError as exc:
        if not server_answered(exc):
            raise
        return ""  # MySQL: no gtid_binlog_pos
    return str(cursor.fetchone()[0] or "")


def current_position(source: DataSource) -> BinlogPosition:
    """The source's binlog end now: file/pos, the GTID state there (MariaDB) and which
    server it is."""
    try:
        with connect(source) as conn, conn.cursor() as cursor:
            return binlog_end(cursor, source.name)
    except pymysql.MySQLError as exc:
        raise SourceError(f"source {source.name}: cannot read its binlog position: "
                          f"{exc.args[-1] if exc.args else exc}") from None


def end_if_known(source: DataSource, cursor: Any = None) -> BinlogPosition | None:
    """The source's binlog end now, or None where it is not known: not readable (no
    privilege, no binlog, no answer) or not in full (no file, or no server named).
    ``cursor``: one connected to the source (else a connection of its own)."""
    try:
        found = current_position(source) if cursor is None else binlog_end(cursor, source.name)
    except (pymysql.MySQLError, SourceError):
        return None
    return found if found.file and found.server else None


def position_at(source: DataSource, file: str, pos: int) -> BinlogPosition:
    """``file``/``pos`` of the source's server, with its GTID state there and its identity;
    refused (:class:`ConflictError`) unless a transaction begins there (see
    :func:`check_boundary`)."""
    at = BinlogPosition(file, pos)
    try:
        with connect(source) as conn, conn.cursor() as cursor:
            check_boundary(cursor, at, source.name)
            return BinlogPosition(file, pos, gtid_at(cursor, at), server_identity(cursor))
    except pymysql.MySQLError as exc:
        raise SourceError(f"source {source.name}: cannot read where {at} is: "
                          f"{exc.args[-1] if exc.args else exc}") from None


WRONG_OFFSET = 1220  # SHOW BINLOG EVENTS from an offset where no event begins
# events that a position may stand at: one opening a transaction, or one between them
GROUP_OPENS = frozenset({"Gtid", "Anonymous_Gtid"})
BETWEEN_GROUPS = frozenset({"Format_desc", "Previous_gtids", "Gtid_list", "Binlog_checkpoint",
                            "Rotate", "Stop"})
LOOK_AHEAD = 1000  # events read past a refused position for the next transaction's start


def check_boundary(cursor: Any, at: BinlogPosition, name: str) -> None:
    """Raise :class:`ConflictError` unless a transaction (an event group) begins at ``at``
    of the connected server's binlog: a start inside one would load only its tail (its
    first half lost, or, over a target that holds it, its tail applied twice).
    MariaDB's BINLOG_GTID_POS cannot tell (it answers a GTID state at any event's start,
    the Table_map inside a transaction too): the event there is read. A file the server
    lacks is left to the caller to say; its end is a boundary (nothing there yet)."""
    cursor.execute("SHOW BINARY LOGS")
    sizes = {str(row[0]): int(row[1]) for row in cursor.fetchall()}
    if at.file not in sizes:
        return
    if at.pos > sizes[at.file]:
        raise ConflictError(f"source {name}: {at} is past the end of {at.file} (its size "
                            f"is {sizes[at.file]}): choose a position inside it")
    try:
        cursor.execute("SHOW BINLOG EVENTS IN %s FROM %s LIMIT %s",
                       (at.file, at.pos, LOOK_AHEAD))
    except pymysql.MySQLError as exc:
        if not exc.args or exc.args[0] != WRONG_OFFSET:
            raise
        raise ConflictError(
            f"source {name}: no event begins at {at} (the server says: {exc.args[-1]}), so "
            f"no transaction does. {_how_to_find(at)}") from None
    events = [(int(row[1]), str(row[2]), str(row[5] or "")) for row in cursor.fetchall()]
    if not events or events[0][1] in GROUP_OPENS | BETWEEN_GROUPS:
        return
    plain = not _writes_gtid_events(cursor)  # MySQL before 5.7: BEGIN opens a transaction
    if plain and events[0][1] == "Query" and events[0][2].upper().startswith("BEGIN"):
        return
    after = next((pos for pos, kind, info in events[1:] if kind in GROUP_OPENS or (
        plain and kind == "Query" and info.upper().startswith("BEGIN"))), None)
    nearest = f"The next transaction begins at {at.file}:{after}. " if after else ""
    raise ConflictError(
        f"source {name}: {at} is inside a transaction (its event there is "
        f"{events[0][1]}), not where one begins: a start there would load only the "
        f"transaction's tail. {nearest}{_how_to_find(at)}")


def state_conflict(stored: str, found: str | None, inside: bool = False) -> str:
    """Why the server's GTID state ``found`` at a stored position (BINLOG_GTID_POS: None
    where no event begins) does not fit the state ``stored`` with it, '' when it does. Only
    the stored domains count (a position set by GTID may name fewer); each must be there
    with the same server and sequence. ``inside``: the position is inside a group, after
    its own DDL (CREATE … SELECT: stored with the state before the group), where the
    server's answer counts the group's GTID: one domain ahead is that group."""
    if found is None:
        return "no event begins there now"
    theirs = gtid.parse(found)
    differ = [d for d, at in gtid.parse(stored).items() if theirs.get(d) != at]
    if inside and len(differ) == 1 and differ[0] in theirs and \
            theirs[differ[0]][1] > gtid.parse(stored)[differ[0]][1]:  # (sequences may skip)
        return ""
    if differ:
        return f"the server's GTID state there is {found or 'empty'}"
    return ""


class Start(NamedTuple):
    """What :func:`check_start` read at a resume's start."""

    inside: bool  # the start is inside a group, after its own DDL
    state: str | None  # the server's GTID state there ('' where it has none), None: not asked


def check_start(cursor: Any, at: BinlogPosition, where: str, moved: str) -> Start:
    """Refuse (:class:`PositionConflictError`) a resume at ``at`` (MariaDB, a file/pos,
    with its GTID state where it has one) where the server's binlog holds another history
    now: no event begins there, or its state there (BINLOG_GTID_POS) differs from the
    stored one (a binlog reset with RESET MASTER, or a server rebuilt, keeps its name:
    ``server_id@host:port``). Its ``inside`` is True when the start is inside a group, after
    its own DDL: the event there neither opens a group nor stands between two (a CREATE …
    SELECT's rows come before any GTID event); its ``state`` is the server's answer, where
    it was asked (it reads the file up to the offset: a reader need not ask again). A file
    the server lacks is left to the stream's own refusal (purged). ``where`` names the
    pipeline and its source, ``moved`` the pipeline as the CLI does."""
    if not at.file or at.pos < 4:
        return Start(False, None)
    cursor.execute("SHOW BINARY LOGS")
    sizes = {str(r[0]): int(r[1]) for r in cursor.fetchall()}
    if at.file not in sizes:
        return Start(False, None)
    # a file's start (where an idle pipeline's rows follow a rotation) is between groups,
    # its state the file's GTID list: a reset binlog's file of that name has another
    kind = "" if at.pos == 4 else event_at(cursor, at, sizes[at.file])
    inside = kind is not None and kind not in GROUP_OPENS | BETWEEN_GROUPS | {""}
    why = "no event begins there now" if kind is None else ""
    found: str | None = None
    if kind is not None and at.gtid:
        try:
            cursor.execute("SELECT BINLOG_GTID_POS(%s, %s)", (at.file, at.pos))
        except pymysql.MySQLError as exc:
            if not server_answered(exc):
                raise
            return Start(inside, "")  # MySQL: no BINLOG_GTID_POS
        row = cursor.fetchone()
        if row[0] is None:
            # NULL is also MariaDB's answer where it cannot read the file from its start up
            # to the offset: an event before it larger than this connection's
            # max_allowed_packet (a row of a 16 MiB blob, updated: 32 MiB) fails its scan
            # (gtid_state_from_pos, LOG_READ_TOO_LARGE) at every later offset of the file.
            # An event begins there (read above): the state there is unknown, not another
            log.warning("event=resume_history_unchecked position=%s:%d gtid=%s where=%r "
                        "reason=BINLOG_GTID_POS_is_NULL_at_an_event", at.file, at.pos,
                        at.gtid, where)  # history
            return Start(inside, "")
        found = str(row[0])
        why = state_conflict(at.gtid, found, inside)
    if not why:
        return Start(inside, found)
    raise PositionConflictError(
        f"{where}: it would resume at {at.file}:{at.pos}"
        + (f" with GTID state {at.gtid}" if at.gtid else "") +
        f", but {why}: the source's binlog there is another history now (reset with RESET "
        "MASTER, or the server rebuilt, since the position was written). Nothing was read "
        "from it. Find the GTID state the targets hold and set it (setl position set "
        f"{moved} --gtid STATE), or copy the paired tables again and set where it "
        f"starts (setl position set {moved} --latest --replay)")


def event_at(cursor: Any, at: BinlogPosition, size: int) -> str | None:
    """The type of the event that begins at ``at`` in the connected server's binlog file of
    ``size`` bytes ('' at its end: nothing there yet), None where none begins. SHOW BINLOG
    EVENTS reads from the offset itself (a header there, its end where the next event
    begins), not the file before it."""
    if at.pos == size:
        return ""
    if at.pos > size:
        return None
    for limit in (2, 1):  # (the next event may be over max_allowed_packet itself)
        try:
            cursor.execute("SHOW BINLOG EVENTS IN %s FROM %s LIMIT %s", (at.file, at.pos, limit))
        except pymysql.MySQLError as exc:
            if not exc.args or exc.args[0] != WRONG_OFFSET:
                raise
            continue
        rows = cursor.fetchall()
        if not rows or int(rows[0][1]) != at.pos:
            return None
        end = int(rows[0][4])  # the header's end, where the next event begins if it is one
        if (int(rows[1][1]) == end) if len(rows) > 1 else at.pos < end <= size:
            return str(rows[0][2])
        return None
    return None


def _how_to_find(at: BinlogPosition) -> str:
    return ("Choose where a transaction begins, its GTID event: mariadb-binlog "
            f"--start-position=4 {at.file} shows '# at N' before each GTID event, and SHOW "
            f"BINLOG EVENTS IN '{at.file}' lists each Gtid (MySQL: or Anonymous_Gtid) event "
            "with its Pos; or start by GTID instead")


def _writes_gtid_events(cursor: Any) -> bool:
    """Whether the server opens every transaction with a GTID event: MariaDB (10.0 on) and
    MySQL 5.7 on (an Anonymous_Gtid event without GTIDs)."""
    cursor.execute("SELECT VERSION()")
    version = str(cursor.fetchone()[0])
    if "mariadb" in version.lower():
        return True
    numbers = [int(part) for part in version.split("-")[0].split(".")[:2] if part.isdigit()]
    return tuple(numbers) >= (5, 7)


def first_cursor(pipeline: Pipeline, source: DataSource) -> Cursor:
    """Where a pipeline without a cursor begins: the source's position now for ``latest``
    and ``snapshot``, else its configured ``start:``."""
    params = pipeline.params
    run = uuid.uuid4().hex
    if params.startup in (StartupMode.LATEST, StartupMode.SNAPSHOT) or \
            params.start_position is None:
        return Cursor(current_position(source), first=True, run=run)
    start = params.start_position
    if start.file and not start.server:  # named as the server read now, with its GTIDs
        # there: a switch before the first batch must not read another server's offset
        start = position_at(source, start.file, start.pos)
    return Cursor(start, first=True, run=run)


def fix_start(client: KazooClient, path: str, pipeline: Pipeline,
              source: DataSource) -> Cursor | None:
    """Store the pipeline's first cursor at ``path`` unless it has one; the cursor stored
    now, or None when there was one already."""
    if client.exists(path):
        return None
    cursor = first_cursor(pipeline, source)
    stored, made, _ = store_first(client, path, cursor)
    return stored if made else None  # (else a runner stored one meanwhile: it stands)


def store_first(client: KazooClient, path: str, cursor: Cursor) -> tuple[Cursor, bool, int]:
    """Store a first ``cursor`` at ``path`` unless one is there: never over another (the
    manager's fix of ``latest`` at the start, or a runner's, whichever came first, is the
    start: a later one would skip what was written between them). The cursor stored there,
    whether it is this one, and the znode's version holding it."""
    try:
        client.create(path, cursor.to_json(), makepath=True)
    except NodeExistsError:
        try:
            data, stat = client.get(path)
        except NoNodeError:  # deleted meanwhile (the channel removed): made again
            return store_first(client, path, cursor)
        return (Cursor.from_json(data) if data else None) or cursor, False, stat.version
    return cursor, True, 0


def load(client: KazooClient, path: str) -> Cursor | None:
    try:
        data, _ = client.get(path)
    except NoNodeError:
        return None
    return Cursor.from_json(data) if data else None
