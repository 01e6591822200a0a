"""A batch's merged changes as MySQL/MariaDB statement texts, a unit per target table: the
MySQL target's form, made in the Spark workers (:func:`node.extract.job.run_part`) and, for a
batch written again statement by statement or a two-way batch, in the node by Load.
"""

from __future__ import annotations

import dataclasses

from node.changes import TargetChange
from node.jobs import JobSpec, Unit
from node.merge import TableWrites, merge
from node.target.mysql import loaddata
from node.target.mysql.facts import TableFacts, Target
from node.target.mysql.render import statements
from node.target.mysql.sqltext import Sql, texts
from shared.errors import ConfigError


def render(changes: list[TargetChange], spec: JobSpec, big: bool = True) -> list[Unit]:
    """Merged and rendered statements of the changes, a unit per table (or run)."""
    facts = spec.facts
    size = 1 if spec.one_by_one else spec.load_batch_size
    units = []

    def ordered(name: Target, keys: tuple[str, ...]) -> bool:
        return facts.get(name, _NO_FACTS).ordered(keys)

    for writes in merge(changes, ordered, spec.gathered):
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
        sqls = _replaced(writes, table, spec) if not big else None
        if sqls is None:
            sqls = [sql for statement in statements(writes, size, table.columns, big,
                                                    name in spec.parted, table.packet)
                    for sql in texts(statement, keep_what=spec.one_by_one)]
        units.append(Unit(*name, writes.push_weight, writes.first_seq, sqls, writes.rows,
                          writes.keys, ordered=writes.ordered))
    return units


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
