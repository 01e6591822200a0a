"""Column groups: an update writes the key, its changed columns and their groups' columns;
an insert, and an update that moves the row to another key, write every column (the row
under its new key is a new row on the target)."""

from __future__ import annotations

import pickle

from node.changes import ChangeType, RowChange
from node.extract.etl import extract_transform_lists
from node.extract.groups import only_changed
from node.merge import PartialRow, TableWrites
from node.target.mysql.render import Column, statements
from shared.model import ColumnGroup
from tests.unit import applied
from tests.unit.test_etl import compiled

GROUPS = (ColumnGroup(("a", "b")),)
BEFORE = {"id": 1, "a": 1, "b": 2, "c": "keep"}


def test_an_update_writes_the_key_and_the_groups_of_what_changed() -> None:
    change = RowChange("s", "t", ChangeType.UPDATE, ("id",), BEFORE, {**BEFORE, "a": 5})
    assert only_changed(change, GROUPS, ("id",)).after == {"id": 1, "a": 5, "b": 2}


def test_an_update_of_the_key_writes_every_column() -> None:
    change = RowChange("s", "t", ChangeType.UPDATE, ("id",), BEFORE, {**BEFORE, "id": 2})
    assert only_changed(change, GROUPS, ("id",)).after == {**BEFORE, "id": 2}


def test_a_double_going_from_zero_to_negative_zero_is_a_change() -> None:
    before = {"id": 1, "a": 1, "b": 2, "c": 0.0}
    change = RowChange("s", "t", ChangeType.UPDATE, ("id",), before, {**before, "c": -0.0})
    assert only_changed(change, GROUPS, ("id",)).after == {"id": 1, "c": -0.0}
    same = RowChange("s", "t", ChangeType.UPDATE, ("id",), before, {**before, "c": 0.0})
    assert only_changed(same, GROUPS, ("id",)).after == {"id": 1}


# --- a row the target lacks: the update makes it whole (INSERT every column … ON DUPLICATE
# KEY UPDATE the changed ones), a row it has keeps its unchanged columns ------------------

PAIR = "{source: s.t, target: s2.t, column_groups: [[a, b]]}"
ROW = {"id": 5, "a": 1, "b": 2, "c": 3}


def _update(seq: int, before: dict[str, int], **changed: int) -> tuple[int, RowChange]:
    return seq, RowChange("s", "t", ChangeType.UPDATE, ("id",), before, {**before, **changed})


def _loaded(table: applied.Table, *numbered: tuple[int, RowChange]) -> applied.Table:
    return applied.loaded(table, extract_transform_lists(compiled(PAIR), list(numbered)))


def test_an_update_of_a_row_the_target_lacks_writes_the_whole_row() -> None:
    # a snapshot copy's row the stream updated in its window is not copied (node.extract.reads),
    # and a pipeline started at latest never copied it: the update alone must make it whole
    assert _loaded({}, _update(1, ROW, c=4)) == {(5,): {"id": 5, "c": 4, "a": 1, "b": 2}}
    assert _loaded({}, _update(1, ROW, a=7)) == {(5,): {"id": 5, "a": 7, "b": 2, "c": 3}}
    unchanged = _loaded({}, _update(1, ROW))
    assert unchanged == {(5,): ROW}


def test_an_update_of_a_row_the_target_has_leaves_its_other_columns() -> None:
    fixed = {"id": 5, "a": 1, "b": 2, "c": 3, "d": "manual"}
    assert _loaded({(5,): dict(fixed)}, _update(1, ROW, c=4)) == {(5,): {**fixed, "c": 4}}
    mended = {**fixed, "c": 99}  # a column nobody changed on the source: left as it is
    assert _loaded({(5,): dict(mended)}, _update(1, ROW, a=7)) == {
        (5,): {**mended, "a": 7}}
    assert _loaded({(5,): dict(mended)}, _update(1, ROW)) == {(5,): mended}


def test_updates_merged_in_one_batch_write_what_they_write_one_batch_each() -> None:
    first = {**ROW, "c": 4}
    chains = [
        [_update(1, ROW, c=4), _update(2, first, a=9)],
        [_update(1, ROW, a=4), _update(2, {**ROW, "a": 4}, a=5)],
        [(1, RowChange("s", "t", ChangeType.INSERT, ("id",), None, ROW)),
         _update(2, ROW, c=4)],
    ]
    # a free-door D at its window's start, then the stream's update of the key (the copied
    # row is left out): D + U writes the row whole, as D + I does
    deleted = [(1, RowChange("s", "t", ChangeType.DELETE, ("id",), {"id": 5}, None)),
               _update(2, ROW, c=4)]
    for start in ({}, {(5,): {**ROW, "b": 0}}):
        assert _loaded(dict(start), *deleted) == {(5,): {**ROW, "c": 4}}
    for chain in chains:
        for start in ({}, {(5,): {**ROW, "b": 0, "d": "x"}}):
            one = _loaded({key: dict(row) for key, row in start.items()}, *chain)
            apart = {key: dict(row) for key, row in start.items()}
            for change in chain:
                _loaded(apart, change)
            assert one == apart, chain


def test_a_partial_row_survives_pickling_for_spark() -> None:
    row = PartialRow({"id": 1, "c": 2}, {"a": 3})
    again = pickle.loads(pickle.dumps(row))
    assert type(again) is PartialRow and again == row and again.rest == {"a": 3}


def test_a_partial_rows_rest_keeps_out_generated_columns_and_goes_alone_with_an_empty_enum(
        ) -> None:
    writes = TableWrites("dst", "s2", "t", ("id",), 0, 1,
                         upserts=[PartialRow({"id": 5, "c": 4}, {"a": 1, "g": 2, "e": ""}),
                                  PartialRow({"id": 6, "c": 4}, {"a": 1, "g": 2, "e": "x"})])
    columns = {"g": Column("int", None, generated=True), "e": Column("enum", "utf8mb4")}
    found = list(statements(writes, 100, columns))
    assert [(s.sql, s.args, s.lenient) for s in found] == [
        ("INSERT INTO `s2`.`t` (`id`, `c`, `a`, `e`) VALUES (%s, %s, %s, %s) ON DUPLICATE KEY "
         "UPDATE `c` = VALUES(`c`)", [[5, 4, 1, ""]], ("e",)),
        ("INSERT INTO `s2`.`t` (`id`, `c`, `a`, `e`) VALUES (%s, %s, %s, %s) ON DUPLICATE KEY "
         "UPDATE `c` = VALUES(`c`)", [[6, 4, 1, "x"]], ())]
