"""What the workers need to know of a lake table: its columns with their Delta types, the
key its rows are merged by, its mode and partitions (:class:`LakeFacts`), worked out in the
node from the source's table map and the pair, and shipped with each job."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from node.target.delta.columns import META_PREFIX, LakeColumn, table_columns
from shared.errors import ConfigError

Target = tuple[str, str, str]  # datasource, schema, table
MIRROR, CHANGELOG = "mirror", "changelog"


@dataclass(frozen=True)
class LakeFacts:
    columns: tuple[LakeColumn, ...] = ()
    keys: tuple[str, ...] = ()  # the target columns rows are merged by (mirror)
    mode: str = MIRROR
    partition_by: tuple[str, ...] = ()
    foreign_keys: bool = False  # (what the planner asks of every kind of target)

    def ordered(self, keys: tuple[str, ...]) -> bool:
        return False


class LakeTables:
    """The lake facts of a pipeline's target tables, from the pairs of ``compiled`` (a
    :class:`node.extract.etl.CompiledPipeline`, used by its attributes only: a target never
    imports Extract)."""

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled
        self._known: dict[Target, LakeFacts] = {}
        self._lock = threading.Lock()

    def of(self, target: Target, layout: Any = None) -> LakeFacts:
        found = self._known.get(target)
        if found is not None or layout is None:
            return found or LakeFacts()
        with self._lock:
            facts = self._known[target] = self._facts(target, layout)
        return facts

    def forget(self) -> None:
        with self._lock:
            self._known.clear()

    def close(self) -> None:
        pass

    def _facts(self, target: Target, layout: Any) -> LakeFacts:
        where = f"{layout.schema}.{layout.table} → {target[1]}.{target[2]}"
        entry = next((entry for entry in self.compiled.pairs_for(layout.schema, layout.table)
                      if entry.address(layout.schema, layout.table) == target or
                      entry.route is not None), None)
        if entry is None:
            return LakeFacts()
        pair = entry.pair
        source_keys = pair.key_columns or layout.primary_key or \
            self.compiled.table_keys.get((layout.schema, layout.table), ())

        def map_name(name: str) -> str | None:
            if name not in source_keys and (name in entry.exclude or
                                            (entry.include and name not in entry.include)):
                return None
            return entry.renames.get(name, name)

        columns = table_columns(layout, map_name)
        named = {column.name for column in columns}
        extra = [filler.name for filler in entry.fillers] + \
            [column for join in pair.joins for column in join.columns]
        columns += [LakeColumn(name, "string") for name in extra if name not in named]
        clash = [column.name for column in columns if column.name.startswith(META_PREFIX)]
        if clash:
            raise ConfigError(f"{entry.where}: column {clash[0]} of {where} starts with "
                              f"{META_PREFIX!r}, which a lake table keeps for setl's own "
                              "columns; rename it with column_pairs")
        mode = pair.mode or MIRROR
        keys = tuple(entry.renames.get(key, key) for key in source_keys)
        if mode == MIRROR and not keys:
            raise ConfigError(
                f"{entry.where}: {where} has no key, and a mirrored lake table merges rows "
                "by key (a Delta MERGE cannot remove one of two equal rows); give the pair "
                "'mode: changelog' (every change appended) or 'key_columns'")
        missing = [name for name in pair.partition_by if name not in
                   {column.name for column in columns}]
        if missing:
            raise ConfigError(f"{entry.where}: partition_by names {missing[0]}, which "
                              f"{target[1]}.{target[2]} does not have")
        return LakeFacts(tuple(columns), keys, mode, tuple(pair.partition_by))
