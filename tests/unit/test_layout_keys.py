"""A target table several source tables feed, some keyed and some not (or keyed by other
columns): refused at the second table's layout (node/extract/layouts.py), and, should such
changes ever meet in a batch, by the merge (node/merge.py) rather than merged silently."""

from __future__ import annotations

import pytest

from node.changes import ChangeType, TargetChange
from node.merge import merge
from shared.errors import ConfigError
from tests.unit.test_etl import PIPELINE_ID, compiled

SHARDS = "{source: 'shop.orders_[0-1]', target: dw.orders}"


def test_a_keyless_shard_beside_a_keyed_one_stops_at_its_table_map() -> None:
    """orders_1 has no primary key: merged by orders_0's key, all but the last of its rows
    in each batch were lost."""
    c = compiled(SHARDS)
    assert c.layout_problem("shop", "orders_0", ("id", "v"), ("id",)) is None
    problem = c.layout_problem("shop", "orders_1", ("id", "v"), ())
    assert problem is not None
    assert f"pipeline {PIPELINE_ID}: shop.orders_1 (pair src:shop.orders_[0-1]) is without a " \
        "key and shop.orders_0 (pair src:shop.orders_[0-1]) keyed by (id), and both write " \
        "dw.orders" in problem
    assert "ADD PRIMARY KEY" in problem


def test_tables_keyed_by_other_columns_into_one_target_stop() -> None:
    c = compiled("{source: shop.a, target: dw.all}", "{source: shop.b, target: dw.all}")
    assert c.layout_problem("shop", "a", ("id", "region", "v"), ("id",)) is None
    assert "keyed by (id, region)" in c.layout_problem(  # type: ignore[operator]
        "shop", "b", ("id", "region", "v"), ("id", "region"))


@pytest.mark.parametrize("keys", [(("id",), ("ID",)), ((), ())])
def test_tables_keyed_alike_or_all_keyless_share_a_target(
        keys: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    c = compiled(SHARDS)
    assert c.layout_problem("shop", "orders_0", ("id", "v"), keys[0]) is None
    assert c.layout_problem("shop", "orders_1", ("ID", "v"), keys[1]) is None


def test_a_table_that_gains_the_key_after_a_ddl_fits_again() -> None:
    c = compiled(SHARDS)
    assert c.layout_problem("shop", "orders_0", ("id", "v"), ("id",)) is None
    assert c.layout_problem("shop", "orders_1", ("id", "v"), ()) is not None
    c.altered("shop", "orders_1")  # ALTER TABLE orders_1 ADD PRIMARY KEY (id)
    assert c.layout_problem("shop", "orders_1", ("id", "v"), ("id",)) is None


T = ("dst", "t", "log")


def _insert(keys: tuple[str, ...], seq: int) -> TargetChange:
    return TargetChange(*T, ChangeType.INSERT, keys, None, {"id": seq, "v": seq}, 0, seq,
                        "", None)


@pytest.mark.parametrize("first,then", [(("id",), ()), ((), ("id",))])
@pytest.mark.parametrize("gathered", [frozenset(), frozenset({T})])
def test_the_merge_refuses_keyless_and_keyed_changes_of_one_target(
        first: tuple[str, ...], then: tuple[str, ...], gathered: frozenset[
            tuple[str, str, str]]) -> None:
    """Keyed first, the keyless rows got key () and only the last of them survived."""
    with pytest.raises(ConfigError, match=r"target dst: table t\.log takes .* \(seq 2\)"):
        merge([_insert(first, 1), _insert(then, 2), _insert(then, 3)], gathered=gathered)


def test_the_merge_still_takes_keyless_changes_in_order() -> None:
    found = merge([_insert((), 1), _insert((), 2)])
    assert [change.after for w in found for change in w.changes] == \
        [{"id": 1, "v": 1}, {"id": 2, "v": 2}]
