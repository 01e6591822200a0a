"""node/extract/etl.py: a pair's columns (include, exclude, renamed) and the change's keys
(primary, unique, key_columns, keyless) mapped into its target change."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from node.changes import ChangeType, RowChange, TargetChange
from node.extract.etl import extract_transform, transform
from shared.errors import ConfigError
from tests.unit.etl_helpers import PIPELINE_ID, compiled, insert, one

ROW = {"id": 1, "name": "a", "secret": "x", "note": "n"}


def test_empty_include_keeps_every_column() -> None:
    c = compiled("{source: s.t, target: s2.t, columns: {include: []}}")
    assert one(c, insert("s", "t", dict(ROW))).after == ROW


def test_include_keeps_listed_columns_and_the_key() -> None:
    c = compiled("{source: s.t, target: s2.t, columns: {include: [name]}}")
    assert one(c, insert("s", "t", dict(ROW))).after == {"id": 1, "name": "a"}


def test_exclude_drops_listed_columns_but_never_the_key() -> None:
    c = compiled("{source: s.t, target: s2.t, columns: {exclude: [id, secret]}}")
    assert one(c, insert("s", "t", dict(ROW))).after == {"id": 1, "name": "a", "note": "n"}


def test_column_pairs_rename_columns_and_key_names() -> None:
    c = compiled("{source: s.t, target: s2.t, column_pairs: [{source: id, target: order_id}, "
                 "{source: note, target: remark}]}")
    change = one(c, RowChange("s", "t", ChangeType.UPDATE, ("id",), dict(ROW),
                              {**ROW, "note": "m"}))
    assert change.keys == ("order_id",)
    assert change.before_key == (1,)
    assert change.after == {"order_id": 1, "name": "a", "secret": "x", "remark": "m"}


def test_include_names_source_columns_when_renaming() -> None:
    c = compiled("{source: s.t, target: s2.t, columns: {include: [note]}, "
                 "column_pairs: [{source: note, target: remark}]}")
    assert one(c, insert("s", "t", dict(ROW))).after == {"id": 1, "remark": "n"}


def test_insert_has_no_before_key() -> None:
    change = one(compiled("{source: s.t, target: s2.t}"), insert("s", "t", {"id": 5}))
    assert (change.type, change.before_key, change.after) == (ChangeType.INSERT, None, {"id": 5})


def test_delete_carries_before_key_and_no_row() -> None:
    c = compiled("{source: s.t, target: s2.t}")
    change = one(c, RowChange("s", "t", ChangeType.DELETE, ("id",), dict(ROW), None), seq=6)
    assert change == TargetChange("dst", "s2", "t", ChangeType.DELETE, ("id",), (1,), None, 0, 6)


def test_update_carries_the_old_key_when_the_key_changes() -> None:
    c = compiled("{source: s.t, target: s2.t, columns: {include: [name]}}")
    change = one(c, RowChange("s", "t", ChangeType.UPDATE, ("id",), dict(ROW),
                              {**ROW, "id": 2, "name": "b"}))
    assert change.type is ChangeType.UPDATE
    assert change.before_key == (1,)
    assert change.after == {"id": 2, "name": "b"}


def test_composite_key_order_is_kept() -> None:
    c = compiled("{source: s.t, target: s2.t}")
    change = one(c, RowChange("s", "t", ChangeType.DELETE, ("b", "a"), {"a": 1, "b": 2}, None))
    assert (change.keys, change.before_key) == (("b", "a"), (2, 1))


def test_a_keyless_table_keeps_its_whole_before_image_and_no_key() -> None:
    c = compiled("{source: s.t, target: s2.t, columns: {exclude: [w]}}")
    row = {"v": 1, "w": None}
    change = one(c, RowChange("s", "t", ChangeType.UPDATE, (), row, {**row, "v": 2}))
    assert (change.keys, change.before_key, change.before, change.after) == (
        (), (), {"v": 1}, {"v": 2})


def test_a_keyless_table_whose_pair_merges_wide_row_parts_needs_key_columns() -> None:
    c = compiled("{source: s.t, target: s2.t, merge_part: true}")
    with pytest.raises(ConfigError) as caught:
        list(transform(c, 1, insert("s", "t", {"v": 1}, keys=())))
    assert str(caught.value) == (f"pipeline {PIPELINE_ID}: table s.t has no primary key and "
                                 "no unique key over NOT NULL columns, and its pair joins or "
                                 "merges parts of a wide row by key; give 'key_columns' on its "
                                 "pair")


def test_a_unique_key_read_at_start_keys_a_table_without_primary_key() -> None:
    c = dataclasses.replace(compiled("{source: s.t, target: s2.t}"),
                            table_keys={("s", "t"): ("code",)})
    [change] = transform(c, 1, insert("s", "t", {"code": "x", "v": 1}, keys=()))
    assert change.keys == ("code",)


def test_keys_read_again_after_a_ddl_key_the_next_batch_run_in_the_node(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch run in the node maps changes by what it worked out per table and key; after
    an ALTER moved the table's unique key from a to b, the next batch was still merged by
    a (no longer unique: two of its rows taken for one, a delete by it removing both)."""
    from node import start

    c = dataclasses.replace(compiled("{source: s.t, target: s2.t}"),
                            table_keys={("s", "t"): ("a",)})
    update = RowChange("s", "t", ChangeType.UPDATE, (), {"a": 1, "b": 10, "v": 0},
                       {"a": 1, "b": 10, "v": 1})
    def mapped() -> tuple[tuple[str, ...], Any]:
        [change] = extract_transform(c, [(1, update)])  # the node's way: its mappings kept
        return change.keys, change.before_key

    assert mapped() == (("a",), (1,))
    monkeypatch.setattr(start, "with_table_keys", lambda compiled, *args: dataclasses.replace(
        compiled, table_keys={("s", "t"): ("b",)}))
    start.keys_again(c, None, None)  # type: ignore[arg-type]  # (read: patched above)
    assert mapped() == (("b",), (10,))


def test_key_columns_override_the_primary_key() -> None:
    c = compiled("{source: s.t, target: s2.t, key_columns: [code, name], "
                 "columns: {include: [v]}, column_pairs: [{source: code, target: c}]}")
    row = {"id": 1, "code": "X", "name": "a", "v": 2, "w": 3}
    change = one(c, RowChange("s", "t", ChangeType.UPDATE, ("id",), row, {**row, "v": 4}))
    assert change.keys == ("c", "name")
    assert change.before_key == ("X", "a")
    assert change.after == {"c": "X", "name": "a", "v": 4}  # id is no key here: excluded


def test_key_columns_of_a_table_without_primary_key_never_replace_its_whole_row() -> None:
    # they may repeat or hold NULLs: the row is found by its whole before image all the same
    c = compiled("{source: s.t, target: s2.t, key_columns: [code]}")
    change = one(c, RowChange("s", "t", ChangeType.DELETE, (), {"code": "X", "v": 1}, None))
    assert (change.keys, change.before) == ((), {"code": "X", "v": 1})
