"""node/verify/plan.py ``written_by_others``: whether another pipeline's pair may write a
target table from another source table (its rows there are not extra: --repair would
delete them), patterns resolved against the table compared."""

from __future__ import annotations

import dataclasses

import pytest

from node.verify.plan import written_by_others
from tests.unit.test_etl import pipeline

ADDRESS = ("dst", "dw", "orders_2")


def pairs(*texts: str, source: str = "src") -> tuple:
    found = pipeline(*texts).pairs
    return tuple(dataclasses.replace(p, source=dataclasses.replace(p.source, datasource=source))
                 for p in found)


@pytest.mark.parametrize(("pair", "source", "own", "shared"), [
    # the same source table: the same rows, never another's
    ("{source: shop.orders_2, target: dw.orders_2}", "src", ("src", "shop", "orders_2"), False),
    # another source table, or the same name on another server
    ("{source: shop.other, target: dw.orders_2}", "src", ("src", "shop", "orders_2"), True),
    ("{source: shop.orders_2, target: dw.orders_2}", "src2", ("src", "shop", "orders_2"), True),
    # a schema copied by a template: the target's name tells its source table
    ("{source: {namespace: shop, table: 're:.*'}, target: {namespace: dw, table: '{table}'}}",
     "src", ("src", "shop", "orders_2"), False),
    ("{source: {namespace: shop, table: 're:.*'}, target: {namespace: dw, table: '{table}'}}",
     "src", ("src", "shop", "orders_9"), True),
    # a family member by member, and a family gathered into one table: any of them
    ("{source: 'shop.orders_[0-3]', target: 'dw.orders_[0-3]'}", "src",
     ("src", "shop", "orders_2"), False),
    ("{source: 'shop.orders_[0-3]', target: 'dw.orders_[0-3]'}", "src",
     ("src", "shop", "orders_1"), True),
    ("{source: {namespace: shop, table: 're:orders_.*'}, target: dw.orders_2}", "src",
     ("src", "shop", "orders_2"), True),
    # a pair that never writes the table
    ("{source: shop.other, target: dw.orders_3}", "src", ("src", "shop", "orders_2"), False),
    ("{source: shop.other, target: {datasource: other, namespace: dw, table: orders_2}}",
     "src", ("src", "shop", "orders_2"), False),
])
def test_a_table_another_pipelines_pair_may_fill_from_another_source_table_is_shared(
        pair: str, source: str, own: tuple[str, str, str], shared: bool) -> None:
    assert written_by_others(pairs(pair, source=source), ADDRESS, own) is shared
