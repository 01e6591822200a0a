"""node/extract/joins.py: a change whose joined row is missing (``missing: drop``) and a
``merge_part`` pair's delete, replayed on an in-memory target through the real rendering."""

from __future__ import annotations

from typing import Any

import pytest

from node.changes import ChangeType, RowChange
from node.extract.etl import transform
from node.extract.freedoor import DoorStats, as_change
from node.snapshot.door import DoorQueue
from shared.errors import ConfigError, FreeDoorRequestError
from shared.model import DataSource
from tests.unit import applied
from tests.unit.test_etl import compiled

ORDERS = ("{source: s.orders, target: s2.orders, joins: [{table: s.customers, by: customer_id, "
          "key: id, columns: [tier]}]}")
GOLD = {("s.customers", "id"): {1: {"id": 1, "tier": "gold"}}}
ORDER = {"id": 10, "customer_id": 1}


def _load(pair: str, table: applied.Table, change: RowChange,
          joined: dict[Any, Any] | None = None) -> applied.Table:
    return applied.loaded(table, list(transform(compiled(pair), 1, change, joined or GOLD)))


def _update(before: dict[str, Any], **changed: Any) -> RowChange:
    return RowChange("s", "orders", ChangeType.UPDATE, ("id",), before, {**before, **changed})


def test_an_update_whose_joined_row_is_missing_takes_the_row_out_of_the_target() -> None:
    target = _load(ORDERS, {}, RowChange("s", "orders", ChangeType.INSERT, ("id",), None, ORDER))
    assert target == {(10,): {**ORDER, "tier": "gold"}}
    # the order leaves the joined set: the target must not keep customer 1's gold tier
    assert _load(ORDERS, dict(target), _update(ORDER, customer_id=None)) == {}
    assert _load(ORDERS, dict(target), _update(ORDER, customer_id=2)) == {}  # no such row
    assert _load(ORDERS, dict(target), _update(ORDER, id=11, customer_id=2)) == {}  # moved
    # and comes back whole when an update joins it again
    assert _load(ORDERS, {}, _update({**ORDER, "customer_id": 2}, customer_id=1)) == target


def test_an_insert_whose_joined_row_is_missing_writes_nothing_and_keep_keeps_it() -> None:
    lost = RowChange("s", "orders", ChangeType.INSERT, ("id",), None, {**ORDER, "customer_id": 2})
    assert list(transform(compiled(ORDERS), 1, lost, GOLD)) == []
    keep = ORDERS.replace("columns: [tier]}", "columns: [tier], missing: keep}")
    assert _load(keep, {(10,): {**ORDER, "tier": "gold"}}, _update(ORDER, customer_id=2)) == {
        (10,): {**ORDER, "customer_id": 2, "tier": "gold"}}  # kept as it was asked


PART = ("{source: s.orders, target: s2.wide, key_columns: [id], merge_part: true, "
        "columns: {include: [id, customer_id]}, joins: [{table: s.customers, by: customer_id, "
        "key: id, columns: [tier]}]}")


def test_a_parts_update_whose_joined_row_is_missing_clears_the_part_and_joined_columns() -> None:
    wide = {(10,): {**ORDER, "tier": "gold", "other": "kept"}}
    assert _load(PART, wide, _update(ORDER, customer_id=2)) == {
        (10,): {"id": 10, "customer_id": None, "tier": None, "other": "kept"}}


FREE_PART = "{source: s.a, target: s2.wide, key_columns: [id], merge_part: true, " \
            "columns: {include: [id, x]}}"


def test_a_free_door_delete_of_a_part_clears_the_parts_columns() -> None:
    key_only = RowChange("s", "a", ChangeType.DELETE, ("id",), {"id": 7}, None)
    wide = {(7,): {"id": 7, "x": 1, "y": 2}}
    assert _load(FREE_PART, wide, key_only) == {(7,): {"id": 7, "x": None, "y": 2}}


def test_the_free_door_refuses_a_delete_of_a_part_whose_columns_are_not_listed() -> None:
    def checked(pair: str, kind: str) -> object:
        door = DoorQueue("p", DataSource("src", "h1"), compiled(pair), None, DoorStats())
        return door._checked(as_change({"ID": 1, "FULL_NAME": "s.a", "TYPE": kind,
                                        "PK_DATA": "[7]"}, central=False))

    listless = FREE_PART.replace(", columns: {include: [id, x]}", "")
    with pytest.raises(FreeDoorRequestError, match="does not list them"):
        checked(listless, "D")
    assert checked(listless, "I") and checked(FREE_PART, "D")


def test_a_join_must_list_its_columns() -> None:
    """A join without ``columns`` added every column of the joined row: the profile's own
    ``id`` became the customer's key (the row written under 501, updates and deletes of
    customer 7 missing it), and a column the source table gained later stopped being
    joined. The definition names the field instead."""
    with pytest.raises(ConfigError, match=r"columns.*required|required.*columns") as raised:
        compiled("{source: s.customers, target: w.customers, joins: [{table: s.profiles, "
                 "by: id, key: customer_id}]}")
    assert "joins" in str(raised.value), raised.value


B_ORDERS = ("{source: s.b_orders, target: s2.orders, virtual_columns: [{name: id, expression: "
            "'id + 1000000'}], joins: [{table: s.customers, by: customer_id, key: id, "
            "columns: [tier]}]}")
A_ORDERS = "{source: s.a_orders, target: s2.orders}"


def test_an_update_the_joins_drop_deletes_the_row_at_its_virtual_key() -> None:
    # two source tables share the target, kept apart by a virtual key: b's order 5 is row
    # 1000005, a's order 5 is row 5
    target = {(5,): {"id": 5, "customer_id": 1}, (1000005,): {"id": 1000005, "customer_id": 1}}
    before = {"id": 5, "customer_id": 1}
    change = RowChange("s", "b_orders", ChangeType.UPDATE, ("id",), before,
                       {**before, "customer_id": 2})  # customer 2: no such row
    found = list(transform(compiled(B_ORDERS, A_ORDERS), 1, change, GOLD))
    assert applied.loaded(target, found) == {(5,): {"id": 5, "customer_id": 1}}


VIRTUAL_PART = ("{source: s.orders, target: s2.wide, key_columns: [id], merge_part: true, "
                "columns: {include: [id, customer_id]}, virtual_columns: [{name: id, "
                "expression: 'id + 1000000'}, {name: region, value: eu-1}, {name: label, "
                "expression: \"concat_ws(' ', customer_id, 'x')\"}], joins: [{table: "
                "s.customers, by: customer_id, key: id, columns: [tier]}]}")
WIDE = {(1000010,): {"id": 1000010, "customer_id": 1, "tier": "gold", "region": "eu-1",
                     "label": "1 x", "other": "kept"}}
CLEARED = {(1000010,): {"id": 1000010, "customer_id": None, "tier": None, "region": None,
                        "label": None, "other": "kept"}}


def test_a_parts_update_the_joins_drop_clears_it_at_its_virtual_key_with_its_virtual_columns(
        ) -> None:
    found = _load(VIRTUAL_PART, {key: dict(row) for key, row in WIDE.items()},
                  _update(ORDER, customer_id=2))
    assert found == CLEARED


def test_a_parts_delete_clears_its_virtual_columns() -> None:
    # a constant or an expression over the cleared columns is no value of any source row
    delete = RowChange("s", "orders", ChangeType.DELETE, ("id",), ORDER, None)
    found = _load(VIRTUAL_PART, {key: dict(row) for key, row in WIDE.items()}, delete)
    assert found == CLEARED


CUSTOMERS = ("{{source: s.customers, target: s2.wide, joins: [{{table: s.profiles, by: id, "
             "key: customer_id, columns: [city, tier]{missing}}}]}}")
PROFILES = ("{source: s.profiles, target: s2.wide, merge_part: true, key_columns: [customer_id], "
            "column_pairs: [{source: customer_id, target: id}], columns: {include: [city, tier]}}")
WIDE_TABLE = frozenset({("dst", "s2", "wide")})
ADA = {"id": 1, "name": "Ada"}
PARIS = {"pid": 9, "customer_id": 1, "city": "Paris", "tier": "gold"}


def _batch(missing: str, table: applied.Table, change: RowChange,
           joined: dict[Any, Any] | None = None) -> applied.Table:
    pipeline = compiled(CUSTOMERS.format(missing=missing), PROFILES)
    return applied.loaded(table, list(transform(pipeline, 1, change, joined)), WIDE_TABLE)


def _profile(kind: ChangeType, before: dict[str, Any] | None,
             after: dict[str, Any] | None) -> RowChange:
    return RowChange("s", "profiles", kind, ("pid",), before, after)


def test_a_parts_update_after_its_wide_rows_delete_makes_no_orphan_row() -> None:
    target = {(1,): {**ADA, "city": "Paris", "tier": "gold"}}
    gone = RowChange("s", "customers", ChangeType.DELETE, ("id",), ADA, None)
    assert _batch(", missing: keep", target, gone) == {}
    moved = _profile(ChangeType.UPDATE, PARIS, {**PARIS, "city": "Lyon"})
    assert _batch(", missing: keep", target, moved) == {}  # the profile stays on the source
    # where the wide row is, the part's update writes its columns there
    target = {(1,): {**ADA, "city": "Paris", "tier": "gold"}}
    assert _batch(", missing: keep", target, moved) == {(1,): {**ADA, "city": "Lyon",
                                                                "tier": "gold"}}


def test_a_joined_row_arriving_after_its_dropped_insert_does_not_make_the_row() -> None:
    # the customer's insert looked up its profile before the profile's transaction committed
    ada = RowChange("s", "customers", ChangeType.INSERT, ("id",), None, ADA)
    nothing = {("s.profiles", "customer_id"): {}}
    profile = _profile(ChangeType.INSERT, None, PARIS)
    target = _batch("", {}, ada, nothing)
    assert target == {}
    assert _batch("", target, profile) == {}  # not a row of the profile's columns alone
    # missing: keep wrote the customer: the profile's columns come to its row
    target = _batch(", missing: keep", {}, ada, nothing)
    assert _batch(", missing: keep", target, profile) == {
        (1,): {**ADA, "city": "Paris", "tier": "gold"}}


def test_a_part_no_other_pair_joins_makes_its_wide_row() -> None:
    # written before the row's other part (a snapshot copy of its table first), it would be
    # lost if it only updated a row that is not there yet
    pipeline = compiled("{source: s.customers, target: s2.wide}", PROFILES)
    found = list(transform(pipeline, 1, _profile(ChangeType.INSERT, None, PARIS)))
    assert applied.loaded({}, found, WIDE_TABLE) == {(1,): {"id": 1, "city": "Paris",
                                                            "tier": "gold"}}
