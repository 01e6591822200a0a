"""Snapshot lines loaded beside the batch's transaction, several at once.

A batch's transaction on a target is one connection: its chunk copies would load one after
another inside it. The lines of a window (:mod:`node.extract.copylines`) go instead *right
after* the batch's transaction commits, each chunk in a transaction of its own on one of a
few connections of this pipeline, in parallel, and all of them before the next batch. That
keeps every guarantee:

- **No row goes back.** A line holds its row as it was at its window's high watermark; Extract
  left out every key the stream (or a row read for the free door) changed from the window's
  low watermark to the end of the batch, so the batch's transaction never holds a newer state
  of a line's key, and the next batch waits until the lines are in.
- **A reader sees whole source transactions.** When the lines commit, the target is at the
  batch's end; a line writes the row as it is there at that point (it is not newer, it is
  not older), or a row not copied yet (that was not there).
- **Exactly once, fencing.** A copy transaction first takes the pipeline's position row in
  share mode and goes on only if it is still this batch's, under this owner's epoch; a newer
  owner's batch waits for that lock, and a copy finding another position or a newer epoch
  stops. A copy that never committed (a crash, a kill) leaves its chunks not done: they are
  read again in a later window. REPLACE makes a second load of a chunk write the same rows.

With ``snapshot_skip_binlog`` the copy connections set ``sql_log_bin = 0`` (the privilege
``BINLOG ADMIN`` or ``SUPER`` is needed): the copies do not go to the target's binlog, as
``myloader`` does by default — so replicas of the target do not get them either.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pymysql

from node.changes import Batch
from node.jobs import Unit
from node.target.mysql import loaddata, localdata, owners
from node.target.mysql.owners import CLIENT_ERRORS, RETRYABLE
from shared import endpoint as endpoints
from shared.errors import FencedError, LoadError
from shared.model import DataSource, PipelineParams
from shared.retry import RetryPolicy

log = logging.getLogger("setl.node.target.mysql.copies")


class Copies:
    """The copy connections of one pipeline's Loader, by target."""

    def __init__(self, pipeline_id: str, targets: dict[str, DataSource],
                 params: PipelineParams, epoch: int, stop: threading.Event,
                 init_command: str) -> None:
        self.pipeline_id, self.targets, self.params = pipeline_id, targets, params
        self.epoch, self.stop = epoch, stop
        self.init_command = init_command + (", sql_log_bin = 0"
                                            if params.snapshot_skip_binlog else "")
        self.retry = RetryPolicy(max_tries=5, delay_s=0.1, max_delay_s=1.0)
        self._idle: dict[str, queue.SimpleQueue[pymysql.Connection]] = {}
        self._all: list[pymysql.Connection] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max(1, params.snapshot_parallelism),
                                        thread_name_prefix=f"copy-{pipeline_id}")

    def load(self, batch: Batch, units: list[Unit]) -> int:
        """Load the batch's copy units (its transactions committed); the rows written."""
        futures = [self._pool.submit(self._unit, batch, unit) for unit in units]
        return sum(future.result() for future in futures)

    def _unit(self, batch: Batch, unit: Unit) -> int:
        waits = self.retry.delays()
        where = (f"stage load (copy), pipeline {self.pipeline_id}, processId "
                 f"{batch.process_id}, position {batch.end}, target {unit.datasource}, table "
                 f"{unit.schema}.{unit.table}")
        for attempt in range(1, len(waits) + 2):
            conn = None
            try:
                conn = self._take(unit.datasource)
                written = self._transaction(conn, batch, unit, where)
                self._give(unit.datasource, conn)
                return written
            except pymysql.MySQLError as exc:
                self._drop(conn)
                code = exc.args[0] if exc.args else 0
                if (code in RETRYABLE or code >= CLIENT_ERRORS) and attempt <= len(waits) \
                        and not self.stop.is_set():
                    log.warning("event=copy_retry pipeline=%s process_id=%d target=%s "
                                "table=%s.%s attempt=%d error=%r", self.pipeline_id,
                                batch.process_id, unit.datasource, unit.schema, unit.table,
                                attempt, exc.args[-1])
                    if not self.stop.wait(waits[attempt - 1]):
                        continue
                raise LoadError(f"{where}: {exc.args[-1] if exc.args else exc}") from None
            except BaseException:
                self._drop(conn)
                raise
        raise AssertionError("unreachable")

    def _transaction(self, conn: pymysql.Connection, batch: Batch, unit: Unit,
                     where: str) -> int:
        with conn.cursor() as cursor:
            cursor.execute(owners.position_share(conn), (self.pipeline_id,))
            row = cursor.fetchone()
            if row is None or int(row[2]) != self.epoch or \
                    (str(row[0]), int(row[1])) != (batch.end.file, batch.end.pos):
                conn.rollback()
                raise FencedError(
                    f"{where}: the target's position is "
                    f"{f'{row[0]}:{row[1]} (owner epoch {row[2]})' if row else 'not there'}, "
                    f"not this batch's under epoch {self.epoch}: another owner has the "
                    "pipeline; this node stops (the copy's chunks are read again)")
            written = 0
            for sql in unit.sqls:
                if sql.inline:  # a multi-row REPLACE: its tuples end the statement
                    cursor.execute(sql.text.encode() + (sql.data or b""))
                else:
                    localdata.load(cursor, loaddata.FILE, sql.text, sql.data or b"")
                written += sql.rows
        conn.commit()
        return written

    def _take(self, name: str) -> pymysql.Connection:
        with self._lock:
            idle = self._idle.setdefault(name, queue.SimpleQueue())
        try:
            return idle.get_nowait()
        except queue.Empty:
            pass
        conn = endpoints.connect(self.targets[name], autocommit=False, local_infile=True,
                                 init_command=self.init_command)
        try:
            with conn.cursor() as cursor:
                owners.register(cursor, self.pipeline_id, self.epoch)  # a newer owner ends it
            conn.commit()
        except BaseException:
            conn.close()
            raise
        with self._lock:
            self._all.append(conn)
        return conn

    def _give(self, name: str, conn: pymysql.Connection) -> None:
        with self._lock:
            idle = self._idle.get(name)
        if idle is None:  # closed meanwhile
            self._drop(conn)
        else:
            idle.put(conn)

    def _drop(self, conn: Any) -> None:
        if conn is None:
            return
        with self._lock:
            if conn in self._all:
                self._all.remove(conn)
        try:
            conn.close()
        except pymysql.MySQLError:
            pass

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            conns, self._all, self._idle = self._all, [], {}
        for conn in conns:
            try:
                conn.close()
            except pymysql.MySQLError:
                pass
