"""Reading one side of a comparison: the source's rows (as the target should hold them) and
the target's, each in one consistent snapshot with its position.

A row is known by its key (the source's key values, which are the target's key values
too where pairs only rename key columns) and, per target table, by a 64-bit hash. Where a
virtual column writes a key column (``Target.key_written``: ``id + 1000000``), a source
row's target row is the one at the key its transformed image writes, as the stream writes
it: the source side records that key (``Side.written``), the target is looked up by it and
what it holds is known by the source key again, so differences, settling and repair (whose
requests name source keys) all speak of source keys.
A key's rows in one table are the sorted tuple of their hashes (:data:`Rows`): one for a
table keyed by its own key, any number for a keyless table compared by its pair's
``key_columns`` (which need not be unique) or a lake table holding a key twice, so a row
held twice, or lost beside a row alike, differs. A *signature* of a key is the set of
``(target table, rows)`` it has on one side; a key differs when the source's signature is
not the target's.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql

from node.changes import ChangeType, RowChange
from node.extract.chunks import escaped
from node.extract.etl import CompiledPipeline, extract_transform_lists
from node.verify import lake
from node.verify.plan import TablePlan, Target
from node.verify.values import Column, Rows, add_row, decoded, row_hash, sql_hash
from shared import gtid, keysql
from shared.errors import PositionConflictError, SourceError
from shared.identifiers import qualified, quote, short_form
from shared.model import BinlogPosition
from shared.positions import binlog_end, server_identity

Key = tuple[Any, ...]
Signature = frozenset[tuple[str, Rows]]
EMPTY: Signature = frozenset()
BATCH = 500  # keys per IN list


@dataclass
class Side:
    """What the source says the target should hold for some keys."""

    expected: dict[Key, dict[str, Rows]] = field(default_factory=dict)  # key → table → rows
    columns: dict[tuple[Key, str], tuple[str, ...]] = field(default_factory=dict)  # rows
    known: set[Key] = field(default_factory=set)  # keys of rows outside --where
    rows: int = 0
    # a key-written target's key of a source row: (source key, table) → its key there
    written: dict[tuple[Key, str], Key] = field(default_factory=dict)
    # and back: table → its key → the source key that writes it
    writers: dict[str, dict[Key, Key]] = field(default_factory=dict)

    def signature(self, key: Key) -> Signature:
        return frozenset(self.expected.get(key, {}).items())

    def write(self, key: Key, table: str, written: Key) -> None:
        self.written[(key, table)] = written
        self.writers.setdefault(table, {})[written] = key

    def merge(self, other: Side) -> None:
        """Another batch's keys (a key's rows all come in its batch)."""
        self.expected.update(other.expected)
        self.columns.update(other.columns)
        self.known |= other.known
        self.rows += other.rows
        for (key, table), written in other.written.items():
            self.write(key, table, written)

    def lookups(self, target: Target, keys: Iterable[Key]) -> list[tuple[Key, Key]]:
        """(the key to look a row up by in ``target``, the source key it is known by) for
        ``keys``: the key itself, or where a virtual column writes the key there the one the
        source's row writes (a key without a row on the source writes none: not looked up,
        as rows no source row gives are not looked for there)."""
        if not target.key_written:
            return [(key, key) for key in keys]
        return [(self.written[(key, target.id)], key) for key in keys
                if (key, target.id) in self.written]


def loaded_past(applied: BinlogPosition | None, at: BinlogPosition) -> bool:
    """Whether a target at ``applied`` holds every source transaction up to ``at`` (by GTID
    when the two are of different servers: a switched source; not yet, when they cannot be
    compared — the pipeline's next batch makes them comparable)."""
    if applied is None or not applied.file:
        return False
    try:
        if applied.gtid and at.gtid and ":" not in applied.gtid + at.gtid:
            # MariaDB: by GTID state, so the end of a quiet binlog after a rotation (no
            # transaction since: nothing to load) counts as reached
            return gtid.compare_states(applied.gtid, at.gtid) >= 0
        return gtid.compare(applied, at) >= 0
    except PositionConflictError:
        return False


def source_snapshot(cursor: Any) -> BinlogPosition:
    """Begin a read-only consistent snapshot; its binlog position (MariaDB names it; other
    servers: the position just after it began, which is never earlier) and the server's
    identity. Not its GTID state: MariaDB's BINLOG_GTID_POS reads the binlog file from its
    start (0.12 s of the source's CPU a call 770 MB into a file, more than the chunks'
    own queries), and a chunk's position only says whether the targets had caught up when
    it was read — a difference found is re-checked by :mod:`node.verify.settle` anyway,
    from a position taken with its GTID state."""
    cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
    cursor.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
    found = {str(name).lower(): value for name, value in cursor.fetchall()}
    if found.get("binlog_snapshot_file"):
        return BinlogPosition(str(found["binlog_snapshot_file"]),
                              int(found["binlog_snapshot_position"]),
                              server=server_identity(cursor))
    return binlog_end(cursor, "of verify")


def source_held(cursor: Any, hold: Callable[[], None]) -> BinlogPosition:
    """Begin a transaction in which ``hold`` locks rows on the source; the binlog position
    then: every change of the held rows is at or before it (a writer's binlog is written
    before its locks go), and none comes after it while the transaction lasts."""
    cursor.execute(f"SET SESSION innodb_lock_wait_timeout = {HOLD_LOCK_WAIT_S}")
    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    cursor.execute("START TRANSACTION")
    hold()
    return binlog_end(cursor, "of verify")


def target_snapshot(cursor: Any, pipeline_id: str) -> BinlogPosition | None:
    """Begin a read-only consistent snapshot on a target; the pipeline's position in it
    (None when it has none yet)."""
    cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
    try:
        cursor.execute("SELECT binlog_file, binlog_pos, gtid, source_server FROM "
                       "retl.retl_position WHERE pipeline_id = %s", (pipeline_id,))
    except pymysql.MySQLError:
        return None  # no retl schema (or none of this version) yet: nothing loaded
    row = cursor.fetchone()
    if not row or not row[0]:
        return None  # '': claimed, not loaded
    return BinlogPosition(str(row[0]), int(row[1]), str(row[2] or ""), str(row[3] or ""))


def keys_in(columns: Sequence[str], keys: Sequence[Key], described: Sequence[Column]
            ) -> tuple[str, list[Any]]:
    """``(a, b) IN ((…), …)`` for ``keys`` and its parameters, each text value converted
    into its column's charset (:mod:`shared.keysql`: MariaDB's IN list of several keys
    found no row of a latin1 'é', nor of sjis text, and verify took the row for missing),
    in its column's collation (a utf8mb4_unicode_ci one: illegal mix of collations);
    ``described``: the table's columns as read (a converted one by its own charset)."""
    charsets = {column.name: column.own_charset or column.charset for column in described}
    collations = {column.name: column.collation for column in described}
    return keysql.keys_in(columns, keys, [charsets.get(name) for name in columns],
                          [collations.get(name) for name in columns])


HOLD_LOCK_WAIT_S = 5  # how long holding keys waits for a writer's lock


def batches(keys: Iterable[Key]) -> Iterable[list[Key]]:
    items = list(keys)
    for start in range(0, len(items), BATCH):
        yield items[start:start + BATCH]


def _and(sql: str, where: str) -> str:
    return f"({sql}) AND ({escaped(where)})" if where else sql


def _execute(cursor: Any, sql: str, params: Sequence[Any], where: str) -> list[tuple[Any, ...]]:
    try:
        cursor.execute(sql, params)
    except pymysql.MySQLError as exc:
        message = exc.args[-1] if exc.args else exc
        raise SourceError(f"verify read failed on {where}: {message}") from None
    return list(cursor.fetchall())


class Reader(abc.ABC):
    """Reads of one table's rows, for one method (sql or rows); subclasses below."""

    def __init__(self, plan: TablePlan, compiled: CompiledPipeline) -> None:
        self.plan, self.compiled = plan, compiled
        self.key_list = ", ".join(map(quote, plan.key.columns))
        self.source_name = qualified(plan.key.schema, plan.key.table)
        self.width = len(plan.key.columns)

    def known(self, cursor: Any, condition: str, params: Sequence[Any], side: Side) -> None:
        """Keys of rows outside ``--where``: the target has them too, and is not wrong to."""
        if self.plan.where:
            rows = _execute(cursor, f"SELECT {self.key_list} FROM {self.source_name} WHERE "
                            f"({condition}) AND (({escaped(self.plan.where)}) IS NOT TRUE)", params,
                            self.plan.name)
            side.known.update(tuple(row) for row in rows)

    @abc.abstractmethod
    def source(self, cursor: Any, condition: str, params: Sequence[Any]) -> Side:
        """The source chunk's rows as the targets should hold them, hashed."""

    @abc.abstractmethod
    def target(self, cursor: Any, target: Target, condition: str, params: Sequence[Any],
               side: Side) -> dict[Key, Rows]:
        """One target table's rows of the chunk, hashed."""

    def target_keys(self, cursor: Any, target: Target, keys: Sequence[Key],
                    side: Side) -> dict[Key, Rows]:
        """The rows of ``keys`` in a target table, hashed (``cursor``: a database's, or
        the lake's :class:`node.verify.lake.LakeView` for a lake table)."""
        if target.lake:
            return lake.key_rows(cursor, target, side.lookups(target, keys), side)
        found: dict[Key, Rows] = {}
        # a key's rows all come in its batch
        for part in batches(by for by, _ in side.lookups(target, keys)):
            condition, params = keys_in(target.keys, part, target.columns)
            found.update(self.target(cursor, target, condition, params, side))
        return found

    def hold(self, cursor: Any, keys: Sequence[Key]) -> None:
        """Hold ``keys`` still on the source for the open transaction: share locks on their
        rows, and on the gaps where rows are missing (REPEATABLE READ), so no writer changes,
        deletes or inserts them until it ends."""
        for part in batches(keys):
            condition, params = keys_in(self.plan.key.columns, part, self.plan.columns)
            cursor.execute(f"SELECT 1 FROM {self.source_name} WHERE {condition} "
                           "LOCK IN SHARE MODE", params)  # a deadlock: the caller's to take

    def source_keys(self, cursor: Any, keys: Sequence[Key]) -> Side:
        side = Side()
        for part in batches(keys):
            side.merge(self.source(cursor, *keys_in(self.plan.key.columns, part,
                                                    self.plan.columns)))
        return side


class SqlReader(Reader):
    """The databases hash the rows; a chunk compares by count and XOR of narrow hashes
    first, by row (wide hashes) only where they differ. A table whose key need not be
    unique (a keyless table's ``key_columns``) sums the hashes instead: two rows alike
    cancel out in an XOR, so a row held twice beside another held twice (``{a, a}`` for
    ``{b, b}``) would pass."""

    def __init__(self, plan: TablePlan, compiled: CompiledPipeline) -> None:
        super().__init__(plan, compiled)
        self.function = plan.hash
        self.narrow = [sql_hash(t.source_hashed, t.hashed_nullable, False,
                                kinds=t.hashed_kinds) for t in plan.targets]
        self.aggregate = "BIT_XOR" if plan.unique else "SUM"
        self.wide = [sql_hash(t.source_hashed, t.hashed_nullable, True, plan.hash,
                              t.hashed_kinds) for t in plan.targets]

    def sums(self, cursor: Any, condition: str, params: Sequence[Any]) -> tuple[int, ...]:
        """(count, XOR of the hashes of each target's columns) of the rows selected (their
        sum where the key need not be unique)."""
        xors = ", ".join(f"{self.aggregate}({h})" for h in self.narrow)
        row = _execute(cursor, f"SELECT COUNT(*), {xors} FROM {self.source_name} WHERE "
                               f"{condition}", params, self.plan.name)[0]
        return tuple(int(value or 0) for value in row)

    def target_sums(self, cursor: Any, target: Target, condition: str,
                    params: Sequence[Any]) -> tuple[int, int]:
        xor = sql_hash(target.target_hashed, target.hashed_nullable, False,
                       kinds=target.hashed_kinds)
        row = _execute(cursor, f"SELECT COUNT(*), {self.aggregate}({xor}) FROM "
                               f"{qualified(target.schema, target.table)} WHERE {condition}",
                       params, target.id)[0]
        return int(row[0]), int(row[1] or 0)

    def source(self, cursor: Any, condition: str, params: Sequence[Any]) -> Side:
        side = Side()
        rows = _execute(cursor, f"SELECT {self.key_list}, {', '.join(self.wide)} FROM "
                                f"{self.source_name} WHERE {_and(condition, self.plan.where)}",
                        params, self.plan.name)
        ids = [target.id for target in self.plan.targets]
        width = self.width
        for row in rows:
            key = tuple(row[:width])
            held = side.expected.get(key)
            if held is None:
                side.expected[key] = {name: (int(value),)
                                      for name, value in zip(ids, row[width:], strict=True)}
            else:  # a key_columns key of several rows
                for name, value in zip(ids, row[width:], strict=True):
                    add_row(held, name, int(value))
        side.rows = len(rows)
        self.known(cursor, condition, params, side)
        return side

    def target(self, cursor: Any, target: Target, condition: str, params: Sequence[Any],
               side: Side) -> dict[Key, Rows]:
        keys = ", ".join(map(quote, target.keys))
        hashed = sql_hash(target.target_hashed, target.hashed_nullable, True, self.function,
                          target.hashed_kinds)
        rows = _execute(cursor, f"SELECT {keys}, {hashed} FROM "
                                f"{qualified(target.schema, target.table)} WHERE {condition}",
                        params, target.id)
        width = self.width
        found: dict[Key, Rows] = {}
        for row in rows:
            add_row(found, tuple(row[:width]), int(row[width]))
        return found


class RowsReader(Reader):
    """Rows go through the pipeline's Extract/Transform and are hashed here."""

    def __init__(self, plan: TablePlan, compiled: CompiledPipeline) -> None:
        super().__init__(plan, compiled)
        self.targets = {target.id: target for target in plan.targets}
        self.kinds = {target.id: target.kinds for target in plan.targets}
        # each target's column names as it spells them (names ignore case: a row written
        # with 'Email' into the target's 'email' is compared under 'email')
        self.spelled = {target.id: {name.lower(): name for name in target.compared}
                        for target in plan.targets}

    def source(self, cursor: Any, condition: str, params: Sequence[Any]) -> Side:
        plan, side = self.plan, Side()
        try:
            cursor.execute(f"SELECT {plan.read_list} FROM {self.source_name} WHERE "
                           f"{_and(condition, plan.where)}", params)
        except pymysql.MySQLError as exc:
            raise SourceError(f"verify read failed on {plan.name}: "
                              f"{exc.args[-1] if exc.args else exc}") from None
        names = [column[0] for column in cursor.description]
        key_columns, schema, table = plan.key.columns, plan.key.schema, plan.key.table
        numbered, keys = [], []
        read = cursor.fetchall()
        at = [names.index(name) for name in key_columns]
        for seq, (values, mended) in enumerate(zip(read, decoded(plan.columns, read),
                                                   strict=True)):
            # the key as read (the target's is found by it); the row as the stream has it
            keys.append(tuple([values[index] for index in at]))
            numbered.append((seq, RowChange(schema, table, ChangeType.INSERT, key_columns,
                                            None, dict(zip(names, mended, strict=True)))))
        side.rows = len(numbered)
        changes = extract_transform_lists(self.compiled, numbered)
        lake_rows: dict[str, list[tuple[Key, dict[str, Any]]]] = {}
        for change in changes:
            table_id = f"{change.datasource}:{short_form(change.schema, change.table)}"
            target = self.targets.get(table_id)
            if target is None or change.after is None or change.type is ChangeType.DELETE:
                continue
            key = keys[change.seq]
            if target.key_written:  # its row there is at the key this image writes
                by_name = {name.lower(): value for name, value in change.after.items()}
                if all(name.lower() in by_name for name in target.keys):
                    side.write(key, table_id,
                               tuple([by_name[name.lower()] for name in target.keys]))
            if target.lake:  # hashed as the lake holds them, all at once
                lake_rows.setdefault(table_id, []).append((key, change.after))
                continue
            spelled = self.spelled[table_id]
            after = {spelled.get(name.lower(), name): value
                     for name, value in change.after.items()}
            columns = tuple(sorted(name for name in after if name in target.compared))
            side.columns[(key, table_id)] = columns
            add_row(side.expected.setdefault(key, {}), table_id,
                row_hash(after, columns, self.kinds[table_id]))
        for table_id, found in lake_rows.items():
            lake.expected(self.targets[table_id], found, side)
        self.known(cursor, condition, params, side)
        return side

    def target(self, cursor: Any, target: Target, condition: str, params: Sequence[Any],
               side: Side) -> dict[Key, Rows]:
        try:
            cursor.execute(f"SELECT {target.read_list} FROM "
                           f"{qualified(target.schema, target.table)} WHERE {condition}",
                           params)
        except pymysql.MySQLError as exc:
            raise SourceError(f"verify read failed on {target.id}: "
                              f"{exc.args[-1] if exc.args else exc}") from None
        names = [column[0] for column in cursor.description]
        kinds = self.kinds[target.id]
        found: dict[Key, Rows] = {}
        own = tuple(sorted(name for name in names if name in target.compared))
        read = cursor.fetchall()
        at = [names.index(name) for name in target.keys]
        writers = side.writers.get(target.id) if target.key_written else None
        for values, mended in zip(read, decoded(target.columns, read), strict=True):
            key = tuple([values[index] for index in at])
            if writers is not None:  # known by the source key that writes it
                found_by = writers.get(key) or writers.get(tuple([mended[i] for i in at]))
                if found_by is None:
                    continue  # looked up by a key no source row writes: none was asked
                key = found_by
            columns = side.columns.get((key, target.id), own)
            add_row(found, key, row_hash(dict(zip(names, mended, strict=True)), columns, kinds))
        return found


def reader_for(plan: TablePlan, compiled: CompiledPipeline) -> Reader:
    return SqlReader(plan, compiled) if plan.method == "sql" else RowsReader(plan, compiled)


def differing(side: Side, actual: dict[str, dict[Key, Rows]]
              ) -> dict[Key, tuple[Signature, Signature]]:
    """The keys whose signatures differ between the source's side and the target's rows
    (``actual``: table → key → rows), with both signatures; a key the source has outside
    ``--where`` is not one."""
    found: dict[Key, tuple[Signature, Signature]] = {}
    keys = set(side.expected).union(*actual.values()) if actual else set(side.expected)
    for key in keys:
        expected = side.signature(key)
        present = frozenset((table, hashes[key]) for table, hashes in actual.items()
                            if key in hashes)
        if expected != present and not (not expected and key in side.known):
            found[key] = (expected, present)
    return found


def signatures(side: Side, actual: dict[str, dict[Key, Rows]], keys: Iterable[Key]
               ) -> dict[Key, tuple[Signature, Signature]]:
    """Both signatures of every key asked, equal or not."""
    return {key: (side.signature(key),
                  frozenset((table, hashes[key]) for table, hashes in actual.items()
                            if key in hashes)) for key in keys}
