"""node/target/mysql/twoway.py: the images a conflict check compares, and value comparison
across the binlog's and a SELECT's types."""

from __future__ import annotations

import datetime
from decimal import Decimal

from node.changes import ChangeType, TargetChange
from node.target.mysql.twoway import first_images, same_row


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
