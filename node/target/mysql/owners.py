"""The pipeline's position row on a target and the owners that write it: the row's SQL
(lock, claim, write), whether a batch is applied, and a stale owner's open transaction
ended by the owner that replaced it.

A node frozen in the middle of a load transaction (SIGSTOP, a long GC or VM pause) keeps its
target connection and that transaction open: its lock on the pipeline's position row would
hold the new owner back until the frozen node wakes, or until the server's ``wait_timeout``
(hours). So each Load connection registers itself in ``retl.retl_owner`` with the owner
epoch it writes under, and a load transaction waits for the position row's lock only
``LOCK_WAIT_S``: when that runs out, the connections registered under an older epoch of the
pipeline that are still there are killed (the user may kill its own), their transactions
roll back, and the load is tried again. A new owner's claim ends them before it even
locks the row (it does not wait for a frozen owner's lock first), and again after it (an
older owner connected meanwhile). Fencing is unchanged, and does not rest on the kill: the
epoch is written and checked under the row's lock. An older owner that connects again and
commits before the claim does wrote while the row was still its own, and the claim reads
the position it left; after the claim, its next transaction finds a newer epoch.

A claim or takeover whose connection was lost is made once more on a new connection: a
claim writes this owner's epoch (twice is once), a takeover is a compare-and-set under the
lock (made again after a commit whose answer was lost, it finds the row moved).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pymysql

from node.changes import Batch
from shared import gtid
from shared.errors import ConfigError, FencedError, LoadError, PositionConflictError
from shared.model import BinlogPosition

log = logging.getLogger("setl.node.target.mysql.owners")
LOCK_WAIT_S = 5  # seconds a load waits for its position row before it looks for a zombie
# a target's error codes, as Load and the copies beside it treat them
LOCK_WAIT_TIMEOUT = 1205
RETRYABLE = {LOCK_WAIT_TIMEOUT, 1213}  # lock wait timeout, deadlock: again
CLIENT_ERRORS = 2000  # codes from here on are the connection's, never a row's fault
# the target's errors that mean "this row is refused" and undo only its statement: the ones
# skip_load_exception may skip. Any other (1206 lock table full and 1180 commit failures roll
# back the whole transaction; 1317 KILL QUERY and 1969 max_statement_time interrupt it; an
# unknown table or column refuses every row) is retried or stops the pipeline.
ROW_REFUSED = {
    1048,  # column cannot be null
    1062, 1169,  # duplicate entry, unique constraint
    1216, 1217, 1451, 1452,  # foreign key: no parent, a child remains
    1264, 1265, 1292, 1366, 1406, 1411,  # out of range, truncated, incorrect or too long values
    1364,  # no default value
    1644,  # a trigger's SIGNAL of its own (SQLSTATE 45000)
    3819, 4025,  # CHECK constraint (MySQL, MariaDB)
}

OWNER_DDL = """CREATE TABLE IF NOT EXISTS retl.retl_owner (
  pipeline_id VARCHAR(191) NOT NULL,
  connection_id BIGINT UNSIGNED NOT NULL,
  owner_epoch BIGINT NOT NULL,
  registered_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (pipeline_id, connection_id)
) ENGINE=InnoDB"""


def live_writers(cursor: Any, pipeline_id: str, epoch: int) -> list[int]:
    """The connections registered as owners of ``pipeline_id`` under ``epoch`` or a newer
    one that are still connected (other than this one)."""
    cursor.execute("SELECT o.connection_id FROM retl.retl_owner o JOIN "
                   "information_schema.PROCESSLIST p ON p.ID = o.connection_id WHERE "
                   "o.pipeline_id = %s AND o.owner_epoch >= %s AND o.connection_id <> "
                   "CONNECTION_ID()", (pipeline_id, epoch))
    return sorted(int(row[0]) for row in cursor.fetchall())


# the position row of a batch, written in its transaction under this owner's epoch
POSITION_WRITE = (
    "INSERT INTO retl.retl_position (pipeline_id, process_id, binlog_file, binlog_pos, gtid, "
    "owner_epoch, run, source_server) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON DUPLICATE "
    "KEY UPDATE process_id = VALUES(process_id), binlog_file = VALUES(binlog_file), "
    "binlog_pos = VALUES(binlog_pos), gtid = VALUES(gtid), owner_epoch = VALUES(owner_epoch), "
    "run = VALUES(run), source_server = VALUES(source_server), "
    "updated_at = CURRENT_TIMESTAMP(6)")


# a new owner's fence, written before it reads the row (Loader.claim): its epoch, and a
# row without a position (of this run) where nothing was loaded yet
CLAIM = ("INSERT INTO retl.retl_position (pipeline_id, process_id, binlog_file, binlog_pos, "
         "owner_epoch, run) VALUES (%s, 0, '', 0, %s, %s) ON DUPLICATE KEY UPDATE "
         "owner_epoch = VALUES(owner_epoch)")


def claim(conn: Any, pipeline_id: str, epoch: int, run: str, name: str) -> Any:
    """Write this owner's ``epoch`` into the pipeline's position row on target ``name``
    (committed), unless a newer owner of this life of the pipeline wrote it
    (:class:`FencedError`); the row as it was (None: there was none). Writing the same
    epoch twice is writing it once: a claim whose connection was lost is made again."""
    with conn.cursor() as cursor:
        cursor.execute(position_lock(conn), (pipeline_id,))
        row = cursor.fetchone()
        # a row of another life of the pipeline (its run differs) has an epoch of a
        # ZooKeeper history that may be gone: not a fence of this life
        ours = not row or not row[4] or not run or row[4] == run
        if row and ours and int(row[2]) > epoch:
            conn.rollback()
            raise FencedError(
                f"pipeline {pipeline_id}: target {name} is written by a newer owner (epoch "
                f"{row[2]} > {epoch}); this node lost the pipeline and stops", name,
                int(row[2]))
        cursor.execute(CLAIM, (pipeline_id, epoch, run))
    conn.commit()
    return row


def adopt(conn: Any, pipeline_id: str, found: int) -> list[int] | None:
    """Under the position row's lock: when its epoch is still ``found`` and no connection
    registered under it (or a newer one) is connected, move it to ``found + 1`` with this
    connection registered under that (committed; None). Else the live connections ([]: the
    row moved meanwhile). A compare-and-set: made again after a commit whose answer was
    lost, it finds the row moved and moves nothing."""
    with conn.cursor() as cursor:
        cursor.execute(position_lock(conn), (pipeline_id,))
        row = cursor.fetchone()
        live = [] if not row or int(row[2]) != found else \
            live_writers(cursor, pipeline_id, found)
        if not row or int(row[2]) != found or live:
            conn.rollback()
            return live
        cursor.execute(REGISTER, (pipeline_id, found + 1))
        cursor.execute("UPDATE retl.retl_position SET owner_epoch = %s WHERE pipeline_id = %s "
                       "AND owner_epoch = %s", (found + 1, pipeline_id, found))
    conn.commit()
    return None


def position_lock(conn: Any) -> str:
    """The query that locks the pipeline's position row, waiting ``LOCK_WAIT_S`` at most
    (MariaDB's ``WAIT``, MySQL's hint)."""
    sql = ("SELECT {hint}binlog_file, binlog_pos, owner_epoch, process_id, run, gtid, "
           "source_server FROM retl.retl_position WHERE pipeline_id = %s FOR UPDATE{wait}")
    if "mariadb" in str(conn.get_server_info()).lower():
        return sql.format(hint="", wait=f" WAIT {LOCK_WAIT_S}")
    return sql.format(hint=f"/*+ SET_VAR(innodb_lock_wait_timeout={LOCK_WAIT_S}) */ ",
                      wait="")


def position_share(conn: Any) -> str:
    """The query that holds the pipeline's position row in share mode (copies beside a
    batch, :mod:`node.target.mysql.copies`): several at once, and never while an owner writes it."""
    return position_lock(conn).replace("FOR UPDATE", "LOCK IN SHARE MODE")


def register(cursor: Any, pipeline_id: str, epoch: int) -> None:
    """This connection writes ``pipeline_id`` under ``epoch`` (committed by the caller);
    rows of connections that are gone are cleared."""
    cursor.execute(OWNER_DDL)
    cursor.execute("DELETE FROM retl.retl_owner WHERE pipeline_id = %s AND connection_id NOT "
                   "IN (SELECT ID FROM information_schema.PROCESSLIST)", (pipeline_id,))
    cursor.execute(REGISTER, (pipeline_id, epoch))


# this connection as an owner of the pipeline under an epoch (no DDL: inside a transaction)
REGISTER = ("INSERT INTO retl.retl_owner (pipeline_id, connection_id, owner_epoch) VALUES "
            "(%s, CONNECTION_ID(), %s) ON DUPLICATE KEY UPDATE owner_epoch = "
            "VALUES(owner_epoch)")


def end_stale(cursor: Any, pipeline_id: str, epoch: int, target: str) -> int:
    """Kill the connections of owners older than ``epoch`` that are still there (their open
    transactions roll back); return how many. Run outside a transaction."""
    cursor.execute("SELECT o.connection_id, o.owner_epoch FROM retl.retl_owner o JOIN "
                   "information_schema.PROCESSLIST p ON p.ID = o.connection_id WHERE "
                   "o.pipeline_id = %s AND o.owner_epoch < %s AND o.connection_id <> "
                   "CONNECTION_ID()", (pipeline_id, epoch))
    stale = [(int(row[0]), int(row[1])) for row in cursor.fetchall()]
    killed = 0
    for connection_id, their_epoch in stale:
        try:
            cursor.execute(f"KILL CONNECTION {connection_id}")
            killed += 1
            log.warning("event=stale_owner_connection_killed pipeline=%s target=%s "
                        "connection=%d epoch=%d our_epoch=%d", pipeline_id, target,
                        connection_id, their_epoch, epoch)
        except Exception as exc:  # gone meanwhile, or another user's: the wait goes on
            log.warning("event=stale_owner_kill_failed pipeline=%s target=%s connection=%d "
                        "error=%r", pipeline_id, target, connection_id, exc)
    return killed


def row_position(row: tuple[Any, ...]) -> BinlogPosition:
    """The position a row of :func:`position_lock` holds."""
    return BinlogPosition(str(row[0]), int(row[1]), str(row[5] or ""), str(row[6] or ""))


def applied(row: tuple[Any, ...], batch: Batch, where: str) -> bool:
    """Whether the target already has the batch: its position row is at or past the batch's
    end (compared by GTID when the row names another server: a switched source). Select
    cuts batches at every target's row (:func:`node.cursor.resume`), so a row inside a batch
    means the batch would be partly applied again: that stops the load."""
    if not row[0]:
        return False  # claimed by an owner, nothing loaded yet
    held = row_position(row)
    try:
        if gtid.compare(held, batch.end) >= 0:
            return True
        inside = gtid.compare(held, batch.start) > 0 if batch.start.file or \
            batch.start.gtid else False
    except PositionConflictError as exc:
        raise LoadError(f"{where}: the target's position row ({held}) and this batch "
                        f"({batch.start} to {batch.end}) cannot be compared: {exc}; the "
                        "pipeline stops rather than guess") from None
    if inside:
        raise LoadError(
            f"{where}: the target holds the source's transactions up to {held}, inside "
            f"this batch ({batch.start} to {batch.end}); writing it would apply part of it "
            "twice, so the pipeline stops. Restart it: it resumes from the target's position")
    return False


def one_server(pipeline_id: str, connections: dict[str, Any]) -> None:
    """Refuse two target datasources that are one server (two names, or ``localhost`` and
    ``127.0.0.1``): they would share the pipeline's position row, and the second to load a
    batch would find it loaded by the first and write nothing. Each takes a lock of its own
    name; a lock another one sees taken is on its server."""
    if len(connections) < 2:
        return
    names = {name: f"setl:{uuid.uuid4().hex}" for name in connections}
    taken: list[str] = []
    try:
        try:
            for name, conn in connections.items():
                with conn.cursor() as cursor:
                    cursor.execute("SELECT GET_LOCK(%s, 0)", (names[name],))
                taken.append(name)
        except pymysql.MySQLError as exc:
            if (exc.args[0] if exc.args else 0) != NOT_SUPPORTED:
                raise
            # a Galera node before MDEV-31325 takes no GET_LOCK: the servers say who they are
            _one_by_identity(pipeline_id, connections)
            return
        for name, conn in connections.items():
            others = [other for other in connections if other != name]
            with conn.cursor() as cursor:
                cursor.execute("SELECT " + ", ".join(["IS_USED_LOCK(%s)"] * len(others)),
                               [names[other] for other in others])
                seen = cursor.fetchone()
            same = next((other for other, held in zip(others, seen, strict=True)
                         if held is not None), None)
            if same is not None:
                raise ConfigError(_shared(pipeline_id, same, name))
    finally:
        for name in taken:
            with connections[name].cursor() as cursor:
                cursor.execute("SELECT RELEASE_LOCK(%s)", (names[name],))
        for conn in connections.values():
            conn.commit()


NOT_SUPPORTED = 1235  # ER_NOT_SUPPORTED_YET


def _one_by_identity(pipeline_id: str, connections: dict[str, Any]) -> None:
    seen: dict[tuple[Any, ...], str] = {}
    for name, conn in connections.items():
        with conn.cursor() as cursor:
            cursor.execute("SELECT @@hostname, @@port, @@datadir, @@server_id")
            identity = tuple(cursor.fetchone())
        if identity in seen:
            raise ConfigError(_shared(pipeline_id, seen[identity], name))
        seen[identity] = name


def _shared(pipeline_id: str, one: str, other: str) -> str:
    return (f"pipeline {pipeline_id}: targets {one} and {other} are one server, so they "
            "would share the pipeline's position row in retl.retl_position and one of them "
            "would be skipped as loaded; give the pipeline one datasource per target server "
            "(pairs name their databases), or put one of them in a pipeline of its own")
