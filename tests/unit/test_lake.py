"""The Delta target's loader on real Delta tables in a temporary directory: its commits
(position read back, fencing, a replayed batch skipped per table, batches loaded together),
a mirror's MERGE or append by key. The worker's Arrow: test_lake_units.py; the tables made,
compacted and stamped again: test_lake_tables.py. The helpers are tests/unit/lake_helpers.py
(tests that import them from here still find them)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from deltalake import DeltaTable

from node.jobs import ROW_BITS, JobSpec, PartResult
from node.target.delta import units
from node.target.delta.columns import LakeColumn
from node.target.delta.tables import LakeFacts
from shared.errors import ConfigError, FencedError
from tests.unit.lake_helpers import DEL, INS, LOG, MIRROR, SPEC, UPD, batch, change, loader, read


def test_a_new_owner_fences_the_old_and_a_replay_writes_only_what_a_table_lacks(
        tmp_path: Path) -> None:
    first = loader(tmp_path, epoch=3)
    assert first.claim() == {}
    done = units.render([change(MIRROR, INS, 0, {"id": 1, "v": "a"}),
                         change(LOG, INS, 3 << ROW_BITS, {"id": 1, "v": "a"})], SPEC)
    assert first.load_units(batch(7, 300), [PartResult(done, [], 2)]) == 2
    # the next batch reaches the mirror, then the node dies before the changelog's commit
    later = units.render([change(MIRROR, INS, 0, {"id": 2, "v": "b"}),
                          change(LOG, INS, 3 << ROW_BITS, {"id": 2, "v": "b"})], SPEC)
    first.load_units(batch(8, 400), [PartResult(later[:1], [], 1)])
    second = loader(tmp_path, epoch=4)
    claimed = second.claim()
    assert {name: (row.position.pos, row.process_id) for name, row in claimed.items()} == \
        {"lake:s.c": (300, 7), "lake:s.m": (400, 8)}
    with pytest.raises(FencedError, match="newer owner"):  # the old owner wakes: fenced
        first.load_units(batch(9, 500), [PartResult(later[:1], [], 1)])
    # the batch again (Select cut it at the mirror's position): only the changelog lacks it
    assert second.load_units(batch(8, 400), [PartResult(later, [], 2)]) == 1
    assert second.load_units(batch(8, 400), [PartResult(later, [], 2)]) == 0
    assert [row["id"] for row in read(tmp_path, "m")] == [1, 2]
    assert [row["id"] for row in read(tmp_path, "c")] == [1, 2]
    assert DeltaTable(str(tmp_path / "s" / "m")).transaction_version("setl:c.p") == 8


@pytest.mark.parametrize(("kind", "keys"), [
    ("datetime", [datetime.datetime(2024, 1, 1, 0, 0, 0, us) for us in (1000, 1999, 5000)]),
    ("string", ["x" * 40 + "a", "x" * 40 + "b", "x" * 40 + "z" * 30]),
])
def test_a_mirror_finds_keys_that_file_statistics_cut_short(tmp_path: Path, kind: str,
                                                              keys: list) -> None:
    """delta-rs writes a DATETIME(6)'s statistics in milliseconds and a long text's cut: a
    MERGE that skipped files by them would add a key the table holds instead of updating it."""
    facts = LakeFacts((LakeColumn("id", kind), LakeColumn("v", "string")), ("id",))
    spec = JobSpec(1, False, {MIRROR: facts}, target="delta")
    writer = loader(tmp_path, epoch=1)
    writer.claim()
    for pos, group in ((100, keys[:2]), (200, keys[2:])):  # a file each
        rows = [change(MIRROR, INS, i, {"id": key, "v": "old"}) for i, key in enumerate(group)]
        writer.load_units(batch(pos // 100, pos), [PartResult(units.render(rows, spec), [], 2)])
    update = change(MIRROR, UPD, 0, {"id": keys[1], "v": "new"}, (keys[1],))
    writer.load_units(batch(3, 300), [PartResult(units.render([update], spec), [], 1)])
    assert [(row["id"], row["v"]) for row in read(tmp_path, "m")] == \
        [(keys[0], "old"), (keys[1], "new"), (keys[2], "old")]


def test_batches_loaded_together_make_one_commit_per_table_as_each_alone_would(
        tmp_path: Path) -> None:
    first = units.render([change(MIRROR, INS, 0, {"id": 1, "v": "a"}),
                          change(MIRROR, INS, 1, {"id": 2, "v": "b"}),
                          change(LOG, INS, 3 << ROW_BITS, {"id": 1, "v": "a"})], SPEC)
    second = units.render([change(MIRROR, DEL, 0, None, (1,)),
                           change(MIRROR, UPD, 1, {"id": 3, "v": "b"}, (2,)),
                           change(LOG, DEL, 3 << ROW_BITS, None, before={"id": 1, "v": "a"})], SPEC)
    writer = loader(tmp_path, epoch=1)
    assert writer.load_many([(batch(1, 100), [PartResult(first, [], 3)]),
                             (batch(2, 200), [PartResult(second, [], 3)])]) == 6
    assert [(row["id"], row["v"]) for row in read(tmp_path, "m")] == [(3, "b")]
    assert [row["_setl_op"] for row in sorted(DeltaTable(str(tmp_path / "s" / "c"))
            .to_pyarrow_table().to_pylist(), key=lambda row: row["_setl_position"])] == \
        ["I", "D"]
    for name in ("m", "c"):  # one commit each (after the table's making), at the last batch
        history = DeltaTable(str(tmp_path / "s" / name)).history()
        assert [commit["setl.process_id"] for commit in history if "setl.process_id" in
                commit and commit["operation"] != "CREATE TABLE"] == ["2"]
    # a table that holds the first batch already gets only the second
    again = tmp_path / "again"
    writer = loader(again, epoch=1)
    writer.load_many([(batch(1, 100), [PartResult(first[:1], [], 2)])])
    assert writer.load_many([(batch(1, 100), [PartResult(first, [], 3)]),
                             (batch(2, 200), [PartResult(second, [], 3)])]) == 4
    assert [row["_setl_op"] for row in sorted(DeltaTable(str(again / "s" / "c"))
            .to_pyarrow_table().to_pylist(), key=lambda row: row["_setl_position"])] == \
        ["I", "D"]
    assert [(row["id"], row["v"]) for row in read(again, "m")] == [(3, "b")]


def test_a_mirror_appends_rows_of_new_keys_and_merges_the_rest(tmp_path: Path) -> None:
    """Rows whose keys lie past every file's (the first copy, new auto-increment keys) are
    appended; rows among the table's keys, a delete, or a file without statistics of its key
    are merged, and every table holds what a MERGE of each would."""
    writer = loader(tmp_path, epoch=1)
    writer.claim()
    steps = [  # the batch's changes, whether they are appended
        ([change(MIRROR, INS, i, {"id": key, "v": "a"}) for i, key in enumerate((5, 6))], True),
        ([change(MIRROR, INS, 0, {"id": 9, "v": "a"})], True),  # above the table's keys
        ([change(MIRROR, INS, 0, {"id": 1, "v": "a"})], True),  # below them
        ([change(MIRROR, UPD, 0, {"id": 6, "v": "b"}, (6,))], False),  # a key it holds
        ([change(MIRROR, INS, 0, {"id": 7, "v": "a"})], False),  # between its keys
        ([change(MIRROR, INS, 0, {"id": 2, "v": "a"}),  # between them too, on one side
          change(MIRROR, INS, 1, {"id": 12, "v": "a"})], False),
        ([change(MIRROR, INS, 0, {"id": 20, "v": "a"}),
          change(MIRROR, DEL, 1, None, (9,))], False),  # a delete
    ]
    for process_id, (changes, appended) in enumerate(steps, start=1):
        writer.load_units(batch(process_id, process_id * 100),
                          [PartResult(units.render(changes, SPEC), [], len(changes))])
        operation = DeltaTable(str(tmp_path / "s" / "m")).history(1)[0]["operation"]
        assert operation == ("WRITE" if appended else "MERGE"), (process_id, operation)
    assert [(row["id"], row["v"]) for row in read(tmp_path, "m")] == \
        [(1, "a"), (2, "a"), (5, "a"), (6, "b"), (7, "a"), (12, "a"), (20, "a")]
    assert DeltaTable(str(tmp_path / "s" / "m")).transaction_version("setl:c.p") == len(steps)


def test_a_null_key_in_a_mirror_stops_the_pipeline_and_writes_nothing(tmp_path: Path) -> None:
    """A mirror merges by key, and a NULL key matches nothing: such a row could never be
    updated or deleted in the lake, so the batch stops, naming the column, and the table
    keeps what it had (key_columns on a NULL-admitting column is the way to get here)."""
    writer = loader(tmp_path, epoch=1)
    writer.claim()
    writer.load_units(batch(1, 100), [PartResult(units.render(
        [change(MIRROR, INS, 0, {"id": 1, "v": "a"})], SPEC), [], 1)])
    for rows in ([{"id": None, "v": "b"}], [{"id": 2, "v": "b"}, {"id": None, "v": "c"}]):
        changes = [change(MIRROR, INS, i, row) for i, row in enumerate(rows)]
        with pytest.raises(ConfigError, match=r"key column id is NULL.*mode: changelog"):
            writer.load_units(batch(2, 200), [PartResult(units.render(changes, SPEC), [],
                                                         len(changes))])
    assert [(row["id"], row["v"]) for row in read(tmp_path, "m")] == [(1, "a")]
    assert DeltaTable(str(tmp_path / "s" / "m")).transaction_version("setl:c.p") == 1


def test_new_keys_only_takes_null_keys_as_matching_nothing(tmp_path: Path) -> None:
    """NULLs are left out of the rows' key range (a NULL key matches no row in a MERGE
    either); rows whose key column is all NULL decide nothing by it."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from node.target.delta.writes import new_keys_only

    write_deltalake(str(tmp_path / "t"), pa.table({"id": [5], "n": [5]}))
    table = DeltaTable(str(tmp_path / "t"))
    flag = {units.DELETE_FLAG: [False, False]}
    assert not new_keys_only(table, pa.table({"id": pa.array([None, None], pa.int64()),
                                              "n": [5, 6], **flag}), ("id", "n"))
    assert new_keys_only(table, pa.table({"id": pa.array([None, None], pa.int64()),
                                          "n": [6, 7], **flag}), ("id", "n"))
    assert new_keys_only(table, pa.table({"id": [None, 9], "n": [5, 5], **flag}), ("id",))


def test_a_key_without_exact_file_statistics_is_always_merged(tmp_path: Path) -> None:
    """Text keys (delta-rs cuts their statistics short), a column whose type the table holds
    otherwise (a MERGE casts it) and a file without statistics never take the append."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from node.target.delta.writes import new_keys_only

    write_deltalake(str(tmp_path / "t"), pa.table({"id": pa.array(["b"]), "n": [1]}))
    table = DeltaTable(str(tmp_path / "t"))
    text = pa.table({"id": ["z"], "n": [2], units.DELETE_FLAG: [False]})
    assert not new_keys_only(table, text, ("id",))
    assert new_keys_only(table, text, ("n",))  # an integer key above the table's
    wider = pa.table({"id": ["z"], "n": pa.array([2], pa.int32()), units.DELETE_FLAG: [False]})
    assert not new_keys_only(table, wider, ("n",))  # int32 rows, an int64 column
    write_deltalake(str(tmp_path / "e"), pa.table({"n": pa.array([], pa.int64())}))
    empty = DeltaTable(str(tmp_path / "e"))
    assert new_keys_only(empty, pa.table({"n": [1], units.DELETE_FLAG: [False]}), ("n",))
    assert not new_keys_only(empty, pa.table({"n": [1], units.DELETE_FLAG: [True]}), ("n",))
    write_deltalake(str(tmp_path / "u"), pa.table({"n": [5]}),  # a file without statistics
                    configuration={"delta.dataSkippingNumIndexedCols": "0"})
    unknown = DeltaTable(str(tmp_path / "u"))
    assert not new_keys_only(unknown, pa.table({"n": [9], units.DELETE_FLAG: [False]}), ("n",))
