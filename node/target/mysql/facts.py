"""What merging and rendering need to know of a target table, read from the target.

- its columns (generated ones are never written; charsets make keyless matches exact;
  ENUM columns may need a lenient write; key columns' collations must be as strict as the
  source's, :mod:`node.target.mysql.collations`): :class:`~node.target.mysql.render.Column`;
- whether its changes must keep source order instead of being merged by key (see
  :mod:`node.merge`): a unique key besides the one rows are keyed by, or a foreign
  key to or from the table;
- whether a bulk load (``LOAD DATA``) takes a lock on the whole table: an AUTO_INCREMENT
  column while ``innodb_autoinc_lock_mode`` is below 2 (MariaDB's default, 1) — snapshot
  copies then go as multi-row statements, which take no such lock and load in parallel
  (:mod:`node.extract.copylines`);
- whether its server takes ``LOAD DATA LOCAL`` at all (``local_infile``; MySQL 8's default
  is OFF): where it does not, copies go as multi-row ``REPLACE`` statements and upserts as
  ``INSERT … ON DUPLICATE KEY UPDATE``, never a ``LOAD DATA`` the server refuses.

The node reads these once per table (again after a DDL) and ships them with each
Extract/Transform job, so Spark workers never ask a target themselves.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pymysql

from node.target.mysql.cascades import Child, read_children
from node.target.mysql.checks import read_checks, with_generated
from node.target.mysql.render import Column, Columns
from shared.endpoint import connect, server_answered
from shared.errors import LoadError
from shared.model import DataSource

Target = tuple[str, str, str]  # datasource, schema, table


@dataclass(frozen=True)
class TableFacts:
    columns: Columns = field(default_factory=dict)
    unique: tuple[frozenset[str], ...] = ()  # the columns of each unique index
    foreign_keys: bool = False  # a foreign key to or from the table
    triggers: bool = False  # the table has triggers (rows never go as REPLACE)
    bulk_lock: bool = False  # LOAD DATA into it holds the table's AUTO-INC lock
    engine: str = ""  # its storage engine ("" not known)
    transactional: bool = True  # its engine rolls back (InnoDB; not MyISAM, Aria, …)
    trigger_names: tuple[str, ...] = ()  # its triggers, by name
    local_infile: bool = True  # its server takes LOAD DATA LOCAL (@@GLOBAL.local_infile)
    # its server's max_allowed_packet (the smaller of the session's and the global one;
    # 0: not known): a statement larger is refused, the connection dropped
    packet: int = 0
    referenced: tuple[frozenset[str], ...] = ()  # the columns each foreign key to it names
    # the foreign keys to it with an ON DELETE / ON UPDATE CASCADE or SET NULL, which Load
    # writes itself too (node.target.mysql.cascades)
    children: tuple[Child, ...] = ()
    # each unique index of ``unique`` (same order): its columns in index order, each with
    # its prefix length (SUB_PART: characters, bytes of a binary type; 0: the whole value)
    parts: tuple[tuple[tuple[str, int], ...], ...] = ()
    increment: str = ""  # its AUTO_INCREMENT column ("": none)

    def ordered(self, keys: tuple[str, ...]) -> bool:
        """Whether changes keyed by ``keys`` must be written in source order."""
        return self.foreign_keys or any(index != frozenset(keys) for index in self.unique)

    def inert(self, keys: tuple[str, ...]) -> bool:
        """Whether an upsert of a row keyed by ``keys`` changes no column a foreign key to
        the table references (so fires no ON UPDATE action) — of a table with foreign keys."""
        named = frozenset(key.lower() for key in keys)
        return self.foreign_keys and all(
            frozenset(c.lower() for c in columns) <= named for columns in self.referenced)

    def unkeyed(self, keys: tuple[str, ...]) -> bool:
        """Whether rows keyed by ``keys`` have no unique index of the table to meet in (an
        upsert of a changed row would add one beside it); False for a table not known."""
        if not (keys and self.columns):
            return False
        named = frozenset(key.lower() for key in keys)  # column names ignore case
        return not any(frozenset(c.lower() for c in index) <= named for index in self.unique)


def read_facts(cursor: Any, schema: str, table: str) -> TableFacts:
    cursor.execute("SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_SET_NAME, "
                   "COALESCE(GENERATION_EXPRESSION, ''), COLUMN_TYPE, "
                   "EXTRA LIKE '%%auto_increment%%', COLLATION_NAME, IS_NULLABLE = 'YES', "
                   "EXTRA LIKE '%%on update%%' FROM "
                   "information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                   "ORDER BY ORDINAL_POSITION", (schema, table))  # (the table's order)
    found = cursor.fetchall()
    columns = {row[0]: Column(row[1], row[2], bool(row[3]), str(row[4]).lower(),
                              str(row[6]) if row[6] else None, bool(int(row[7])),
                              bool(int(row[8])))
               for row in found}
    columns = read_checks(cursor, schema, table, columns)
    bulk_lock = False
    if any(int(row[5]) for row in found):
        cursor.execute("SELECT @@innodb_autoinc_lock_mode")
        bulk_lock = int(cursor.fetchone()[0]) < 2
    cursor.execute("SELECT INDEX_NAME, COLUMN_NAME, COALESCE(SUB_PART, 0) FROM "
                   "information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                   "AND NON_UNIQUE = 0 ORDER BY INDEX_NAME, SEQ_IN_INDEX", (schema, table))
    indexes: dict[str, list[tuple[str, int]]] = {}  # a column per row: a name may hold ","
    for index, column, sub_part in cursor.fetchall():
        indexes.setdefault(str(index), []).append((str(column), int(sub_part)))
    unique = tuple(frozenset(c for c, _ in columns) for columns in indexes.values())
    indexed = frozenset(name for index in unique for name in index)
    columns = {name: replace(column, unique=True) if name in indexed else column
               for name, column in columns.items()}
    columns = with_generated(columns, {row[0]: str(row[3]) for row in found if row[3]})
    cursor.execute("SELECT COUNT(*) FROM information_schema.KEY_COLUMN_USAGE WHERE "
                   "REFERENCED_TABLE_NAME IS NOT NULL AND ((TABLE_SCHEMA = %s AND "
                   "TABLE_NAME = %s) OR (REFERENCED_TABLE_SCHEMA = %s AND "
                   "REFERENCED_TABLE_NAME = %s))", (schema, table, schema, table))
    foreign_keys = bool(int(cursor.fetchone()[0]))
    referenced: dict[tuple[str, str, str], set[str]] = {}
    if foreign_keys:
        cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, REFERENCED_COLUMN_NAME "
                       "FROM information_schema.KEY_COLUMN_USAGE WHERE "
                       "REFERENCED_TABLE_SCHEMA = %s AND REFERENCED_TABLE_NAME = %s",
                       (schema, table))
        for child_schema, child, name, column in cursor.fetchall():
            referenced.setdefault((child_schema, child, name), set()).add(str(column))
    children = read_children(cursor, schema, table) if referenced else ()
    cursor.execute("SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE "
                   "EVENT_OBJECT_SCHEMA = %s AND EVENT_OBJECT_TABLE = %s ORDER BY TRIGGER_NAME",
                   (schema, table))
    names = tuple(str(row[0]) for row in cursor.fetchall())
    cursor.execute("SELECT t.ENGINE, e.TRANSACTIONS FROM information_schema.TABLES t LEFT "
                   "JOIN information_schema.ENGINES e ON e.ENGINE = t.ENGINE WHERE "
                   "t.TABLE_SCHEMA = %s AND t.TABLE_NAME = %s", (schema, table))
    engine = cursor.fetchone() or (None, None)  # (no table: its load says so)
    cursor.execute("SELECT @@GLOBAL.local_infile, "
                   "LEAST(@@SESSION.max_allowed_packet, @@GLOBAL.max_allowed_packet)")
    local_infile, packet = cursor.fetchone()
    return TableFacts(columns, unique, foreign_keys, bool(names), bulk_lock,
                      str(engine[0] or ""), engine[0] is None or str(engine[1]).upper() == "YES",
                      names, bool(int(local_infile)), int(packet or 0),
                      tuple(frozenset(columns) for columns in referenced.values()),
                      children=children,
                      parts=tuple(tuple(parts) for parts in indexes.values()),
                      increment=next((str(row[0]) for row in found if int(row[5])), ""))


READ_TIMEOUT_S = 120  # a read of a table's columns and keys: an answer, or an error


class TargetFacts:
    """Facts of target tables, read once each until :meth:`forget` (after a DDL).

    ``connection`` gives the connection to a target data source by name (the Loader passes
    its own, and ``discard`` to drop one that failed); without it, this object opens and
    keeps its own. A read on a connection that is gone (the server closed it after its
    ``wait_timeout`` while the pipeline was quiet) is tried once more on a new one. Safe to
    share between threads."""

    def __init__(self, targets: dict[str, DataSource],
                 connection: Callable[[str], pymysql.Connection] | None = None,
                 discard: Callable[[str], None] | None = None) -> None:
        self.targets = targets
        self._given, self._discard = connection, discard
        self._closed = False  # (a read its close ended is not tried again)
        self._own: dict[str, pymysql.Connection] = {}
        self._known: dict[Target, TableFacts] = {}
        self._lock = threading.Lock()

    def of(self, target: Target, layout: Any = None) -> TableFacts:
        found = self._known.get(target)
        if found is not None:
            return found
        with self._lock:
            if target[0] not in self.targets:
                return TableFacts()  # reported by Load, which knows the batch
            for again in (True, False):
                try:
                    conn = self._connection(target[0])
                    with conn.cursor() as cursor:
                        found = read_facts(cursor, target[1], target[2])
                    conn.commit()
                    break
                except pymysql.MySQLError as exc:
                    self._drop(target[0])
                    if again and not server_answered(exc) and not self._closed:
                        continue
                    raise LoadError(f"target {target[0]}: cannot read the columns and keys of "
                                    f"{target[1]}.{target[2]}: "
                                    f"{exc.args[-1] if exc.args else exc}") from None
            self._known[target] = found
            return found

    def forget(self) -> None:
        with self._lock:
            self._known.clear()

    def drop(self, target: Target) -> None:
        """One table's facts read again when next asked (it is being altered)."""
        with self._lock:
            self._known.pop(target, None)

    def _connection(self, name: str) -> pymysql.Connection:
        if self._given is not None:
            return self._given(name)
        conn = self._own.get(name)
        if conn is None or not conn.open:
            # (a target that stops answering fails a read here, not holds it for ever)
            conn = self._own[name] = connect(self.targets[name], autocommit=False,
                                             read_timeout=READ_TIMEOUT_S)
        return conn

    def _drop(self, name: str) -> None:
        if self._given is not None:
            if self._discard is not None:
                self._discard(name)
            return
        conn = self._own.pop(name, None)
        if conn is not None:
            try:
                conn.close()
            except pymysql.MySQLError:
                pass

    def close(self) -> None:
        """Its connections closed; a read in flight on another thread (an E/T worker, and
        a target that does not answer) is ended first, its socket shut so that it fails at
        once: it held the lock, and the node's stop waited on it for as long as the target
        stayed silent."""
        self._closed = True
        for conn in list(self._own.values()):
            sock = getattr(conn, "_sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:  # (closed meanwhile)
                    pass
        with self._lock:
            for name in list(self._own):
                self._drop(name)
