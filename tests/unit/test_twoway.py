"""node/target/mysql/twoway.py: the images a conflict check compares, and value comparison
across the binlog's and a SELECT's types."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pytest

from node.changes import ChangeType, TargetChange
from node.target.mysql import twoway
from node.target.mysql.twoway import LoopGuard, first_images, same_row


def change(seq: int, kind: ChangeType, before_key: tuple | None, before: dict | None,
           after: dict | None) -> TargetChange:
    return TargetChange("dst", "s", "t", kind, ("id",), before_key, after, seq=seq, before=before)


def test_first_images_take_each_keys_first_change_only() -> None:
    changes = [
        change(3, ChangeType.DELETE, (1,), {"id": 1, "v": "b"}, None),
        change(1, ChangeType.UPDATE, (1,), {"id": 1, "v": "a"}, {"id": 1, "v": "b"}),
        change(2, ChangeType.INSERT, None, None, {"id": 2, "v": "new"}),
        change(4, ChangeType.UPDATE, (2,), {"id": 2, "v": "new"}, {"id": 3, "v": "moved"}),
    ]
    images = first_images(changes)[("s", "t", ("id",))]
    assert images == {(1,): ({"id": 1, "v": "a"}, {"id": 1, "v": "b"}),
                      (2,): (None, {"id": 2, "v": "new"}),
                      (3,): (None, {"id": 3, "v": "moved"})}


def test_same_row_compares_values_across_types_and_only_shared_columns() -> None:
    binlog = {"id": 1, "tags": {"b", "a"}, "doc": {"x": [1, 2]}, "price": Decimal("1.50"),
              "ratio": 0.25, "at": datetime.datetime(2026, 1, 2, 3, 4, 5), "gone": 1}
    select = {"id": 1, "tags": "a,b", "doc": '{"x": [1, 2]}', "price": Decimal("1.5"),
              "ratio": 0.25, "at": datetime.datetime(2026, 1, 2, 3, 4, 5), "extra": 9}
    assert same_row(binlog, select)
    assert not same_row(binlog, {**select, "price": Decimal("1.51")})
    assert not same_row(binlog, {**select, "tags": "a"})
    assert same_row(None, None)
    assert not same_row(None, select) and not same_row(binlog, None)


def resolved(monkeypatch: pytest.MonkeyPatch, target: dict[tuple, dict], wins: bool,
             changes: list[TargetChange]) -> list[tuple[ChangeType, Any, Any]]:
    """What a pipeline writes of ``changes`` on a target holding ``target`` (rows by key)."""
    monkeypatch.setattr(twoway, "current_rows", lambda cursor, schema, table, keys, wanted: {
        key: target[key] for key in map(tuple, wanted) if key in target})
    guard = LoopGuard("c", "c.forward" if wins else "c.back", wins_conflicts=wins)
    return [(c.type, c.before_key, c.after) for c in guard.resolve(None, changes, 1)]


def test_a_key_change_on_the_losing_side_is_resolved_key_by_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """B moves id 1 to 2 while A inserts id 2: the losing pipeline (B → A) deletes id 1 and
    leaves A's id 2; the winner (A → B) writes its id 2 over B's moved row: both {2: x}."""
    move = change(1, ChangeType.UPDATE, (1,), {"id": 1, "v": "a"}, {"id": 2, "v": "a"})
    on_a = {(1,): {"id": 1, "v": "a"}, (2,): {"id": 2, "v": "x"}}
    assert resolved(monkeypatch, on_a, False, [move]) == [
        (ChangeType.DELETE, (1,), None)]
    insert = change(1, ChangeType.INSERT, None, None, {"id": 2, "v": "x"})
    assert resolved(monkeypatch, {(2,): {"id": 2, "v": "a"}}, True, [insert]) == [
        (ChangeType.INSERT, None, {"id": 2, "v": "x"})]
    # the old key changed on A meanwhile (v = z): the row is written at the new key, A's
    # id 1 stays (the winner's update of id 1 writes it on B again)
    changed = {(1,): {"id": 1, "v": "z"}}
    assert resolved(monkeypatch, changed, False, [move]) == [
        (ChangeType.INSERT, None, {"id": 2, "v": "a"})]
    # both keys conflict: nothing of the move; neither: the move as it is
    assert resolved(monkeypatch, {**changed, (2,): {"id": 2, "v": "x"}}, False, [move]) == []
    assert resolved(monkeypatch, {(1,): {"id": 1, "v": "a"}}, False, [move]) == [
        (ChangeType.UPDATE, (1,), {"id": 2, "v": "a"})]
    # a later change of the kept key goes with it; one of the conflicting key is left out
    later = change(2, ChangeType.UPDATE, (2,), {"id": 2, "v": "a"}, {"id": 2, "v": "b"})
    assert resolved(monkeypatch, on_a, False, [move, later]) == [
        (ChangeType.DELETE, (1,), None)]
    assert resolved(monkeypatch, on_a, True, [move, later]) == [
        (ChangeType.UPDATE, (1,), {"id": 2, "v": "a"}),
        (ChangeType.UPDATE, (2,), {"id": 2, "v": "b"})]
