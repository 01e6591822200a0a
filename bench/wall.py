"""The target's wall for a catch-up's bulk part: how fast the target takes setl's own
statements when nothing else is done.

Issue 34 asks that the target's apply not become the wall of a catch-up, and where it is,
how far from it setl is. The wall is measured here as the rate of *the same statements*
replayed straight into the target: the bulk part's rows (read back from setl's target after
the catch-up, in key order, as ``sysbench prepare`` wrote them) rendered beforehand by setl's
own Load code (:func:`node.target.mysql.loaddata.replaces`: ``LOAD DATA LOCAL INFILE …
REPLACE`` sent from memory), cut into setl's batches (``batch_size`` rows) and loaded by one
connection with the Loader's session, one transaction a batch that also moves a position row,
into fresh tables of the same shape — no binlog read, no decoding, no Spark, no merge. What
setl's catch-up does on top of that is its cost; the wall is what the target can do.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pymysql
from pymysql.cursors import DictCursor

from node.target.mysql import loaddata, localdata
from node.target.mysql.facts import read_facts
from node.target.mysql.sessions import SESSION
from shared.identifiers import qualified

if TYPE_CHECKING:
    from bench.peers import Peers

WALL = "sbwall"  # the schema the replay loads, on setl's target; dropped after


def bulk_wall(peers: Peers, schema: str, tables: list[str], size: int, batch_size: int
              ) -> dict[str, Any]:
    """The rate at which the target loads the bulk part's rows as setl's batches, and the
    statements' rendering time kept apart (done before the clock starts)."""
    localdata.install()
    conn = pymysql.connect(**peers.box.connection("target"), autocommit=False,
                           local_infile=True, init_command=SESSION, charset="utf8mb4")
    try:
        batches = _batches(conn, schema, tables, size, batch_size)
        with conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {WALL}")
            cursor.execute(f"CREATE DATABASE {WALL}")
            for table in tables:
                cursor.execute(f"CREATE TABLE {qualified(WALL, table)} "
                               f"LIKE {qualified(schema, table)}")
            cursor.execute(f"CREATE TABLE {WALL}.position (id INT PRIMARY KEY, batch BIGINT)")
            cursor.execute(f"INSERT INTO {WALL}.position VALUES (1, 0)")
        conn.commit()
        rows, started = 0, time.monotonic()
        with conn.cursor() as cursor:
            for number, (count, sqls) in enumerate(batches, 1):
                for sql in sqls:
                    with localdata.serving(loaddata.FILE, sql.data or b""):
                        cursor.execute(sql.text)
                cursor.execute(f"UPDATE {WALL}.position SET batch = %s WHERE id = 1",
                               (number,))
                conn.commit()
                rows += count
        seconds = time.monotonic() - started
        with conn.cursor() as cursor:
            loaded = sum(_count(cursor, WALL, table) for table in tables)
            cursor.execute(f"DROP DATABASE {WALL}")
        conn.commit()
    finally:
        conn.close()
    if loaded != rows:
        raise RuntimeError(f"the wall's replay loaded {loaded:,} rows of {rows:,}")
    return {"target_wall_bulk_rows_per_s": round(rows / seconds),
            "target_wall_bulk_batches": len(batches), "target_wall_bulk_rows": rows}


def _batches(conn: pymysql.Connection, schema: str, tables: list[str], size: int,
             batch_size: int) -> list[tuple[int, list[Any]]]:
    """The bulk part's rows as setl's batches of ``batch_size`` rows, each rendered into the
    statements setl's Load sends for an insert-only run (table after table, in key order, as
    ``prepare`` wrote them)."""
    batches: list[tuple[int, list[Any]]] = []
    with conn.cursor() as plain, conn.cursor(DictCursor) as cursor:
        for table in tables:
            columns = read_facts(plain, schema, table).columns
            cursor.execute(f"SELECT * FROM {qualified(schema, table)} WHERE id <= %s "
                           "ORDER BY id", (size,))
            found = list(cursor.fetchall())
            for start in range(0, len(found), batch_size):
                rows = found[start:start + batch_size]
                sqls = loaddata.replaces(WALL, table, rows, columns, triggers=False)
                if sqls is None:
                    raise RuntimeError(f"{schema}.{table}'s rows cannot go as LOAD DATA")
                batches.append((len(rows), sqls))
    conn.commit()
    return batches


def _count(cursor: Any, schema: str, table: str) -> int:
    cursor.execute(f"SELECT COUNT(*) FROM {qualified(schema, table)}")
    return int(cursor.fetchone()[0])
