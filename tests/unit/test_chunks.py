"""The chunk splitter's boundary math, without a server: fixed steps, stepped boundaries
(emulating the database's ``k > ? ORDER BY k LIMIT 1 OFFSET n-1`` on sorted values), the
chunks they make, their SQL conditions and which chunk holds a value."""

from __future__ import annotations

import bisect
import random

import pytest

from node.extract.chunks import (
    Chunk,
    SplitKey,
    chunks_of,
    condition,
    dense,
    fixed_bounds,
    locate,
    stepped_bounds,
)

KEY = SplitKey("shop", "orders", ("id",), "int")


def stepper(values: list, chunk_size: int):
    """``nth_after`` over sorted ``values`` as the stepping query answers it."""
    ordered = sorted(values)

    def nth_after(after):
        start = bisect.bisect_right(ordered, after)
        index = start + chunk_size - 1
        return ordered[index] if index < len(ordered) else None
    return nth_after


def members(chunks: tuple[Chunk, ...], values: list) -> list[list]:
    """Which values each chunk's range holds (Python's ordering stands in for the DB's)."""
    def inside(chunk: Chunk, value) -> bool:
        if chunk.nulls:
            return value is None
        return value is not None and (chunk.low is None or value >= chunk.low) and \
            (chunk.high is None or value < chunk.high)
    return [[v for v in values if inside(chunk, v)] for chunk in chunks]


def test_fixed_steps_cover_a_dense_range_in_chunks_of_the_size_asked() -> None:
    assert fixed_bounds(1, 100, 100, 30) == [31, 61, 91]
    chunks = chunks_of(fixed_bounds(1, 100, 100, 30))
    assert [len(m) for m in members(chunks, list(range(1, 101)))] == [30, 30, 30, 10]
    # half the values present: steps twice as wide, still ~30 rows a chunk
    assert fixed_bounds(0, 199, 100, 30) == [60, 120, 180]
    assert fixed_bounds(5, 5, 1, 10) == [] and fixed_bounds(1, 10, 0, 5) == []
    assert fixed_bounds(-50, 49, 100, 25) == [-25, 0, 25]
    big = 2**64 - 1000  # BIGINT UNSIGNED near its top: Python's integers do not wrap
    assert fixed_bounds(big, big + 999, 1000, 400) == [big + 400, big + 800]


def test_density_decides_between_fixed_and_stepped() -> None:
    assert dense(1, 2_000_000, 2_000_000) and dense(1, 3_000_000, 2_000_000)
    assert not dense(1, 10**12, 2_000_000)  # one outlier far away: stepping it is
    assert not dense(1, 10, 0)


def test_stepped_boundaries_give_chunks_of_the_size_asked_and_cover_every_row() -> None:
    values = list(range(0, 10_000, 7))  # sparse integers
    bounds = stepped_bounds(values[0], stepper(values, 100))
    chunks = chunks_of(bounds)
    sizes = [len(m) for m in members(chunks, values)]
    assert sizes[:-1] == [100] * (len(sizes) - 1) and 0 < sizes[-1] <= 100
    assert sum(sizes) == len(values)


def test_stepping_strings_and_runs_of_one_first_value_longer_than_a_chunk() -> None:
    rng = random.Random(5)
    # a composite key's first column: many rows share a value, one run is 3 chunks long
    values = sorted([rng.choice("abcdefghij") for _ in range(500)] + ["m"] * 150 + ["z"])
    bounds = stepped_bounds(values[0], stepper(values, 50))
    assert bounds == sorted(set(bounds)), "every boundary is past the one before"
    chunks = chunks_of(bounds)
    held = members(chunks, values)
    assert sum(map(len, held)) == len(values)
    assert any(len(m) >= 150 for m in held), "a run of one value stays in one chunk"
    # a chunk holds its first value's run and fewer than chunk_size rows after it
    assert all(len(m) <= values.count(m[0]) + 49 for m in held if m)


@pytest.mark.parametrize("seed", range(20))
def test_random_splits_put_each_row_in_exactly_one_chunk(seed: int) -> None:
    rng = random.Random(seed)
    values = [rng.randint(-10**6, 10**6) for _ in range(rng.randint(0, 3000))]
    size = rng.randint(1, 400)
    if values and dense(min(values), max(values), len(values)):
        bounds = fixed_bounds(min(values), max(values), len(values), size)
    else:
        bounds = stepped_bounds(min(values), stepper(values, size)) if values else []
    chunks = chunks_of(bounds)
    assert sorted(v for m in members(chunks, values) for v in m) == sorted(values)
    for value in values:
        assert value in members((locate(chunks, value),), [value])[0]


def test_chunks_and_their_conditions() -> None:
    chunks = chunks_of([10, 20])
    assert chunks == (Chunk(0, None, 10), Chunk(1, 10, 20), Chunk(2, 20, None))
    assert condition(KEY, chunks[0]) == ("`id` < %s", [10])
    assert condition(KEY, chunks[1]) == ("`id` >= %s AND `id` < %s", [10, 20])
    assert condition(KEY, chunks[2], column="order id") == ("`order id` >= %s", [20])
    assert condition(KEY, Chunk(0)) == ("TRUE", [])
    nullable = SplitKey("shop", "log", ("ref",), "varchar", nullable=True)
    with_nulls = chunks_of([], nulls=True)
    assert condition(nullable, with_nulls[0]) == ("`ref` IS NOT NULL", [])
    assert condition(nullable, with_nulls[1]) == ("`ref` IS NULL", [])
    assert locate(with_nulls, None) is with_nulls[1]
    with pytest.raises(ValueError, match="NOT NULL"):
        locate(chunks, None)
    assert [locate(chunks, v).index for v in (-5, 9, 10, 19, 20, 10**9)] == [0, 0, 1, 1, 2, 2]


def test_a_guard_stops_a_step_that_never_moves() -> None:
    assert stepped_bounds(1, lambda after: 1, limit=5) == [1] * 5
