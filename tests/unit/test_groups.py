"""Column groups: an update writes the key, its changed columns and their groups' columns;
an insert, and an update that moves the row to another key, write every column (the row
under its new key is a new row on the target)."""

from __future__ import annotations

from node.changes import ChangeType, RowChange
from node.extract.groups import only_changed
from shared.model import ColumnGroup

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
