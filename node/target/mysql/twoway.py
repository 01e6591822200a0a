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
(:func:`node.target.mysql.twowaytables.table_problems`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from node.changes import ChangeType, Row, TargetChange
from node.target.mysql.currentrows import Key, current_rows, missing_columns, plain_key, same_row
from node.target.mysql.facts import TableFacts, Target
from node.target.mysql.keys import key_padding
from node.target.mysql.twowaytables import engine_problem
from shared.errors import ConfigError

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
