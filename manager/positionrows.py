"""A pipeline's position row on a target, read and moved for ``setl position`` and a channel's
delete: ``retl.retl_position`` on a MySQL target, the tables' stamps in a lake.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import pymysql

from shared import lakes
from shared.endpoint import connect
from shared.errors import ConflictError, SourceError
from shared.model import BinlogPosition, DataSource
from shared.retl import upgrade_position_table

T = TypeVar("T")

BAD_FIELD = 1054  # an unknown column
Row = tuple[BinlogPosition, int, int]  # a target's position row: position, processId, epoch


def read_row(target: DataSource, pipeline_id: str) -> Row | None:
    """The pipeline's position row on ``target`` (None: no row, or no position yet); of a
    lake, the earliest position of its tables."""
    if target.type == "delta":
        return _lake(target, lambda: lakes.position_of(lakes.Lake.of(target), pipeline_id))
    try:
        with connect(target) as conn, conn.cursor() as cursor:
            try:
                cursor.execute("SELECT binlog_file, binlog_pos, process_id, owner_epoch, gtid, "
                               "source_server FROM retl.retl_position WHERE pipeline_id = %s",
                               (pipeline_id,))
            except pymysql.MySQLError as exc:
                if exc.args and exc.args[0] in (1049, 1146):  # no retl schema: nothing loaded
                    return None
                if not exc.args or exc.args[0] != BAD_FIELD:
                    raise
                cursor.execute("SELECT binlog_file, binlog_pos, process_id, owner_epoch, gtid, "
                               "'' FROM retl.retl_position WHERE pipeline_id = %s",
                               (pipeline_id,))  # a table of an older version
            row = cursor.fetchone()
    except pymysql.MySQLError as exc:
        raise SourceError(f"target {target.name}: cannot read its position row: "
                          f"{exc.args[-1] if exc.args else exc}") from None
    if row is None or not row[0]:
        return None
    return BinlogPosition(str(row[0]), int(row[1]), str(row[4] or ""), str(row[5] or "")), \
        int(row[2]), int(row[3])


def move_row(target: DataSource, pipeline_id: str, run: str,
              to: BinlogPosition | None, purge: bool = False) -> None:
    """The row becomes this run's; with ``to``, it moves there (a replay), or holds no
    position when ``to`` has no file (a GTID start, a reset: the target holds nothing of
    it). Its owner epoch goes one up: a runner of the pipeline still writing (its ZooKeeper
    session lost, so no mainstem said it was there) is fenced at its next batch instead of
    writing its place over the one set (a replay asked for was skipped). ``purge``: a
    deleted channel's row goes (its name may come back as another channel)."""
    where = "WHERE pipeline_id = %s"
    if target.type == "delta":
        if to is not None and to.file:
            raise ConflictError(lake_moved_back(target.name))
        _lake(target, lambda: lakes.restamp(lakes.Lake.of(target), pipeline_id, run, to))
        return
    try:
        with connect(target, autocommit=True) as conn, conn.cursor() as cursor:
            upgrade_position_table(cursor)  # a row of an older version: no column yet
            if to is None:
                cursor.execute("UPDATE retl.retl_position SET run = %s, owner_epoch = "
                               f"owner_epoch + 1 {where}", (run, pipeline_id))
            elif purge:
                cursor.execute(f"DELETE FROM retl.retl_position {where}", (pipeline_id,))
            elif not to.file:  # (kept without a position, not deleted: a runner still
                cursor.execute(  # writing would make it again at its own place)
                    "UPDATE retl.retl_position SET binlog_file = '', binlog_pos = 0, gtid = "
                    f"'', source_server = '', run = %s, owner_epoch = owner_epoch + 1 {where}",
                    (run, pipeline_id))
            else:
                cursor.execute("UPDATE retl.retl_position SET binlog_file = %s, binlog_pos = "
                               "%s, gtid = %s, source_server = %s, run = %s, owner_epoch = "
                               f"owner_epoch + 1 {where}",
                               (to.file, to.pos, to.gtid, to.server, run, pipeline_id))
    except pymysql.MySQLError as exc:
        raise SourceError(f"target {target.name}: cannot move the position row of "
                          f"{pipeline_id}: {exc.args[-1] if exc.args else exc}") from None


def lake_moved_back(name: str) -> str:
    return (f"target {name} is a lake: its tables cannot be moved back to an earlier "
            "position (their files hold what they hold). Move the lake's directory away "
            "and copy the tables again (start: snapshot), or choose a later place")


def _lake(target: DataSource, read: Callable[[], T]) -> T:
    """``read`` on a lake's tables, which must be reachable from the manager's machine (a
    directory it sees, or the object store with the credentials its rules give)."""
    if target.location.startswith("/") and not os.path.isdir(target.location):
        return None  # type: ignore[return-value] - nothing was ever written there
    try:
        return read()
    except OSError as exc:
        raise SourceError(f"target {target.name}: cannot read the lake at "
                          f"{target.location}: {exc}") from None
