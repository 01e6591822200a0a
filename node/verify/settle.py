"""Which of the keys a chunk found different really are: no false difference from a row
that changed while verify read it.

A chunk reads the source at binlog position ``S`` and the target a moment later, when the
pipeline may not have loaded ``S`` yet (the row is on its way) or may have loaded later
changes (the target is ahead). So a key found different is only a *candidate*. Each round:

1. read the candidates on the source in one consistent snapshot at ``S_r``;
2. a candidate whose previous observation was made with the target loaded past that
   observation's source position, and whose source signature is still the same now, is
   **confirmed**: the source did not change between ``S_{r-1}`` and ``S_r``, the target
   was read at a position ``P_{r-1}`` between them (``S_{r-1} <= P_{r-1}``, and ``S_r``
   was read later), so it held the source's rows of ``P_{r-1}`` — and they differed;
3. wait until the pipeline has loaded past ``S_r``, read the rest on the targets: equal
   now → not a difference (it was in flight); still different → observed again.

A key that changes in every round is *unsettled*: reported apart, never as a difference.
The functions here take the reads as arguments (:class:`Reads`), so the rule is tested
without servers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from node.verify.readers import Key, Side, Signature
from shared.model import BinlogPosition


@dataclass(frozen=True)
class Seen:
    """A key as observed once: its source signature, its target signature, and whether
    the target had loaded past the source's position when it was read."""

    expected: Signature
    actual: Signature
    caught_up: bool


class Reads(Protocol):
    def source(self, keys: Sequence[Key]) -> tuple[BinlogPosition, Side]: ...

    def targets(self, keys: Sequence[Key], side: Side
                ) -> dict[Key, tuple[Signature, Signature]]: ...


@dataclass
class Outcome:
    confirmed: dict[Key, Seen] = field(default_factory=dict)
    unsettled: set[Key] = field(default_factory=set)
    rounds: int = 0


def settle(pending: dict[Key, Seen], reads: Reads,
           wait_loaded: Callable[[BinlogPosition], None], rounds: int = 6) -> Outcome:
    """Re-check ``pending`` (candidates with their first observation) until each is
    confirmed or equal, for at most ``rounds`` source reads."""
    outcome = Outcome()
    pending = dict(pending)
    while pending and outcome.rounds < rounds:
        outcome.rounds += 1
        keys = list(pending)
        at, side = reads.source(keys)
        rest = []
        for key in keys:
            seen = pending[key]
            if seen.caught_up and side.signature(key) == seen.expected:
                outcome.confirmed[key] = pending.pop(key)
            else:
                rest.append(key)
        if not rest or outcome.rounds == rounds:
            break
        wait_loaded(at)
        observed = reads.targets(rest, side)
        for key in rest:
            expected, actual = observed.get(key, (side.signature(key), side.signature(key)))
            if expected == actual:
                del pending[key]  # it was in flight: equal once loaded
            else:
                pending[key] = Seen(expected, actual, True)
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
