"""Shard routing (node/extract/shard.py through node/extract/etl.py), without Spark or servers."""

from __future__ import annotations

import pytest

from node.changes import ChangeType, RowChange
from node.extract.etl import transform
from node.extract.shard import routes
from shared.errors import ConfigError, ShardError
from tests.unit.test_etl import compiled, insert

ORDERS = ('{source: s.orders, target: {namespace: "shop_[0-1]", table: "orders_[0-3]"}, '
          "shard: {column: uid}}")
SECOND = ('{source: s.orders, target: {datasource: other, namespace: "shop_[2-3]", '
          'table: "orders_[0-3]"}, shard: {column: uid}}')


def slots(pairs: tuple[str, ...], change: RowChange) -> list[tuple]:
    return [(t.datasource, t.schema, t.table, t.type.value)
            for t in transform(compiled(*pairs), 1, change)]


@pytest.mark.parametrize("uid, slot", [(0, ("shop_0", "orders_0")), (5, ("shop_1", "orders_1")),
                                       (7, ("shop_1", "orders_3")), (8, ("shop_0", "orders_0")),
                                       ("13", ("shop_1", "orders_1"))])
def test_modulo_balance_spreads_values_over_the_slots(uid: object, slot: tuple) -> None:
    assert slots((ORDERS,), insert("s", "orders", {"id": 1, "uid": uid})) == [
        ("dst", *slot, "I")]


def test_quotient_balance_keeps_runs_of_values_together() -> None:
    pair = ORDERS.replace("{column: uid}", "{column: uid, algorithm: quotient, "
                                           "table_balance_size: 100}")
    found = [slots((pair,), insert("s", "orders", {"id": 1, "uid": uid}))[0][1:3]
             for uid in (0, 99, 100, 250, 799, 800)]
    assert found == [("shop_0", "orders_0"), ("shop_0", "orders_0"), ("shop_0", "orders_1"),
                     ("shop_0", "orders_2"), ("shop_1", "orders_3"), ("shop_0", "orders_0")]


def test_pairs_of_one_source_on_two_servers_form_one_route() -> None:
    found = [slots((ORDERS, SECOND), insert("s", "orders", {"id": 1, "uid": uid}))
             for uid in (3, 8, 15, 16)]
    assert found == [[("dst", "shop_0", "orders_3", "I")], [("other", "shop_2", "orders_0", "I")],
                     [("other", "shop_3", "orders_3", "I")], [("dst", "shop_0", "orders_0", "I")]]


def test_an_update_changing_the_slot_moves_the_row_and_deletes_route_by_before() -> None:
    move = RowChange("s", "orders", ChangeType.UPDATE, ("id",), {"id": 1, "uid": 1},
                     {"id": 1, "uid": 2})
    assert slots((ORDERS,), move) == [("dst", "shop_0", "orders_1", "D"),
                                      ("dst", "shop_0", "orders_2", "I")]
    stay = RowChange("s", "orders", ChangeType.UPDATE, ("id",), {"id": 1, "uid": 1},
                     {"id": 1, "uid": 9})
    assert slots((ORDERS,), stay) == [("dst", "shop_0", "orders_1", "U")]
    delete = RowChange("s", "orders", ChangeType.DELETE, ("id",), {"id": 1, "uid": 6}, None)
    assert slots((ORDERS,), delete) == [("dst", "shop_1", "orders_2", "D")]


def test_a_delete_by_key_alone_goes_to_every_slot() -> None:
    # a free-door D request (setl verify --repair of a row extra on the target): the key
    # is all it names, and the row may sit in any slot
    by_key = RowChange("s", "orders", ChangeType.DELETE, ("id",), {"id": 1}, None)
    found = slots((ORDERS, SECOND), by_key)
    assert len(found) == 16 and {slot[3] for slot in found} == {"D"}
    assert ("other", "shop_3", "orders_3", "D") in found
    # the shard column in the key: the key alone still goes everywhere (a copy in a wrong
    # slot, which verify --repair clears, is deleted too: docs/verify.md)
    in_key = RowChange("s", "orders", ChangeType.DELETE, ("uid", "id"), {"uid": 5, "id": 1},
                       None)
    assert len(slots((ORDERS, SECOND), in_key)) == 16
    whole = RowChange("s", "orders", ChangeType.DELETE, ("uid", "id"),
                      {"uid": 5, "id": 1, "v": 2}, None)  # the binlog's image: its one slot
    assert slots((ORDERS,), whole) == [("dst", "shop_1", "orders_1", "D")]
    null = RowChange("s", "orders", ChangeType.DELETE, ("id",), {"id": 1, "uid": None}, None)
    with pytest.raises(ShardError, match="is NULL"):
        slots((ORDERS,), null)


@pytest.mark.parametrize("row, message", [
    ({"id": 4, "uid": None}, r"row \(4,\) cannot be routed: shard column uid is NULL"),
    ({"id": 4}, r"shard column uid is missing"),
    ({"id": 4, "uid": "x7"}, r"shard column uid is 'x7', not an integer"),
    ({"id": 4, "uid": 2.5}, r"shard column uid is 2.5, not an integer"),
])
def test_an_unroutable_row_is_a_clear_error(row: dict, message: str) -> None:
    with pytest.raises(ShardError, match=message):
        slots((ORDERS,), insert("s", "orders", row))


def test_a_route_whose_pairs_differ_in_settings_refuses_to_start() -> None:
    """Only the first pair's settings ran for every slot (a definition written straight into
    ZooKeeper; setl apply refuses it)."""
    import dataclasses

    from shared.model import ColumnMode

    pipeline = compiled(ORDERS, SECOND).pairs
    changed = dataclasses.replace(pipeline[1].pair, column_mode=ColumnMode.EXCLUDE,
                                  columns=("secret",))
    with pytest.raises(ConfigError, match="differ in column_mode, columns"):
        routes((pipeline[0].pair, changed))
