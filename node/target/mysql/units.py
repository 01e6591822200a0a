"""A batch's merged changes as MySQL/MariaDB statement texts, a unit per target table: the
MySQL target's form, made in the Spark workers (:func:`node.extract.job.run_part`) and, for a
batch written again statement by statement or a two-way batch, in the node by Load.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from node.changes import TargetChange
from node.jobs import READ_BIT, ROW_BITS, JobSpec, Unit
from node.merge import TableWrites, merge
from node.target.mysql import displaced, loaddata, lookedup
from node.target.mysql.facts import TableFacts, Target
from node.target.mysql.render import statements
from node.target.mysql.sqltext import Sql, texts
from shared.errors import ConfigError


def render(changes: list[TargetChange], spec: JobSpec, big: bool = True) -> list[Unit]:
    """Merged and rendered statements of the changes, a unit per table (or run)."""
    facts = spec.facts
    size = 1 if spec.one_by_one else spec.load_batch_size
    units = []
    # rows a window read, and the stream's into a table being copied, by table (a part of
    # the stream alone where no table is copied has none to look for)
    read = lookedup.read_rows(changes, facts, spec.copying) \
        if spec.reads or spec.copying else {}

    def ordered(name: Target, keys: tuple[str, ...]) -> bool:
        return facts.get(name, _NO_FACTS).ordered(keys)

    for writes in merge(changes, ordered, spec.gathered, _unchecked(spec.unchecked, facts)):
        name = (writes.datasource, writes.schema, writes.table)
        table = facts.get(name, _NO_FACTS)
        if table.unkeyed(writes.keys):
            raise ConfigError(
                f"target {name[0]}: table {name[1]}.{name[2]} has no primary key or unique "
                f"key over ({', '.join(writes.keys)}), the columns its rows are found by: "
                "each update would add a row beside the old one. Give the target table a "
                "primary key on those columns (or a unique key over NOT NULL columns among "
                "them), or name the target key's columns in the pair's 'key_columns' (a "
                "wider key, as a partitioned table's), then resume the channel")
        rendered = functools.partial(_rendered, size=size, table=table, big=big,
                                     parted=name in spec.parted, keep=spec.one_by_one)
        sqls = _replaced(writes, table, spec) if not big else None
        if sqls is None and name in read:  # rows a window read: none lands on another key's
            sqls = displaced.sqls(writes, read[name], table, size, rendered)
        if sqls is None:
            sqls = rendered(writes)
        units.append(Unit(*name, writes.push_weight, writes.first_seq, sqls, writes.rows,
                          writes.keys, ordered=writes.ordered,
                          unchecked=writes.unchecked))
    return units


def _rendered(writes: TableWrites, size: int, table: TableFacts, big: bool, parted: bool,
              keep: bool) -> list[Sql]:
    return [sql for statement in statements(writes, size, table.columns, big, parted,
                                            table.packet,
                                            () if writes.unchecked else table.children)
            for sql in texts(statement, keep_what=keep)]


def _unchecked(places: frozenset[int] | None, facts: dict[Target, TableFacts]
               ) -> Callable[[Target, tuple[str, ...], int, bool], bool] | None:
    """Whether a change of a table with foreign keys (by its seq) goes with
    foreign_key_checks off:

    - a row a window read: the source's state as of its high watermark (it must not
      cascade, and its order among tables does not matter);
    - a change of a rows event the source wrote with them off (``places``);
    - an upsert that changes no column a foreign key references (:meth:`TableFacts.inert`):
      it fires no action, and a check could only refuse a row the source holds — a child
      whose parent a snapshot has not copied yet.

    The rest — a delete, a key change — goes with them on: the target's foreign keys redo
    the cascades the binlog does not carry."""
    if places is None and not any(table.foreign_keys for table in facts.values()):
        return None
    known: dict[tuple[Target, tuple[str, ...]], tuple[bool, bool]] = {}

    def unchecked(name: Target, keys: tuple[str, ...], seq: int, cascades: bool) -> bool:
        found = known.get((name, keys))
        if found is None:  # (a table without foreign keys: its runs are never split)
            table = facts.get(name, _NO_FACTS)
            found = known[name, keys] = (table.foreign_keys, bool(keys) and table.inert(keys))
        if not found[0]:
            return False
        if places is not None and (seq & READ_BIT or (seq >> ROW_BITS) in places):
            return True
        return found[1] and not cascades
    return unchecked


def _replaced(writes: TableWrites, table: TableFacts, spec: JobSpec) -> list[Sql] | None:
    """A merged table's deletes, then its upserts as LOAD DATA … REPLACE (see
    :mod:`node.target.mysql.loaddata`); None where they go as INSERTs (also where the target
    server takes no LOAD DATA LOCAL: ``local_infile`` OFF)."""
    if not table.local_infile or spec.one_by_one or not spec.load_data_min_rows or \
            writes.steps or writes.changes or len(writes.upserts) < spec.load_data_min_rows:
        return None
    replaced = loaddata.replaces(writes.schema, writes.table, writes.upserts, table.columns,
                                 table.triggers)
    if replaced is None:
        return None
    deletes = dataclasses.replace(writes, upserts=[])
    return [sql for statement in statements(deletes, spec.load_batch_size, table.columns,
                                            parted=(writes.datasource, writes.schema,
                                                    writes.table) in spec.parted)
            for sql in texts(statement)] + replaced


_NO_FACTS = TableFacts()
