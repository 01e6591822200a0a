"""What the free door remembers of the target rows a window's row displaced
(:meth:`node.snapshot.door.DoorQueue.displaced`), so that deleting them and asking for them
again never loses a row for good nor goes round forever.

- **another feeder**: a target table another pipeline also writes (another channel's, or
  another pipeline of this one: ZooKeeper's definitions, :func:`~node.snapshot.sourceof.
  other_writers`) may hold a row of theirs there, which this pipeline's source tables lack:
  asked of them it comes back missing and stays deleted. The batch stops instead.
- **displaced twice**: a key displaced and copied again is in step with the source; only a
  row this pipeline's sources hold twice under the target's unique key (gathered tables
  whose unique values overlap, a unique index only on the target) or another feeder can
  displace it again — each copy would displace the other's row forever. A key displaced by
  a second batch of the run stops it (a batch Load retries is the same batch).
- **all missing**: a displaced key every source table it was asked of lacks is deleted for
  good: right where the source deleted it, a loss where another writer put it; said at
  WARNING.

Memory is per runner attempt and bounded (:data:`KEPT` keys a table, the oldest forgotten).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from shared.errors import DisplacedStop

log = logging.getLogger("setl.node.snapshot.door")
KEPT = 100_000  # displaced keys remembered per target table (and requests awaited)
Target = tuple[str, str, str]


def _key(key: Any) -> list[Any]:
    return list(key) if key is not None else []


class Moves:
    """One runner attempt's memory of displaced rows (see the module)."""

    def __init__(self, pipeline_id: str, feeders: Callable[[Target], list[str]] | None
                 ) -> None:
        self.pipeline_id = pipeline_id
        self._feeders = feeders
        self._seen: dict[Target, OrderedDict[tuple[Any, ...], int]] = {}
        # request id → (group, ); group → [requests left, any loaded, table, key]
        self._asked: OrderedDict[int, int] = OrderedDict()
        self._groups: OrderedDict[int, list[Any]] = OrderedDict()
        self._next = 0

    def check(self, target: Target, moved: list[Any], process_id: int) -> None:
        """Raises :class:`DisplacedError` where the rows ``moved`` (``Moved``: key, by,
        index) must not be deleted; else remembers them."""
        name = f"{target[1]}.{target[2]}"
        others = self._other_writers(target)
        if others:
            one = moved[0]
            log.error("event=displaced_rows_other_writer pipeline=%s target=%s table=%s "
                      "unique=%s key=%s by=%s others=%s", self.pipeline_id, target[0], name,
                      one.index, _key(one.key), _key(one.by), ",".join(others))
            raise DisplacedStop(
                f"pipeline {self.pipeline_id}, target {target[0]}, table {name}: a row read in "
                f"a window (key {_key(one.by) or '?'}) meets the row of key {_key(one.key)} on "
                f"the unique key {one.index}"
                + (f" ({len(moved)} such rows)" if len(moved) > 1 else "")
                + f", and pipeline(s) {', '.join(others)} write the table too: that row may be "
                "theirs, which this pipeline's source tables cannot copy again, so it is not "
                "deleted. The batch is stopped, not committed. The target is out of step "
                "there, or the feeders' unique values overlap: compare the row with each "
                "feeder's source (setl verify), remove the target row that is wrong (or give "
                "the feeders unique values that do not overlap), then resume the channel")
        seen = self._seen.setdefault(target, OrderedDict())
        again = [one for one in moved if seen.get(tuple(one.key), process_id) != process_id]
        if again:
            one = again[0]
            log.error("event=displaced_rows_again pipeline=%s target=%s table=%s unique=%s "
                      "key=%s by=%s count=%d", self.pipeline_id, target[0], name, one.index,
                      _key(one.key), _key(one.by), len(again))
            raise DisplacedStop(
                f"pipeline {self.pipeline_id}, target {target[0]}, table {name}: the row of "
                f"key {_key(one.key)} was displaced a second time on the unique key "
                f"{one.index}, now by the row of key {_key(one.by) or '?'}, after it had been "
                "copied again from the source: two source rows hold one value of that unique "
                "key (source tables gathered into the table whose unique values overlap, or a "
                "unique index the target has and the source lacks), and each copy would "
                "displace the other forever. The batch is stopped, not committed. Make the "
                "values unique on the source, or drop or widen that unique index on the "
                "target (or map the tables to different target tables), then resume the "
                "channel")
        for one in moved:
            seen[tuple(one.key)] = process_id
            seen.move_to_end(tuple(one.key))
        while len(seen) > KEPT:
            seen.popitem(last=False)

    def _other_writers(self, target: Target) -> list[str]:
        if self._feeders is None:
            return []
        return self._feeders(target)  # read afresh: a channel added since writes it too

    def asked(self, target: Target, key: tuple[Any, ...], ids: list[int]) -> None:
        """A displaced key asked again by the requests ``ids`` (one per source table)."""
        self._next += 1
        self._groups[self._next] = [len(ids), False, f"{target[1]}.{target[2]}", list(key)]
        for one in ids:
            self._asked[one] = self._next
        while len(self._asked) > KEPT:
            self._groups.pop(self._asked.popitem(last=False)[1], None)

    def noted(self, notes: list[Any]) -> None:
        """Requests served: where each asking for a displaced key came back missing, the
        key is said (the row is deleted for good)."""
        for note in notes:
            group = self._asked.pop(note.buffer_id, None)
            found = self._groups.get(group) if group is not None else None
            if found is None:
                continue
            found[0] -= 1
            found[1] = found[1] or note.outcome != "missing"
            if found[0] <= 0:
                del self._groups[group]
                if not found[1]:
                    log.warning("event=displaced_rows_missing pipeline=%s table=%s key=%s: a "
                                "displaced row no source table of the pipeline has: deleted "
                                "for good (right where the source deleted it; if another "
                                "writer put it on the target, it is lost there: copy it again)",
                                self.pipeline_id, found[2], found[3])
