"""Which of the keys a chunk found different really are: no false difference from a row
that changed while verify read it.

A chunk reads the source at binlog position ``S`` and the target a moment later, when the
pipeline may not have loaded ``S`` yet (the row is on its way) or may have loaded later
changes (the target is ahead). So a key found different is only a *candidate*. Each round
holds the candidates still on the source and compares both sides in the same state:

1. lock the candidates' rows on the source (share locks, and gap locks where a row is
   missing: no writer changes, deletes or inserts them meanwhile), read them, and take the
   binlog position ``S`` (every change of theirs is at or before it);
2. wait until the pipeline has loaded past ``S`` — at most ``HOLD_S`` while holding the
   locks — and read the targets: equal → not a difference (it was in flight); different →
   **confirmed**: both sides were read with the keys unchanged since ``S``;
3. release the locks. A pipeline that did not load ``S`` in time is waited for without them
   (as long as verify's settle timeout allows), and the keys are tried again.

Comparing signatures of two source reads is not enough: a row deleted and inserted again
the same, or changed and changed back, between them looks unchanged (ABA). A key not
settled within the rounds is *unsettled*: reported apart, never as a difference.
The functions here take the reads as arguments (:class:`Reads`), so the rule is tested
without servers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from node.verify.readers import Key, Side, Signature
from shared.model import BinlogPosition

HOLD_S = 5.0  # how long source rows are held locked while the pipeline catches up


@dataclass(frozen=True)
class Seen:
    """A key as observed once: its source signature, its target signature, and whether
    the target had loaded past the source's position when it was read."""

    expected: Signature
    actual: Signature
    caught_up: bool


class Reads(Protocol):
    def source(self, keys: Sequence[Key]) -> tuple[BinlogPosition, Side] | None: ...

    def release(self) -> None: ...

    def targets(self, keys: Sequence[Key], side: Side
                ) -> dict[Key, tuple[Signature, Signature]]: ...


@dataclass
class Outcome:
    confirmed: dict[Key, Seen] = field(default_factory=dict)
    unsettled: set[Key] = field(default_factory=set)
    rounds: int = 0


def settle(pending: dict[Key, Seen], reads: Reads,
           wait_loaded: Callable[[BinlogPosition, float | None], bool],
           rounds: int = 6) -> Outcome:
    """Re-check ``pending`` (candidates with their first observation) until each is
    confirmed or equal, for at most ``rounds`` locked source reads. ``wait_loaded(at,
    limit_s)`` says whether the pipeline loaded past ``at`` within ``limit_s`` (None: as
    long as verify may wait; it raises when that runs out)."""
    outcome = Outcome()
    pending = dict(pending)
    while pending and outcome.rounds < rounds:
        outcome.rounds += 1
        keys = list(pending)
        held = reads.source(keys)  # held still until released
        if held is None:
            continue  # a writer had them (deadlock, lock wait): another round
        at, side = held
        try:
            observed = reads.targets(keys, side) if wait_loaded(at, HOLD_S) else None
        finally:
            reads.release()
        if observed is None:
            wait_loaded(at, None)  # without the locks, then again
            continue
        for key in keys:
            expected, actual = observed.get(key, (side.signature(key), side.signature(key)))
            del pending[key]
            if expected != actual:
                outcome.confirmed[key] = Seen(expected, actual, True)
    outcome.unsettled = set(pending)
    return outcome


def kinds(seen: Seen) -> list[tuple[str, str]]:
    """What is wrong with a confirmed key, per target table: (kind, table) with kind
    missing (the target lacks the row), extra (the source gives no such row there) or
    different."""
    expected, actual = dict(seen.expected), dict(seen.actual)
    found = [("missing", table) for table in expected if table not in actual]
    found += [("extra", table) for table in actual if table not in expected]
    found += [("different", table) for table, value in expected.items()
              if table in actual and actual[table] != value]
    return sorted(found)
