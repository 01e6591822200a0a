"""node/verify/task.py ``runs``: consecutive chunks grouped into the runs the sql method sums
with one query a side, shrinking towards the end when several threads take them in turn."""

from __future__ import annotations

from node.extract.chunks import chunks_of
from node.verify.task import RUN, runs


def test_every_chunk_once_in_key_order_and_runs_consecutive() -> None:
    chunks = chunks_of(list(range(1, 193)))  # 193 chunks
    for threads in (1, 2, 6, 500):
        found = runs(chunks, threads=threads)
        assert [c.index for run in found for c in run] == list(range(193))
        for run in found:
            assert 1 <= len(run) <= RUN
            assert [c.index for c in run] == list(range(run[0].index, run[0].index + len(run)))


def test_one_thread_takes_full_runs_and_several_end_on_single_chunks() -> None:
    chunks = chunks_of(list(range(1, 193)))
    assert [len(run) for run in runs(chunks)] == [RUN] * 24 + [1]
    sizes = [len(run) for run in runs(chunks, threads=6)]
    # full runs while the chunks left are many; never longer than the rest shared by six
    assert sizes[:19] == [RUN] * 19 and sizes[-6:] == [1] * 6
    assert sizes == sorted(sizes, reverse=True)
    left = 193
    for size in sizes:
        assert size <= -(-left // 6)
        left -= size


def test_the_null_chunk_stays_alone() -> None:
    chunks = chunks_of([10, 20, 30], nulls=True)
    assert [[c.index for c in run] for run in runs(chunks, threads=2)] == [[0, 1, 2], [3], [4]]
    assert [[c.index for c in run] for run in runs(chunks)] == [[0, 1, 2, 3], [4]]
