"""Shard routing (DRC's slot router): one source table spread over numbered target tables,
possibly on several target servers.

The pairs of a pipeline that read the same source media and carry a shard rule form one
route. Their targets, in pair order and then name order, are the slots: the pair
``shop.orders → target:shop_[0-1].orders_[0-3]`` gives 8 slots ``shop_0.orders_0`` …
``shop_1.orders_3``; a second pair ``shop.orders → target2:shop_[2-3].orders_[0-3]`` adds 8
more on another server. A row goes to slot

- ``value % slots`` (**modulo balance**), or
- ``value // table_balance_size % slots`` (**quotient balance**: runs of
  ``table_balance_size`` consecutive values share a slot),

where ``value`` is the row's shard column (an integer). Deletes route by the before image;
an update that changes the slot moves the row (delete in the old slot, upsert in the new). A
delete whose image holds only the key (a free-door ``D`` request, which names a key the
source no longer has) goes to every slot, whether the key holds the shard column or not: the
row may be in any of them (a copy left in a wrong slot is deleted too).

A route's rule and slots cannot change on a channel that has run (``setl apply`` refuses
it): rows already written stay in the slots the old rule gave them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from node.changes import ChangeType, Row, RowChange
from shared.errors import ConfigError, ShardError
from shared.model import MediaPair, ShardAlgorithm, ShardRule

Slot = tuple[str, str, str]  # datasource, schema, table


@dataclass(frozen=True)
class Route:
    rule: ShardRule
    slots: tuple[Slot, ...]

    @classmethod
    def of(cls, pairs: list[MediaPair]) -> Route:
        slots = [(pair.target.datasource, namespace, table) for pair in pairs
                 for namespace in pair.target.namespace.names()
                 for table in pair.target.table.names()]
        return cls(pairs[0].shard, tuple(slots))  # type: ignore[arg-type]

    def slot(self, row: Row, where: str, key: tuple[Any, ...]) -> Slot:
        column = self.rule.column
        value = row.get(column)
        if isinstance(value, bool) or value is None or not _integral(value):
            what = "missing" if column not in row else f"{value!r}, not an integer"
            raise ShardError(f"{where}: row {key!r} cannot be routed: shard column {column} "
                             f"is {'NULL' if value is None and column in row else what}")
        number = int(value)
        if self.rule.algorithm is ShardAlgorithm.QUOTIENT:
            number //= self.rule.table_balance_size
        return self.slots[number % len(self.slots)]

    def split(self, change: RowChange, where: str) -> Iterator[tuple[Slot, RowChange]]:
        """The change addressed to its slot(s): a move between slots is a delete and an
        insert."""
        key = change.key()
        if change.type is ChangeType.INSERT:
            yield self.slot(change.after or {}, where, key), change
        elif change.type is ChangeType.DELETE:
            before = change.before or {}
            if self.rule.column not in before or before.keys() <= set(change.keys):
                # a key alone (a free-door or verify --repair D): the row may be in any slot,
                # also a wrong one, the shard column in the key or not
                for slot in dict.fromkeys(self.slots):
                    yield slot, change
                return
            yield self.slot(change.before or {}, where, key), change
        else:
            old = self.slot(change.before or {}, where, key)
            new = self.slot(change.after or {}, where, key)
            if old == new:
                yield new, change
            else:
                yield old, RowChange(change.schema, change.table, ChangeType.DELETE,
                                     change.keys, change.before, None,
                                     commit_ts_ms=change.commit_ts_ms)
                yield new, RowChange(change.schema, change.table, ChangeType.INSERT,
                                     change.keys, None, change.after,
                                     commit_ts_ms=change.commit_ts_ms)


def _integral(value: Any) -> bool:
    try:
        return int(value) == value or (isinstance(value, str) and str(int(value)) == value)
    except (TypeError, ValueError):
        return False


def routes(pairs: tuple[MediaPair, ...]) -> dict[int, tuple[Route, bool]]:
    """The route of each shard pair (by its index), and whether the pair is the route's
    first: pairs reading the same source share one route, which only the first runs."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for index, pair in enumerate(pairs):
        if pair.shard is not None:
            source = pair.source
            groups.setdefault((source.datasource, source.namespace.literal, source.table.literal),
                              []).append(index)
    found = {}
    for indexes in groups.values():
        for other in indexes[1:]:  # a definition written straight into ZooKeeper
            apart = pairs[other].settings_apart(pairs[indexes[0]])
            if apart:
                raise ConfigError(
                    f"the pairs that shard {pairs[other].source} differ in {', '.join(apart)}: "
                    "the pairs of one shard route share its settings, their targets aside; "
                    "give them the same (setl apply), then start the channel again")
        route = Route.of([pairs[i] for i in indexes])
        found.update({i: (route, i == indexes[0]) for i in indexes})
    return found
