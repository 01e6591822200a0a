"""The re-check rule of verify without servers: a source and a target that move by binlog
positions, a pipeline that loads up to a position when waited for, and keys that are wrong
on the target, in flight, or changing all the time."""

from __future__ import annotations

from collections.abc import Sequence

from node.verify.readers import Key, Side
from node.verify.settle import Seen, kinds, settle

T = "target:db.t"


class World:
    """Source rows by position; the target holds the source's rows as of ``loaded``,
    except for keys ``corrupt`` (a wrong value there)."""

    def __init__(self, history: dict[Key, list[int]], corrupt: dict[Key, int] | None = None,
                 writes_per_round: set[Key] | None = None) -> None:
        self.history, self.corrupt = history, corrupt or {}
        self.position, self.loaded = 0, 0
        self.hot = writes_per_round or set()
        self.waits: list[int] = []

    def value(self, key: Key, at: int) -> int:
        values = self.history[key]
        return values[min(at, len(values) - 1)]

    def source(self, keys: Sequence[Key]) -> tuple[tuple[str, int], Side]:
        self.position += 1  # time passes: writers went on
        for key in self.hot:
            self.history[key].append(self.history[key][-1] + 1)
        at = self.position
        side = Side()
        for key in keys:
            side.expected[key] = {T: self.value(key, at)}
        return ("bin.000001", at), side

    def targets(self, keys: Sequence[Key], side: Side) -> dict:
        # a hot key was written again after the source read, and the pipeline loaded that
        # too (more than it was waited for): the target is ahead
        for key in self.hot:
            self.history[key].append(self.history[key][-1] + 1)
        self.position += 1 if self.hot else 0
        self.loaded = self.position
        return {key: (side.signature(key),
                      frozenset({T: self.corrupt.get(key, self.value(key, self.loaded))}
                                .items())) for key in keys}

    def wait(self, at: tuple[str, int]) -> None:
        self.waits.append(at[1])


def seen(expected: int, actual: int, caught_up: bool) -> Seen:
    return Seen(frozenset({T: expected}.items()), frozenset({T: actual}.items()), caught_up)


def test_a_wrong_row_on_a_quiet_target_is_confirmed_by_one_source_read() -> None:
    world = World({(1,): [10]}, corrupt={(1,): 99})
    outcome = settle({(1,): seen(10, 99, caught_up=True)}, world, world.wait)
    assert set(outcome.confirmed) == {(1,)} and outcome.rounds == 1 and world.waits == []
    assert kinds(outcome.confirmed[(1,)]) == [("different", T)]


def test_a_row_still_on_its_way_is_not_a_difference() -> None:
    world = World({(1,): [10]})  # the chunk read the target before the pipeline loaded it
    outcome = settle({(1,): seen(10, 9, caught_up=False)}, world, world.wait)
    assert not outcome.confirmed and not outcome.unsettled and world.waits == [1]


def test_a_row_changed_after_the_source_read_is_not_a_difference() -> None:
    # source read at 0 (value 10), target read later when it had 11 loaded already
    world = World({(1,): [10, 11, 11, 11]})
    outcome = settle({(1,): seen(10, 11, caught_up=True)}, world, world.wait)
    assert not outcome.confirmed and not outcome.unsettled


def test_a_key_that_changes_in_every_round_is_unsettled_never_different() -> None:
    world = World({(1,): [10]}, writes_per_round={(1,)})
    outcome = settle({(1,): seen(10, 11, caught_up=True)}, world, world.wait, rounds=4)
    assert not outcome.confirmed and outcome.unsettled == {(1,)} and outcome.rounds == 4


def test_a_wrong_row_read_before_the_target_caught_up_is_confirmed_in_the_next_round() -> None:
    world = World({(1,): [10], (2,): [20]}, corrupt={(1,): 99, (2,): 98})
    outcome = settle({(1,): seen(10, 99, caught_up=False), (2,): seen(20, 98, False)},
                     world, world.wait)
    assert set(outcome.confirmed) == {(1,), (2,)} and outcome.rounds == 2


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
