"""Two-way channels: the loop mark, and conflicts between concurrent writes on both sides.

**Loop mark.** Each load transaction of a two-way channel also touches its pipeline's row in
``retl.retl_mark`` on the target. The opposite pipeline reads that server's binlog, sees the
mark of its own channel in the transaction and drops the whole transaction (see
:mod:`node.select.binlog`), so a change goes A → B once and never comes back.

**Conflicts.** Before writing, the load transaction reads the target's current rows for the
batch's keys (``SELECT … FOR UPDATE``, under REPEATABLE READ: a missing key's gap is locked
too, so a target user's insert of it waits for the load) and walks the batch's changes of
each key in order against them: a change whose before image (none for an insert) is the row
the target holds then is written, and the row becomes its after image. A difference means
the target row was changed there meanwhile by its own users: both sides wrote the key
concurrently. Every conflict is logged (``event=conflict`` with table, key, the target's
current row and the incoming change) and counted. The rule: **the channel's first pipeline
wins**. Its changes overwrite the target; the second pipeline leaves out a conflicting
change, so the row keeps the first side's value, and both sides converge to it (except
where the first side wrote the key away and back while the second side's change crossed,
or both sides moved keys: docs/architecture.md, "Where the rule does not hold"). A later
change of the key in the same batch is checked against the row kept: a user's change of the
first side's value, read in one batch after the conflicting change it follows, is written
(comparing every change with the key's first before image left it out, and the two sides
apart for good). Each key is resolved alone: an update that moves a row to another key is,
on the second side, a delete at the old key and a write at the new one, and only the part
whose key conflicts is left out (leaving the whole move out kept the old key on one side
while the first side, whose own change named only the new key, never removed it on the
other). The rule holds for whole rows: a pair that writes only some of a row's columns
(``column_groups``, ``joins``, ``merge_part``, several pairs into one table) or a table with
no key is refused on a two-way channel (at ``setl apply`` and when the pipeline starts), and
so is a target table whose engine does not roll back (its rows would reach the binlog
without the loop mark). The check finds a row by one key's exact value, the write by every
unique key and the server's collation, so a target table with a second unique key or a key
that compares loosely, and one with a trigger, are refused when the pipeline starts too
(:func:`table_problems`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from node.changes import ChangeType, Row, TargetChange
from node.target.mysql.collations import loose_collation
from node.target.mysql.currentrows import Key, current_rows, missing_columns, plain_key, same_row
from node.target.mysql.facts import TableFacts, Target
from node.target.mysql.keys import key_padding
from shared.endpoint import connect
from shared.errors import ConfigError
from shared.identifiers import qualified
from shared.model import DataSource

log = logging.getLogger("setl.node.target.mysql.twoway")
TableName = tuple[str, str, tuple[str, ...]]  # schema, table, key columns


@dataclass
class LoopGuard:
    channel: str
    pipeline_id: str
    wins_conflicts: bool  # the channel's first pipeline
    conflicts: int = 0

    def mark(self, cursor: Any, process_id: int) -> None:
        # the row changes on every write, so the transaction always carries a row event
        # of the mark (an update to the value it has writes nothing to the binlog)
        cursor.execute("INSERT INTO retl.retl_mark (CHANNEL_ID, PIPELINE_ID, PROCESS_ID) "
                       "VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE PROCESS_ID = "
                       "IF(PROCESS_ID = VALUES(PROCESS_ID), -VALUES(PROCESS_ID), "
                       "VALUES(PROCESS_ID))",
                       (self.channel, self.pipeline_id, process_id))

    def refuse_engines(self, facts: Callable[[Target], TableFacts],
                       changes: list[TargetChange]) -> None:
        """Stop before writing into a table whose engine does not roll back: one found
        after the start (made or altered by a replicated DDL)."""
        for target in dict.fromkeys((c.datasource, c.schema, c.table) for c in changes):
            found = facts(target)
            if not found.transactional:
                raise ConfigError(engine_problem(self.pipeline_id, target, found.engine))

    def resolve(self, cursor: Any, changes: list[TargetChange], process_id: int,
                facts: Callable[[Target], TableFacts] | None = None) -> list[TargetChange]:
        """The changes to write: all of them on the winning side; on the other side those
        the target changed concurrently are left out. Conflicts are logged.
        ``facts(target)``: a target table's, which say how a key is compared there (BINARY
        columns padded again: :func:`node.target.mysql.keys.key_padding`), its columns
        (:func:`node.target.mysql.currentrows.current_rows`) and whether it is written in
        source order, step by step (:meth:`~node.target.mysql.facts.TableFacts.ordered`: a
        foreign key, another unique key), where the winner's insert over a target row gets
        no delete before it (:meth:`_overwritten`). Without it a key is compared as it is,
        the rows are read as ``*`` and every table is merged by key."""
        datasource = {(c.schema, c.table, c.keys): c.datasource for c in changes}
        known = {name: facts((datasource[name], name[0], name[1])) if facts is not None else None
                 for name in datasource}
        simulated: dict[TableName, dict[Key, Row | None]] = {}
        for name, touched in touched_keys(changes).items():
            table = known[name]
            pad = key_padding(name[2], table.columns) if table is not None else None
            wanted = [pad(key) for key in touched] if pad is not None else touched
            found = current_rows(cursor, name[0], name[1], name[2], wanted,
                                 table.columns if table is not None else None)
            simulated[name] = {plain_key(key): found.get(plain_key(key)) for key in touched}
        lost: dict[int, tuple[bool, bool]] = {}
        cleared: dict[int, TargetChange] = {}
        for change in sorted(changes, key=lambda c: c.seq):
            rows = simulated[(change.schema, change.table, change.keys)]
            held = self._overwritten(rows, change)
            table = known[(change.schema, change.table, change.keys)]
            if held is not None and table is not None and table.ordered(change.keys):
                if change.before_key is not None:
                    raise ConfigError(_moved_onto(self.pipeline_id, process_id, change))
                held = None  # (the insert's upsert writes over the row)
            if held is not None:
                cleared[id(change)] = held
            parts = self._walk(rows, change, process_id)
            if any(parts):
                lost[id(change)] = parts
        if not lost and not cleared:
            return changes
        return [part for change in changes
                for part in ([cleared[id(change)]] if id(change) in cleared else [])
                + kept_parts(change, *lost.get(id(change), (False, False)))]

    def _overwritten(self, rows: dict[Key, Row | None], change: TargetChange
                     ) -> TargetChange | None:
        """On the winning side: a delete of the row the target holds at the key where
        ``change`` inserts one (an insert, or an update that moves a row there), written
        just before it. The batch's writes are merged by key (:func:`node.merge.merge`),
        which takes a key a change inserts as new in the batch and writes no delete of it:
        a winner's insert and delete of a key the target held (its users' row) wrote
        nothing, and a move 1 → 2 then 2 → 3 left the target's id 2; merged after this
        delete, the key is one the target had, and its delete is written. Only for a table
        merged by key (the caller's to say): an ordered one (a foreign key to or from it,
        another unique key) runs each step, and this delete ran too — its ON DELETE CASCADE
        or SET NULL changed the target's child rows inside the marked transaction (never
        sent back: the two sides apart), a RESTRICT failed every try — while its steps write
        the insert, then the delete, in source order already."""
        if not self.wins_conflicts or change.after is None:
            return None
        new = tuple(change.after[k] for k in change.keys)
        if change.before_key is not None and plain_key(change.before_key) == plain_key(new):
            return None
        now = rows.get(plain_key(new))
        if now is None:
            return None
        return change._replace(type=ChangeType.DELETE, before_key=new, after=None, before=now)

    def _walk(self, rows: dict[Key, Row | None], change: TargetChange,
              process_id: int) -> tuple[bool, bool]:
        """One change against the simulated target rows of its keys (each starts as the
        row read, and becomes the after image of each change written to it): whether its
        part at the old key and at the new key are left out. A part conflicts when the
        simulated row is not the one the source had before it; the winner writes it still,
        the loser leaves it out and the row stays as it is."""
        old = change.before_key
        new = tuple(change.after[k] for k in change.keys) if change.after is not None else None
        if old is not None and new is not None and plain_key(old) == plain_key(new):
            return (not self._check(rows, change, old, change.before, change.after,
                                    process_id),) * 2
        old_lost = old is not None and not self._check(rows, change, old, change.before,
                                                       None, process_id)
        new_lost = new is not None and not self._check(rows, change, new, None,
                                                       change.after, process_id)
        return old_lost, new_lost

    def _check(self, rows: dict[Key, Row | None], change: TargetChange, key: Key,
               before: Row | None, after: Row | None, process_id: int) -> bool:
        """Whether the part of ``change`` at ``key`` is written; the simulated row follows."""
        now = rows.get(plain_key(key))
        missing = missing_columns(before, now)
        if missing:
            raise ConfigError(
                f"pipeline {self.pipeline_id} (two-way), processId {process_id}: target table "
                f"{change.schema}.{change.table} has no column {', '.join(missing)} of the "
                f"change's row (key {key!r}), so the conflict check cannot tell whether the "
                "target changed it: a concurrent change there would go unseen and the two "
                "sides differ. Give the target table the column (or map the pair's columns "
                "to the target's), then resume the channel")
        if same_row(before, now):
            rows[plain_key(key)] = after
            return True
        self.conflicts += 1
        log.warning("event=conflict pipeline=%s process_id=%d table=%s.%s key=%r "
                    "target_row=%r incoming=%r resolution=%s", self.pipeline_id,
                    process_id, change.schema, change.table, key, now, change.after,
                    "source_wins" if self.wins_conflicts else "target_kept")
        if self.wins_conflicts:
            rows[plain_key(key)] = after
        return self.wins_conflicts


def engine_problem(pipeline_id: str, target: Target, engine: str) -> str:
    """Why a two-way pipeline cannot write a table of an engine that does not roll back."""
    name = f"{target[1]}.{target[2]}"
    return (f"pipeline {pipeline_id} (two-way): target table {name} on {target[0]} has "
            f"engine {engine or '(unknown)'}, which does not roll back: its rows reach the binlog "
            "as a group of their own, without the loop mark of the load's transaction, so "
            "the opposite pipeline would take them for that server's own writes and send "
            f"them back. Make it InnoDB (ALTER TABLE {qualified(*target[1:])} "
            "ENGINE=InnoDB), or replicate it with a one-way channel, then start the channel "
            "again")


def paired_targets(compiled: Any, source: DataSource, targets: dict[str, DataSource],
                   keyed: dict[tuple[str, str, str], tuple[str, ...]] | None = None
                   ) -> dict[str, list[tuple[str, str]]]:
    """Per target data source: the target tables of the source tables the pipeline pairs;
    ``keyed`` is given each target table's columns a pair's ``key_columns`` name there."""
    with connect(source) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                       "WHERE TABLE_TYPE = 'BASE TABLE'")
        tables = [(str(schema), str(table)) for schema, table in cursor.fetchall()]
    wanted: dict[str, list[tuple[str, str]]] = {}
    for schema, table in tables:
        if compiled.wants_schema(schema) and compiled.wants(schema, table):
            for datasource, name, target in compiled.targets_of(schema, table):
                if datasource in targets:
                    wanted.setdefault(datasource, []).append((name, target))
                    named = _target_key_columns(compiled, schema, table)
                    if keyed is not None and named:
                        keyed[(datasource, name, target)] = named
    return dict(sorted(wanted.items()))


def refuse_non_transactional(pipeline_id: str, compiled: Any, source: DataSource,
                             targets: dict[str, DataSource]) -> None:
    """At the start of a two-way pipeline: refuse if a target table of a source table it
    replicates has an engine that does not roll back (:func:`engine_problem`)."""
    for datasource, names in paired_targets(compiled, source, targets).items():
        with connect(targets[datasource]) as conn, conn.cursor() as cursor:
            cursor.execute("SELECT t.TABLE_SCHEMA, t.TABLE_NAME, t.ENGINE FROM "
                           "information_schema.TABLES t LEFT JOIN information_schema.ENGINES "
                           "e ON e.ENGINE = t.ENGINE WHERE t.TABLE_TYPE = 'BASE TABLE' AND "
                           "COALESCE(e.TRANSACTIONS, 'NO') <> 'YES' AND (t.TABLE_SCHEMA, "
                           f"t.TABLE_NAME) IN {_tables_in(names)}",
                           [part for name in names for part in name])
            found = cursor.fetchall()
        if found:
            schema, table, engine = found[0]
            raise ConfigError(engine_problem(pipeline_id, (datasource, str(schema),
                                                           str(table)), str(engine or "")))


def _target_key_columns(compiled: Any, schema: str, table: str) -> tuple[str, ...]:
    """The target's names of the columns the ``key_columns`` of a table's pair name."""
    pairs = compiled.pairs_for(*compiled.stored(schema, table))
    if not pairs or not pairs[0].pair.key_columns:
        return ()
    return tuple(pairs[0].renames.get(key, key) for key in pairs[0].pair.key_columns)


def _tables_in(names: list[tuple[str, str]]) -> str:
    return "(" + ", ".join(["(%s, %s)"] * len(names)) + ")"


def refuse_unsafe_tables(pipeline_id: str, compiled: Any, source: DataSource,
                         targets: dict[str, DataSource]) -> None:
    """At the start of a two-way pipeline: refuse a target table whose rows the conflict
    check cannot tell apart as the write does (:func:`table_problems`)."""
    keyed: dict[tuple[str, str, str], tuple[str, ...]] = {}
    for datasource, names in paired_targets(compiled, source, targets, keyed).items():
        args = [part for name in names for part in name]
        with connect(targets[datasource]) as conn, conn.cursor() as cursor:
            cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, COLUMN_NAME FROM "
                           "information_schema.STATISTICS WHERE NON_UNIQUE = 0 AND "
                           f"(TABLE_SCHEMA, TABLE_NAME) IN {_tables_in(names)} "
                           "ORDER BY 1, 2, INDEX_NAME = 'PRIMARY' DESC, 3, SEQ_IN_INDEX", args)
            uniques = cursor.fetchall()
            cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE, "
                           "CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
                           "WHERE COLLATION_NAME IS NOT NULL AND (TABLE_SCHEMA, TABLE_NAME) "
                           f"IN {_tables_in(names)}", args)
            texts = cursor.fetchall()
            cursor.execute("SELECT EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, TRIGGER_NAME FROM "
                           "information_schema.TRIGGERS WHERE (EVENT_OBJECT_SCHEMA, "
                           f"EVENT_OBJECT_TABLE) IN {_tables_in(names)} ORDER BY 1, 2, 3", args)
            triggers = cursor.fetchall()
            cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM "
                           "information_schema.COLUMNS WHERE EXTRA LIKE '%%auto_increment%%' "
                           f"AND (TABLE_SCHEMA, TABLE_NAME) IN {_tables_in(names)} "
                           "ORDER BY 1, 2", args)
            counted = cursor.fetchall()
            theirs = _numbering(cursor) if counted else None
        problems = table_problems(f"pipeline {pipeline_id} (two-way): target table",
                                  datasource, uniques, texts, triggers, {
                                      (schema, table): named for (where, schema, table), named
                                      in keyed.items() if where == datasource})
        if theirs is not None and theirs == _source_numbering(source):
            schema, table, column = counted[0]
            problems.append(
                f"pipeline {pipeline_id} (two-way): table {schema}.{table} numbers rows by "
                f"AUTO_INCREMENT column {column}, and {source.name} and {datasource} number "
                f"alike (auto_increment_increment {theirs[0]}, offset {theirs[1]}): rows the "
                "two sides insert at once get the same ids, and one side's row would be "
                "written over the other's. Give each side its own numbers (SET GLOBAL "
                "auto_increment_increment = 2 on both, auto_increment_offset = 1 on one and 2 "
                "on the other, and in my.cnf), then start the channel again")
        if problems:
            raise ConfigError(problems[0])


def _numbering(cursor: Any) -> tuple[int, int]:
    """The connected server's auto_increment_increment and offset."""
    cursor.execute("SELECT @@auto_increment_increment, @@auto_increment_offset")
    increment, offset = cursor.fetchone()
    return int(increment), int(offset)


def _source_numbering(source: DataSource) -> tuple[int, int]:
    with connect(source) as conn, conn.cursor() as cursor:
        return _numbering(cursor)


def table_problems(who: str, datasource: str, uniques: Iterable[tuple[Any, ...]],
                   texts: Iterable[tuple[Any, ...]], triggers: Iterable[tuple[Any, ...]],
                   named: dict[tuple[str, str], tuple[str, ...]] | None = None
                   ) -> list[str]:
    """Why two-way rows of these target tables would differ on the two sides unseen:
    ``uniques`` (schema, table, index, column), ``texts`` (schema, table, column, type,
    charset, collation), ``triggers`` (schema, table, name), ``named`` the columns a
    pair's ``key_columns`` name on a table (by schema, table)."""
    keys: dict[tuple[str, str], dict[str, list[str]]] = {}
    for schema, table, index, column in uniques:
        keys.setdefault((str(schema), str(table)), {}).setdefault(str(index), []).append(
            str(column))
    problems = []
    for (schema, table), columns in (named or {}).items():
        indexes = keys.get((schema, table)) or next(  # (names as the server spells them)
            (found for (there, name), found in keys.items()
             if (there.lower(), name.lower()) == (schema.lower(), table.lower())), {})
        if {c.lower() for c in columns} not in [{c.lower() for c in index}
                                                for index in indexes.values()]:
            held = "; ".join(f"{name} ({', '.join(index)})" for name, index in indexes.items())
            problems.append(
                f"{who} {schema}.{table} on {datasource}: the pair's key_columns "
                f"({', '.join(columns)}) are not a unique key of it (its unique keys: "
                f"{held or 'none'}): the conflict check reads a row by the key_columns, "
                "while the write (INSERT … ON DUPLICATE KEY UPDATE) lands on the row its "
                "unique key collides with, so rows the two sides wrote under one unique key "
                "and two values of the other columns would overwrite each other unseen and "
                "the sides would differ. Name exactly the columns of the table's unique key "
                "in key_columns (or leave key_columns out), or replicate the table with a "
                "one-way channel, then start the channel again")
    for (schema, table), indexes in keys.items():
        if len(indexes) > 1:
            problems.append(
                f"{who} {schema}.{table} on {datasource} has {len(indexes)} unique keys "
                f"({', '.join(indexes)}): the conflict check reads a row by one key, while "
                "the write (INSERT … ON DUPLICATE KEY UPDATE) lands on the row any unique key "
                "collides with, so rows the two sides insert under two keys with one value of "
                "another unique key would overwrite each other unseen and the sides would "
                "differ. Keep one unique key on both sides, or replicate the table with a "
                "one-way channel, then start the channel again")
    for schema, table, column, data_type, charset, collation in texts:
        indexes = keys.get((str(schema), str(table)), {})
        key = next(iter(indexes.values()), [])
        why = loose_collation(str(data_type), str(collation))
        if str(column) in key and why:
            problems.append(
                f"{who} {schema}.{table} on {datasource}: key column {column} has collation "
                f"{collation}, under which the server takes {why} for one key, where the "
                "conflict check compares exact values: a key written on both sides in two "
                "such spellings would land on the other side's row unseen. Give the key a "
                f"binary collation that pads no spaces (… MODIFY {column} … COLLATE "
                f"{charset}_nopad_bin on MariaDB, {charset}_0900_bin on MySQL 8) on both "
                "sides, or replicate the table with a one-way channel, then start the "
                "channel again")
    for schema, table, name in triggers:
        problems.append(
            f"{who} {schema}.{table} on {datasource} has trigger {name}: the rows a trigger "
            "writes while setl loads ride in its marked transaction and never cross back, "
            "while the other side's own copy of the trigger writes its own, so they would be "
            "doubled or differ. Drop the table's triggers on both sides, or replicate it "
            "with a one-way channel, then start the channel again")
    return problems


def kept_parts(change: TargetChange, old_lost: bool, new_lost: bool) -> list[TargetChange]:
    """What the losing side writes of a change: nothing when its key conflicts; an update
    that moves the row to another key as a delete at the old key and an insert at the new
    one, each left out alone when its own key conflicts."""
    if not (old_lost or new_lost):
        return [change]
    if change.type is not ChangeType.UPDATE or (old_lost and new_lost):
        return []  # (an update that keeps its key has one part: both lost or neither)
    if old_lost:  # the row moves here: it is written at the new key, the old one kept
        return [change._replace(type=ChangeType.INSERT, before_key=None, before=None)]
    return [change._replace(type=ChangeType.DELETE, after=None)]  # the old key goes


def touched_keys(changes: Iterable[TargetChange]) -> dict[TableName, list[Key]]:
    """Per table: the keys the batch's changes name (before and after a change), once each."""
    found: dict[TableName, dict[Key, None]] = {}
    for change in sorted(changes, key=lambda c: c.seq):
        table = found.setdefault((change.schema, change.table, change.keys), {})
        if change.before_key is not None:
            table.setdefault(change.before_key, None)
        if change.after is not None:
            table.setdefault(tuple(change.after[k] for k in change.keys), None)
    return {name: list(keys) for name, keys in found.items()}


def _moved_onto(pipeline_id: str, process_id: int, change: TargetChange) -> str:
    """The error for a winner's move onto a key the target holds, in a table written step by
    step: the move's UPDATE meets the target's own row (error 1062 at every try, or, with
    skip_load_exception, both sides kept apart), and deleting that row first would run its
    ON DELETE rules on the target alone."""
    new = tuple(change.after[k] for k in change.keys)  # type: ignore[index]
    return (f"pipeline {pipeline_id} (processId {process_id}): {change.schema}.{change.table} "
            f"moves its row of key {change.before_key} to key {new}, where the target holds a "
            "row of its own (both sides wrote that key: a conflict this side wins); the table "
            "has a foreign key to or from it, so setl neither deletes the target's row first "
            "(its ON DELETE rules would change the target alone) nor writes over it. Delete the "
            f"target's row of key {new} by hand, deciding what its child rows become, then "
            "resume the channel: the move writes the source's row there")
