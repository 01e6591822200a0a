"""The re-check rule of verify without servers: a source whose keys are held still while a
round compares them, a pipeline that loads up to a position when waited for (or not within
the hold), and keys that are wrong on the target, in flight, or changed and changed back."""

from __future__ import annotations

from collections.abc import Sequence

from node.verify.readers import Key, Side
from node.verify.settle import HOLD_S, Seen, kinds, settle
from shared.model import BinlogPosition

T = "target:db.t"


class World:
    """Source values by position; the target holds the source's values as of ``loaded``,
    except for keys ``corrupt`` (a wrong value there). ``slow`` rounds: the pipeline does
    not load within the hold."""

    def __init__(self, history: dict[Key, list[int]], corrupt: dict[Key, int] | None = None,
                 slow: int = 0) -> None:
        self.history, self.corrupt, self.slow = history, corrupt or {}, slow
        self.position, self.loaded = max(len(v) for v in history.values()) - 1, 0
        self.held, self.contended = False, 0
        self.waits: list[tuple[int, float | None]] = []

    def value(self, key: Key, at: int) -> int:
        values = self.history[key]
        return values[min(at, len(values) - 1)]

    def source(self, keys: Sequence[Key]) -> tuple[BinlogPosition, Side] | None:
        assert not self.held
        if self.contended:  # a writer's deadlock took the round
            self.contended -= 1
            return None
        self.held = True
        side = Side()
        for key in keys:
            side.expected[key] = {T: self.value(key, self.position)}
        return BinlogPosition("bin.000001", self.position), side

    def release(self) -> None:
        assert self.held
        self.held = False

    def targets(self, keys: Sequence[Key], side: Side) -> dict:
        assert self.held, "the targets are compared while the source keys are held"
        return {key: (side.signature(key),
                      frozenset({T: self.corrupt.get(key, self.value(key, self.loaded))}
                                .items())) for key in keys}

    def wait(self, at: BinlogPosition, limit_s: float | None) -> bool:
        self.waits.append((at.pos, limit_s))
        if limit_s is not None and self.slow:
            self.slow -= 1
            return False
        self.loaded = max(self.loaded, at.pos)
        return True


def seen(expected: int, actual: int, caught_up: bool = True) -> Seen:
    return Seen(frozenset({T: expected}.items()), frozenset({T: actual}.items()), caught_up)


def test_a_wrong_row_is_confirmed_with_both_sides_read_while_it_is_held() -> None:
    world = World({(1,): [10]}, corrupt={(1,): 99})
    outcome = settle({(1,): seen(10, 99)}, world, world.wait)
    assert set(outcome.confirmed) == {(1,)} and outcome.rounds == 1
    assert world.waits == [(0, HOLD_S)] and not world.held
    assert kinds(outcome.confirmed[(1,)]) == [("different", T)]


def test_a_row_still_on_its_way_is_not_a_difference() -> None:
    world = World({(1,): [10, 11, 12]})  # the chunk saw 11 on the source, 10 on the target
    outcome = settle({(1,): seen(11, 10, caught_up=False)}, world, world.wait)
    assert not outcome.confirmed and not outcome.unsettled and world.waits == [(2, HOLD_S)]


def test_a_row_deleted_and_inserted_again_between_two_reads_is_not_a_difference() -> None:
    """The chunk read the source before a delete and the target after it (caught up);
    the row came back the same before the re-check: equal signatures at both source reads
    prove nothing (ABA), the held comparison finds both sides equal."""
    world = World({(1,): [10, -1, 10]})  # -1: no row at position 1
    outcome = settle({(1,): seen(10, -1)}, world, world.wait)
    assert not outcome.confirmed and not outcome.unsettled


def test_a_pipeline_slower_than_the_hold_is_waited_for_without_the_locks() -> None:
    world = World({(1,): [10], (2,): [20]}, corrupt={(1,): 99}, slow=1)
    outcome = settle({(1,): seen(10, 99), (2,): seen(20, 21)}, world, world.wait)
    assert set(outcome.confirmed) == {(1,)} and outcome.rounds == 2
    assert world.waits == [(0, HOLD_S), (0, None), (0, HOLD_S)] and not world.held


def test_keys_never_compared_in_time_are_unsettled_never_different() -> None:
    world = World({(1,): [10]}, corrupt={(1,): 99}, slow=100)
    outcome = settle({(1,): seen(10, 99)}, world, world.wait, rounds=3)
    assert not outcome.confirmed and outcome.unsettled == {(1,)} and outcome.rounds == 3


def test_kinds_of_a_row_in_the_wrong_shard_and_of_a_missing_and_an_extra_row() -> None:
    moved = Seen(frozenset({("t:a", 1)}), frozenset({("t:b", 1)}), True)
    assert kinds(moved) == [("extra", "t:b"), ("missing", "t:a")]
    assert kinds(Seen(frozenset(), frozenset({("t:a", 1)}), True)) == [("extra", "t:a")]
    assert kinds(Seen(frozenset({("t:a", 1)}), frozenset(), True)) == [("missing", "t:a")]


def test_consecutive_chunks_go_in_runs_and_the_null_chunk_alone() -> None:
    from node.extract.chunks import chunks_of
    from node.verify.task import runs

    chunks = chunks_of(list(range(10, 130, 10)), nulls=True)  # 13 ranges and the NULL chunk
    assert [[c.index for c in run] for run in runs(chunks, most=5)] == [
        [0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12], [13]]
    assert [[c.index for c in run] for run in runs(chunks[2:4] + chunks[7:9])] == [[2, 3], [7, 8]]


def test_a_round_a_writer_deadlocked_is_tried_again() -> None:
    world = World({(1,): [10]}, corrupt={(1,): 99})
    world.contended = 2
    outcome = settle({(1,): seen(10, 99)}, world, world.wait)
    assert set(outcome.confirmed) == {(1,)} and outcome.rounds == 3
