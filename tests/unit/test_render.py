"""The statements Load renders for one table's writes: names quoted whatever they hold,
generated columns never written."""

from __future__ import annotations

from node.loader import _statements
from node.merge import TableWrites


def writes(**fields: object) -> TableWrites:
    base: dict[str, object] = {"datasource": "t", "schema": "s", "table": "gen", "keys": ("id",),
                               "push_weight": 0, "first_seq": 0}
    return TableWrites(**{**base, **fields})  # type: ignore[arg-type]


def test_generated_columns_are_left_out_of_upserts_in_merged_and_ordered_writes() -> None:
    row = {"id": 1, "price": 2, "total_v": 4, "total_p": 4}
    merged = list(_statements(writes(upserts=[row], deletes=[(9,)]), 100,
                              frozenset({"total_v", "total_p"})))
    assert [sql for sql, *_ in merged] == [
        "DELETE FROM `s`.`gen` WHERE (`id`) IN ((%s))",
        "INSERT INTO `s`.`gen` (`id`, `price`) VALUES (%s, %s) ON DUPLICATE KEY UPDATE "
        "`price` = VALUES(`price`)"]
    assert merged[1][1] == [[1, 2]]
    ordered = list(_statements(writes(steps=[(True, row), (False, (1,))]), 100,
                               frozenset({"total_v"})))
    assert "`total_v`" not in ordered[0][0] and "`total_p`" in ordered[0][0]


def test_any_name_is_quoted_with_backticks_doubled() -> None:
    odd = writes(schema="my-db.x", table="t`1 表", keys=("a b",))
    (delete, *_), (upsert, *_) = _statements(
        TableWrites(**{**odd.__dict__, "deletes": [(1,)], "upserts": [{"a b": 1, "c`d": 2}]}),
        10)
    assert delete.startswith("DELETE FROM `my-db.x`.`t``1 表` WHERE (`a b`) IN")
    assert upsert.startswith("INSERT INTO `my-db.x`.`t``1 表` (`a b`, `c``d`) VALUES")
