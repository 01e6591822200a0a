"""Load: write a merged batch into each target database in one transaction.

In the same transaction the pipeline's applied position is written to
``retl.retl_position`` on that target, so a batch that was already applied (a replay after a
crash between commit and cursor publish) is recognised and skipped: the effect on the target
is exactly once, and a target row never goes back to an older value.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pymysql

from node import source as endpoints
from node.changes import Batch, TargetChange
from node.merge import TableWrites, merge
from shared.errors import LoadError
from shared.model import BinlogPosition, DataSource, PipelineParams

log = logging.getLogger("setl.node.loader")
RETRYABLE = {1205, 1213}  # lock wait timeout, deadlock
POSITION_DDL = [
    "CREATE DATABASE IF NOT EXISTS retl",
    """CREATE TABLE IF NOT EXISTS retl.retl_position (
         pipeline_id VARCHAR(191) NOT NULL PRIMARY KEY,
         process_id BIGINT NOT NULL,
         binlog_file VARCHAR(255) NOT NULL,
         binlog_pos BIGINT NOT NULL,
         gtid VARCHAR(1024) NOT NULL DEFAULT '',
         updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
       ) ENGINE=InnoDB""",
]


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def sql_value(value: Any) -> Any:
    """A binlog value as a PyMySQL parameter."""
    if isinstance(value, set | frozenset):
        return ",".join(sorted(value))
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return value


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def position_key(position: BinlogPosition) -> tuple[str, int]:
    return position.file, position.pos


class Loader:
    """Writes batches of one pipeline; one connection per target data source."""

    def __init__(self, pipeline_id: str, targets: dict[str, DataSource],
                 params: PipelineParams) -> None:
        self.pipeline_id, self.targets, self.params = pipeline_id, targets, params
        self._connections: dict[str, pymysql.Connection] = {}

    def _connection(self, name: str) -> pymysql.Connection:
        conn = self._connections.get(name)
        if conn is None or not conn.open:
            # TIMESTAMP values come from the binlog in UTC
            conn = endpoints.connect(self.targets[name], autocommit=False,
                                     init_command="SET time_zone = '+00:00'")
            with conn.cursor() as cursor:
                for statement in POSITION_DDL:
                    cursor.execute(statement)
            conn.commit()
            self._connections[name] = conn
        return conn

    def close(self) -> None:
        for conn in self._connections.values():
            try:
                conn.close()
            except pymysql.MySQLError:
                pass
        self._connections.clear()

    def applied_position(self, name: str) -> BinlogPosition | None:
        conn = self._connection(name)
        with conn.cursor() as cursor:
            cursor.execute("SELECT binlog_file, binlog_pos, gtid FROM retl.retl_position "
                           "WHERE pipeline_id = %s", (self.pipeline_id,))
            row = cursor.fetchone()
        conn.commit()
        return BinlogPosition(row[0], int(row[1]), row[2]) if row else None

    def load(self, batch: Batch, changes: list[TargetChange]) -> int:
        """Write the batch; return the rows written (0 for an already applied batch)."""
        by_target: dict[str, list[TableWrites]] = {}
        for writes in merge(changes):
            if writes.datasource not in self.targets:
                raise LoadError(f"pipeline {self.pipeline_id} processId {batch.process_id}: "
                                f"unknown target data source {writes.datasource}")
            by_target.setdefault(writes.datasource, []).append(writes)
        if self.params.dry_run:
            return sum(w.rows for tables in by_target.values() for w in tables)
        written = 0
        for name, tables in by_target.items():
            written += self._load_target(name, batch, tables)
        return written

    def _load_target(self, name: str, batch: Batch, tables: list[TableWrites]) -> int:
        for attempt in range(1, 6):
            try:
                return self._transaction(name, batch, tables)
            except pymysql.MySQLError as exc:
                self._discard(name)
                code = exc.args[0] if exc.args else 0
                where = (f"stage load, pipeline {self.pipeline_id}, processId "
                         f"{batch.process_id}, position {batch.end}, target {name}")
                if code in RETRYABLE and attempt < 5:
                    log.warning("event=load_retry pipeline=%s process_id=%d target=%s "
                                "attempt=%d error=%r", self.pipeline_id, batch.process_id, name,
                                attempt, exc.args[-1])
                    time.sleep(0.05 * 2 ** attempt)
                    continue
                raise LoadError(f"{where}: {exc.args[-1] if exc.args else exc}") from None
        raise AssertionError("unreachable")

    def _discard(self, name: str) -> None:
        conn = self._connections.pop(name, None)
        if conn is not None:
            try:
                conn.close()
            except pymysql.MySQLError:
                pass

    def _transaction(self, name: str, batch: Batch, tables: list[TableWrites]) -> int:
        conn = self._connection(name)
        with conn.cursor() as cursor:
            cursor.execute("SELECT binlog_file, binlog_pos FROM retl.retl_position "
                           "WHERE pipeline_id = %s FOR UPDATE", (self.pipeline_id,))
            row = cursor.fetchone()
            if row and (row[0], int(row[1])) >= position_key(batch.end):
                conn.rollback()
                log.info("event=batch_skipped pipeline=%s process_id=%d target=%s "
                         "reason=already_applied applied=%s:%s", self.pipeline_id,
                         batch.process_id, name, row[0], row[1])
                return 0
            written = 0
            for writes in tables:
                written += self._write_table(cursor, writes)
            end = batch.end
            cursor.execute(
                "INSERT INTO retl.retl_position (pipeline_id, process_id, binlog_file, "
                "binlog_pos, gtid) VALUES (%s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE "
                "process_id = VALUES(process_id), binlog_file = VALUES(binlog_file), "
                "binlog_pos = VALUES(binlog_pos), gtid = VALUES(gtid), "
                "updated_at = CURRENT_TIMESTAMP(6)",
                (self.pipeline_id, batch.process_id, end.file, end.pos, end.gtid))
        conn.commit()
        return written

    def _write_table(self, cursor: Any, writes: TableWrites) -> int:
        table = f"{quote(writes.schema)}.{quote(writes.table)}"
        size = self.params.load_batch_size
        if writes.deletes:
            keys = writes.keys
            one = "(" + ", ".join(["%s"] * len(keys)) + ")"
            columns = ", ".join(map(quote, keys))
            for chunk in _chunks(writes.deletes, size):
                sql = (f"DELETE FROM {table} WHERE ({columns}) IN "
                       f"({', '.join([one] * len(chunk))})")
                cursor.execute(sql, [sql_value(v) for key in chunk for v in key])
        for columns, rows in _runs(writes.upserts):
            update = [c for c in columns if c not in writes.keys] or [columns[0]]
            sql = (f"INSERT INTO {table} ({', '.join(map(quote, columns))}) VALUES "
                   f"({', '.join(['%s'] * len(columns))}) ON DUPLICATE KEY UPDATE "
                   + ", ".join(f"{quote(c)} = VALUES({quote(c)})" for c in update))
            for chunk in _chunks(rows, size):
                cursor.executemany(sql, [[sql_value(row[c]) for c in columns] for row in chunk])
        return writes.rows


def _runs(rows: list[dict[str, Any]]) -> Iterator[tuple[tuple[str, ...], list[dict[str, Any]]]]:
    """Consecutive rows with the same columns (the column set changes after an ALTER)."""
    current: tuple[str, ...] | None = None
    run: list[dict[str, Any]] = []
    for row in rows:
        columns = tuple(row)
        if columns != current and run:
            yield current, run  # type: ignore[misc]
            run = []
        current = columns
        run.append(row)
    if run:
        yield current, run  # type: ignore[misc]

