"""A Load connection's session on a target, and what switches it within a transaction.

- :data:`SESSION`, :data:`COPY_SESSION`, :data:`TWO_WAY_SESSION`: the settings a
  connection of :class:`~node.target.mysql.loader.Loader` (or of a snapshot's copies) starts
  with; :func:`connect` opens one, its position table ready and its owner registered.
- :func:`set_checks`, :func:`unchecked`: foreign_key_checks switched off inside a batch's
  transaction for the rows the source wrote with them off, and on again.
- :func:`again`: whether a claim or a take-over goes once more on a new connection.
"""

from __future__ import annotations

import logging
import threading

import pymysql
from pymysql.constants import CLIENT

from node.changes import Batch
from node.jobs import unchecked_event
from node.target.mysql import owners
from node.target.mysql.alone import SQL_MODE
from node.target.mysql.together import Together
from shared import endpoint as endpoints
from shared.model import DataSource
from shared.retl import TARGET_DDL, upgrade_position_table

log = logging.getLogger("setl.node.target.mysql.loader")
# TIMESTAMP values come from the binlog in UTC; every value a source holds is taken as it is;
# the target's foreign keys redo the cascades the binlog lacks (a server's default of
# foreign_key_checks = 0 kept the rows silently; unique_checks = 0 lets InnoDB miss the
# duplicate an upsert must find). A DDL's own values are set around it (ddlsession.run_under).
SESSION = (f"SET time_zone = '+00:00', sql_mode = '{SQL_MODE}', foreign_key_checks = 1, "
           "unique_checks = 1")
# a snapshot's copies write the source's state as a window read it: checked against rows of
# other tables copied or not yet, they would be refused, and a REPLACE of a parent row (a
# delete, then an insert) would cascade to its children (node.target.mysql.copies)
COPY_SESSION = SESSION.replace("foreign_key_checks = 1", "foreign_key_checks = 0")
# a two-way load's conflict check locks the keys it reads, also those with no row yet (a gap
# lock), so a target user's insert cannot land between the check and the write; under READ
# COMMITTED (a server's or a user's default) the check of a missing key locks nothing
TWO_WAY_SESSION = "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"


def connect(target: DataSource, pipeline_id: str, epoch: int, two_way: bool
            ) -> pymysql.Connection:
    """A new connection of Load to ``target``, in :data:`SESSION` (and
    :data:`TWO_WAY_SESSION` for a two-way load), the retl tables there and up to date, the
    owner of ``epoch`` registered."""
    conn = endpoints.connect(target, autocommit=False, local_infile=True,
                             init_command=SESSION,
                             client_flag=CLIENT.MULTI_STATEMENTS)
    with conn.cursor() as cursor:
        if two_way:
            cursor.execute(TWO_WAY_SESSION)
        for statement in TARGET_DDL:
            cursor.execute(statement)
        upgrade_position_table(cursor)
        owners.register(cursor, pipeline_id, epoch)
    conn.commit()
    return conn


def again(exc: pymysql.MySQLError, done: bool, what: str, pipeline_id: str, name: str,
          stop: threading.Event) -> bool:
    """Whether ``what`` goes once more on a new connection: its connection was lost,
    for the first time, and the pipeline is not stopping."""
    if done or not endpoints.lost(exc) or stop.is_set():
        return False
    log.info("event=%s_reconnect pipeline=%s target=%s error=%r", what, pipeline_id,
             name, exc.args[-1])
    return True


def set_checks(unchecked: set[str], name: str, together: Together, checks: int) -> None:
    """Set the session's foreign_key_checks inside the batch's transaction: off for the
    runs of tables with foreign keys whose changes the source made with them off, or
    that a window read; on for the rest (the target's foreign keys redo the cascades the
    binlog does not carry). ``unchecked``: the targets whose session may have them off."""
    if not checks:  # a transaction that fails before setting them back leaves them
        unchecked.add(name)  # off: the next one starts by knowing it
    together.add(None, f"SET SESSION foreign_key_checks = {checks}")


def unchecked(batch: Batch) -> frozenset[int] | None:
    """The places of the batch's rows events the source wrote with foreign_key_checks off
    (as the planner numbers them), or None: none."""
    events = (data for txn in batch.transactions for _, data in txn.events)
    off = frozenset(place for place, data in enumerate(events) if unchecked_event(data))
    return off or None
