"""Which key columns a pipeline may find rows by: ``key_columns`` that admit NULL are
refused where rows are found by them (a keyed table, or parts of a wide row), and allowed
where they are not (a keyless table, found by its whole image; a lake changelog)."""

from __future__ import annotations

from shared.tablekeys import pipeline_keys
from tests.unit.test_etl import pipeline

KEYS = {("shop", "orders"): ("id",), ("shop", "logs"): None}
LOOSE = frozenset({("shop", "orders", "ref"), ("shop", "logs", "ref")})


def test_nullable_key_columns_of_a_keyed_table_are_refused_naming_them() -> None:
    found = pipeline("{source: shop.orders, target: shop.orders, key_columns: [Ref]}")
    _, problems = pipeline_keys(found, KEYS, LOOSE)
    assert len(problems) == 1
    assert "table shop.orders" in problems[0] and "key_columns Ref that admit NULL" in \
        problems[0]
    assert pipeline_keys(found, KEYS) == ({}, [])  # nothing admits NULL: fine


def test_nullable_key_columns_of_a_keyless_table_are_allowed_unless_parts_meet_by_them(
        ) -> None:
    plain = pipeline("{source: shop.logs, target: shop.logs, key_columns: [ref]}")
    assert pipeline_keys(plain, KEYS, LOOSE) == ({}, [])
    merged = pipeline("{source: shop.logs, target: shop.wide, key_columns: [ref], "
                      "merge_part: true}")
    [problem] = pipeline_keys(merged, KEYS, LOOSE)[1]
    assert "key_columns ref that admit NULL" in problem
