"""node/merge.py: Otter's per-key merge rules, one by one, and a randomized replay check."""

from __future__ import annotations

import random
from typing import Any

import pytest

from node.changes import CLEAR, ChangeType, Row, TargetChange
from node.merge import CLEAR_, DELETE, MOVE, UPSERT, PartialRow, TableWrites, merge


def ins(seq: int, row: Row, table: str = "t", keys: tuple[str, ...] = ("id",),
        weight: int = 0, datasource: str = "dst") -> TargetChange:
    return TargetChange(datasource, "s", table, ChangeType.INSERT, keys, None, row, weight, seq)


def upd(seq: int, before_key: tuple[Any, ...], row: Row, table: str = "t",
        keys: tuple[str, ...] = ("id",), weight: int = 0,
        datasource: str = "dst") -> TargetChange:
    return TargetChange(datasource, "s", table, ChangeType.UPDATE, keys, before_key, row, weight,
                        seq)


def dele(seq: int, before_key: tuple[Any, ...], table: str = "t",
         keys: tuple[str, ...] = ("id",), weight: int = 0,
         datasource: str = "dst") -> TargetChange:
    return TargetChange(datasource, "s", table, ChangeType.DELETE, keys, before_key, None, weight,
                        seq)


def only(writes: list[TableWrites]) -> TableWrites:
    assert len(writes) == 1, writes
    return writes[0]


# --- the rules, one by one ---------------------------------------------------------------

def test_insert_then_update_is_one_upsert_of_the_last_row() -> None:
    w = only(merge([ins(1, {"id": 1, "v": "a"}), upd(2, (1,), {"id": 1, "v": "b"})]))
    assert (w.datasource, w.schema, w.table, w.keys) == ("dst", "s", "t", ("id",))
    assert w.deletes == []
    assert w.upserts == [{"id": 1, "v": "b"}]
    assert w.rows == 1


def test_update_then_update_keeps_the_last_row() -> None:
    w = only(merge([upd(1, (1,), {"id": 1, "v": "a"}), upd(2, (1,), {"id": 1, "v": "b"}),
                    upd(3, (1,), {"id": 1, "v": "c"})]))
    assert w.deletes == []
    assert w.upserts == [{"id": 1, "v": "c"}]


def test_insert_then_delete_writes_nothing_at_all() -> None:
    assert merge([ins(1, {"id": 1, "v": "a"}), dele(2, (1,))]) == []


def test_insert_update_delete_writes_nothing_at_all() -> None:
    assert merge([ins(1, {"id": 1}), upd(2, (1,), {"id": 1, "v": 2}), dele(3, (1,))]) == []


def test_insert_delete_insert_delete_writes_nothing_at_all() -> None:
    # the key never existed before the batch, so no DELETE may be written for it
    changes = [ins(1, {"id": 7, "v": 1}), dele(2, (7,)), ins(3, {"id": 7, "v": 2}), dele(4, (7,))]
    assert merge(changes) == []


def test_insert_delete_insert_is_an_upsert_only() -> None:
    w = only(merge([ins(1, {"id": 7, "v": 1}), dele(2, (7,)), ins(3, {"id": 7, "v": 2})]))
    assert w.deletes == []
    assert w.upserts == [{"id": 7, "v": 2}]


def test_delete_then_insert_is_an_upsert_without_delete() -> None:
    w = only(merge([dele(1, (1,)), ins(2, {"id": 1, "v": "new"})]))
    assert w.deletes == []
    assert w.upserts == [{"id": 1, "v": "new"}]


def test_delete_insert_delete_is_one_delete() -> None:
    w = only(merge([dele(1, (1,)), ins(2, {"id": 1}), dele(3, (1,))]))
    assert w.deletes == [(1,)]
    assert w.upserts == []


def test_delete_alone_is_a_delete() -> None:
    w = only(merge([dele(1, (4,))]))
    assert w.deletes == [(4,)]
    assert w.upserts == []
    assert w.rows == 1


def test_insert_alone_is_an_upsert() -> None:
    w = only(merge([ins(1, {"id": 4, "v": "x"})]))
    assert w.deletes == []
    assert w.upserts == [{"id": 4, "v": "x"}]


def test_key_change_deletes_the_old_key_and_upserts_the_new() -> None:
    w = only(merge([upd(1, (1,), {"id": 2, "v": "a"})]))
    assert w.deletes == [(1,)]
    assert w.upserts == [{"id": 2, "v": "a"}]


def test_key_change_chain_deletes_only_keys_that_existed_before_the_batch() -> None:
    # 1 existed (its first change is an UPDATE); 2 was born by the first key change
    w = only(merge([upd(1, (1,), {"id": 2, "v": "a"}), upd(2, (2,), {"id": 3, "v": "b"})]))
    assert w.deletes == [(1,)]
    assert w.upserts == [{"id": 3, "v": "b"}]


def test_key_change_onto_a_key_deleted_earlier_in_the_batch_keeps_its_delete_out() -> None:
    # 2 existed and was deleted, then 1 took its key: 2 is upserted (no DELETE), 1 deleted
    w = only(merge([dele(1, (2,)), upd(2, (1,), {"id": 2, "v": "moved"})]))
    assert w.deletes == [(1,)]
    assert w.upserts == [{"id": 2, "v": "moved"}]


def test_key_change_chain_through_an_existing_key_deletes_both() -> None:
    # 2 existed and was deleted, 1 moved onto 2, then 2 moved on to 3: 1 and 2 both go
    changes = [dele(1, (2,)), upd(2, (1,), {"id": 2, "v": "a"}), upd(3, (2,), {"id": 3, "v": "b"})]
    w = only(merge(changes))
    assert w.deletes == [(1,), (2,)]  # by each key's last change: 1 at seq 2, 2 at seq 3
    assert w.upserts == [{"id": 3, "v": "b"}]


def test_key_change_and_back_is_an_upsert_of_the_original_key() -> None:
    w = only(merge([upd(1, (1,), {"id": 2, "v": "a"}), upd(2, (2,), {"id": 1, "v": "b"})]))
    assert w.deletes == []
    assert w.upserts == [{"id": 1, "v": "b"}]


def test_delete_after_a_key_change_deletes_only_the_original_key() -> None:
    w = only(merge([upd(1, (1,), {"id": 2, "v": "a"}), dele(2, (2,))]))
    assert w.deletes == [(1,)]
    assert w.upserts == []


def test_update_without_key_change_after_insert_keeps_insert_row_key() -> None:
    w = only(merge([ins(1, {"id": 5, "v": 0}), upd(2, (5,), {"id": 5, "v": 1}),
                    upd(3, (5,), {"id": 6, "v": 2})]))
    # 5 was born in the batch and moved away: nothing deletes it
    assert w.deletes == []
    assert w.upserts == [{"id": 6, "v": 2}]


# --- order ------------------------------------------------------------------------------

def test_upserts_are_ordered_by_each_keys_last_change() -> None:
    changes = [ins(1, {"id": 1, "v": 1}), ins(2, {"id": 2, "v": 2}), ins(3, {"id": 3, "v": 3}),
               upd(4, (1,), {"id": 1, "v": 4}), upd(5, (2,), {"id": 2, "v": 5})]
    w = only(merge(changes))
    assert w.upserts == [{"id": 3, "v": 3}, {"id": 1, "v": 4}, {"id": 2, "v": 5}]


def test_deletes_are_ordered_by_each_keys_last_change() -> None:
    changes = [dele(1, (9,)), dele(2, (3,)), upd(3, (5,), {"id": 5, "v": 0}), dele(4, (5,))]
    w = only(merge(changes))
    assert w.deletes == [(9,), (3,), (5,)]


def test_changes_are_merged_in_seq_order_not_list_order() -> None:
    changes = [upd(3, (1,), {"id": 1, "v": "last"}), ins(1, {"id": 1, "v": "first"}),
               upd(2, (1,), {"id": 1, "v": "middle"}), ins(4, {"id": 2, "v": "x"})]
    w = only(merge(changes))
    assert w.upserts == [{"id": 1, "v": "last"}, {"id": 2, "v": "x"}]
    assert w.first_seq == 1


def test_tables_are_written_in_ascending_push_weight() -> None:
    changes = [ins(1, {"id": 1}, table="heavy", weight=5),
               ins(2, {"id": 1}, table="light", weight=1),
               ins(3, {"id": 1}, table="middle", weight=3)]
    writes = merge(changes)
    assert [(w.table, w.push_weight) for w in writes] == [("light", 1), ("middle", 3),
                                                          ("heavy", 5)]


def test_equal_weights_keep_the_order_of_first_appearance() -> None:
    # first appearance by seq: z (seq 1), a (seq 2), m (seq 3) -- not by name, not by list order
    changes = [ins(2, {"id": 1}, table="a"), ins(3, {"id": 1}, table="m"),
               ins(1, {"id": 1}, table="z"), ins(4, {"id": 2}, table="a")]
    writes = merge(changes)
    assert [(w.table, w.first_seq) for w in writes] == [("z", 1), ("a", 2), ("m", 3)]
    assert writes[1].upserts == [{"id": 1}, {"id": 2}]


def test_weight_beats_first_appearance() -> None:
    changes = [ins(1, {"id": 1}, table="b", weight=2), ins(2, {"id": 1}, table="a", weight=2),
               ins(3, {"id": 1}, table="c", weight=0)]
    assert [w.table for w in merge(changes)] == ["c", "b", "a"]


def test_same_table_name_on_two_datasources_is_two_tables() -> None:
    changes = [ins(1, {"id": 1}, datasource="one"), ins(2, {"id": 1}, datasource="two"),
               dele(3, (1,), datasource="one")]
    writes = merge(changes)
    assert [(w.datasource, w.deletes, w.upserts) for w in writes] == [
        ("two", [], [{"id": 1}])]


def test_a_table_whose_changes_cancel_out_is_omitted() -> None:
    changes = [ins(1, {"id": 1}, table="gone"), ins(2, {"id": 1}, table="kept"),
               dele(3, (1,), table="gone"), upd(4, (1,), {"id": 1, "v": 2}, table="kept")]
    w = only(merge(changes))
    assert w.table == "kept"
    assert w.upserts == [{"id": 1, "v": 2}]
    assert w.first_seq == 2


def test_empty_batch_merges_to_nothing() -> None:
    assert merge([]) == []


# --- composite keys -----------------------------------------------------------------------

def test_composite_keys() -> None:
    keys = ("a", "b")
    changes = [
        upd(1, (1, 1), {"a": 1, "b": 2, "v": "moved"}, keys=keys),  # key change (1,1) → (1,2)
        ins(2, {"a": 1, "b": 3, "v": "new"}, keys=keys),
        dele(3, (2, 2), keys=keys),
        upd(4, (1, 3), {"a": 1, "b": 3, "v": "newer"}, keys=keys),
        ins(5, {"a": 2, "b": 1, "v": "x"}, keys=keys),
        dele(6, (2, 1), keys=keys),  # born and died: nothing
    ]
    w = only(merge(changes))
    assert w.keys == ("a", "b")
    assert w.deletes == [(1, 1), (2, 2)]
    assert w.upserts == [{"a": 1, "b": 2, "v": "moved"}, {"a": 1, "b": 3, "v": "newer"}]


def test_composite_key_differing_in_one_part_is_another_key() -> None:
    keys = ("a", "b")
    w = only(merge([ins(1, {"a": 1, "b": 1}, keys=keys), ins(2, {"a": 1, "b": 2}, keys=keys),
                    dele(3, (1, 1), keys=keys)]))
    assert w.deletes == []
    assert w.upserts == [{"a": 1, "b": 2}]


def test_a_table_with_another_unique_key_keeps_every_change_in_source_order() -> None:
    # row 1 gives up code 16 and row 3 takes it; merged, row 3's upsert would come first
    # and land on row 1 through the unique code
    changes = [ins(1, {"id": 3, "code": 9}), upd(2, (1,), {"id": 1, "code": 5}),
               upd(3, (3,), {"id": 3, "code": 16}), upd(4, (1,), {"id": 1, "code": 6}),
               upd(5, (3,), {"id": 4, "code": 16}), dele(6, (4,))]
    w = only(merge(changes, ordered={("dst", "s", "t")}))
    assert (w.deletes, w.upserts) == ([], [])
    assert w.steps == [(UPSERT, {"id": 3, "code": 9}), (UPSERT, {"id": 1, "code": 5}),
                       (UPSERT, {"id": 3, "code": 16}), (UPSERT, {"id": 1, "code": 6}),
                       (MOVE, ((3,), {"id": 4, "code": 16})), (DELETE, (4,))]
    assert w.rows == 6
    merged = only(merge(changes))  # without the unique key: the net effect per key
    assert (merged.deletes, merged.upserts, merged.steps) == ([], [{"id": 1, "code": 6}], [])


def test_tables_in_source_order_interleave_in_runs_and_a_key_change_is_a_move() -> None:
    parent, child = ("dst", "s", "parent"), ("dst", "s", "child")

    def on(table: str, change: TargetChange) -> TargetChange:
        return change._replace(table=table)
    changes = [on("child", ins(1, {"id": 11, "p": 1})), on("parent", ins(2, {"id": 3})),
               on("child", ins(3, {"id": 30, "p": 3})), on("parent", upd(4, (1,), {"id": 100})),
               on("child", dele(5, (30,))), on("parent", dele(6, (3,)))]
    runs = merge(changes, ordered={parent, child})
    assert [(w.table, w.first_seq, w.steps) for w in runs] == [
        ("child", 1, [(UPSERT, {"id": 11, "p": 1})]), ("parent", 2, [(UPSERT, {"id": 3})]),
        ("child", 3, [(UPSERT, {"id": 30, "p": 3})]),
        ("parent", 4, [(MOVE, ((1,), {"id": 100}))]), ("child", 5, [(DELETE, (30,))]),
        ("parent", 6, [(DELETE, (3,))])]


# --- randomized: replaying merge() output reproduces the source table -------------------

TABLES = {"t": ("id",), "u": ("a", "b")}
WEIGHTS = {"t": 1, "u": 0}


def _key_space(table: str) -> list[tuple[int, ...]]:
    if table == "t":
        return [(n,) for n in range(10)]
    return [(a, b) for a in range(3) for b in range(3)]


def _row(table: str, key: tuple[int, ...], value: int) -> Row:
    return {**dict(zip(TABLES[table], key, strict=True)), "v": value}


def _simulate(seed: int, ops: int = 50) -> tuple[dict[str, dict[tuple[int, ...], Row]],
                                                 list[TargetChange],
                                                 dict[str, dict[tuple[int, ...], Row]]]:
    rnd = random.Random(seed)
    initial = {table: {key: _row(table, key, -1) for key in _key_space(table)
                       if rnd.random() < 0.5} for table in TABLES}
    current = {table: dict(rows) for table, rows in initial.items()}
    changes = []
    for seq in range(1, ops + 1):
        table = rnd.choice(sorted(TABLES))
        rows = current[table]
        used = sorted(rows)
        free = [key for key in _key_space(table) if key not in rows]
        choices = (["I"] if free else []) + (["U", "D"] if used else []) + \
            (["K"] if used and free else [])
        op = rnd.choice(choices)
        common = {"datasource": "dst", "schema": "s", "table": table, "keys": TABLES[table],
                  "push_weight": WEIGHTS[table], "seq": seq}
        if op == "I":
            key = rnd.choice(free)
            rows[key] = _row(table, key, seq)
            changes.append(TargetChange(type=ChangeType.INSERT, before_key=None,
                                        after=rows[key], **common))
        elif op == "U":
            key = rnd.choice(used)
            rows[key] = _row(table, key, seq)
            changes.append(TargetChange(type=ChangeType.UPDATE, before_key=key, after=rows[key],
                                        **common))
        elif op == "D":
            key = rnd.choice(used)
            del rows[key]
            changes.append(TargetChange(type=ChangeType.DELETE, before_key=key, after=None,
                                        **common))
        else:
            old, new = rnd.choice(used), rnd.choice(free)
            del rows[old]
            rows[new] = _row(table, new, seq)
            changes.append(TargetChange(type=ChangeType.UPDATE, before_key=old, after=rows[new],
                                        **common))
    return initial, changes, current


@pytest.mark.parametrize("seed", range(200))
def test_replaying_the_merge_reproduces_the_source(seed: int) -> None:
    initial, changes, final = _simulate(seed)
    last_seq: dict[tuple[str, tuple[int, ...]], int] = {}
    for change in changes:
        if change.before_key is not None:
            last_seq[(change.table, change.before_key)] = change.seq
        if change.after is not None:
            key = tuple(change.after[k] for k in change.keys)
            last_seq[(change.table, key)] = change.seq
    shuffled = list(changes)
    random.Random(seed).shuffle(shuffled)  # merge orders by seq, not by arrival

    writes = merge(shuffled)

    assert [w.table for w in writes] == sorted({w.table for w in writes},
                                              key=lambda t: WEIGHTS[t])
    replayed = {table: dict(rows) for table, rows in initial.items()}
    for w in writes:
        keys = TABLES[w.table]
        assert (w.datasource, w.schema, w.keys, w.push_weight) == ("dst", "s", keys,
                                                                   WEIGHTS[w.table])
        assert w.rows > 0
        upsert_keys = [tuple(row[k] for k in keys) for row in w.upserts]
        assert len(set(upsert_keys)) == len(upsert_keys)
        assert len(set(w.deletes)) == len(w.deletes)
        assert not set(w.deletes) & set(upsert_keys)  # D + I is an upsert only
        seqs = [last_seq[(w.table, key)] for key in upsert_keys]
        assert seqs == sorted(seqs)
        seqs = [last_seq[(w.table, key)] for key in w.deletes]
        assert seqs == sorted(seqs)
        rows = replayed[w.table]
        for key in w.deletes:
            # a DELETE is written only for a key that existed before the batch ...
            assert key in initial[w.table], (w.table, key)
            # ... and only when the key ends the batch deleted
            assert key not in final[w.table], (w.table, key)
            del rows[key]
        for key, row in zip(upsert_keys, w.upserts, strict=True):
            assert row == final[w.table][key]  # the last row wins
            rows[key] = row
    assert replayed == final


# --- a wide row's part cleared (merge_part): the row updated where it is, never made --------

def clear(seq: int, key: int, columns: Row) -> TargetChange:
    return upd(seq, (key,), {"id": key, **columns})._replace(ddl=CLEAR)


def test_a_clear_after_its_rows_delete_writes_only_the_delete() -> None:
    w = only(merge([dele(1, (1,)), clear(2, 1, {"city": None})]))
    assert (w.deletes, w.upserts, w.clears) == ([(1,)], [], [])


def test_a_clear_alone_updates_the_row_where_it_is() -> None:
    w = only(merge([ins(1, {"id": 2, "name": "b"}), clear(2, 1, {"city": None})]))
    assert (w.deletes, w.upserts, w.clears) == ([], [{"id": 2, "name": "b"}],
                                                [{"id": 1, "city": None}])


def test_a_clear_over_a_row_the_batch_writes_goes_into_it_and_a_write_after_it_upserts() -> None:
    w = only(merge([upd(1, (1,), {"id": 1, "city": "Oslo", "name": "a"}),
                    clear(2, 1, {"city": None}), clear(3, 2, {"city": None}),
                    upd(4, (2,), {"id": 2, "city": "Rome"})]))
    assert (w.deletes, w.clears) == ([], [])
    assert w.upserts == [{"id": 1, "city": None, "name": "a"}, {"id": 2, "city": "Rome"}]


@pytest.mark.parametrize("gathered", [frozenset(), frozenset({("dst", "s", "t")})])
def test_a_column_group_update_after_a_clear_keeps_its_rest_for_a_row_the_target_lacks(
        gathered: frozenset[tuple[str, str, str]]) -> None:
    """Part A's row deleted (a clear), then part B's update of one column (column_groups):
    one by one, the clear finds no row and the update makes it whole; merged, the upsert
    had lost B's other columns (c NULL)."""
    w = only(merge([clear(1, 1, {"a": None}),
                    upd(2, (1,), PartialRow({"id": 1, "b": 5}, {"c": 7}))], gathered=gathered))
    assert (w.deletes, w.clears) == ([], [])
    assert w.upserts == [{"id": 1, "a": None, "b": 5}]
    assert type(w.upserts[0]) is PartialRow and w.upserts[0].rest == {"c": 7}


def test_a_clear_of_an_ordered_table_is_a_step_of_its_own() -> None:
    w = only(merge([ins(1, {"id": 2}), clear(2, 1, {"city": None})], ordered={("dst", "s", "t")}))
    assert w.steps == [(UPSERT, {"id": 2}), (CLEAR_, ((1,), {"id": 1, "city": None}))]
