"""node/extract/etl.py ``CompiledPipeline.gathered``: whether a target of a source table
may also hold rows of other source tables, whichever way another pair reaches it (the same
name, a template, a numbered family). ddl_sync refuses to empty such a target for one of
its tables, and a merge writes into it as into a shared table."""

from __future__ import annotations

import pytest

from node.changes import ChangeType, RowChange
from node.extract import reach
from node.extract.etl import extract_transform
from shared.errors import ConfigError
from shared.model import BinlogPosition, LookupJoin
from shared.patterns import NamePattern
from tests.unit.test_etl import compiled

CATCH_ALL = "{source: {namespace: shop, table: 're:.*'}, target: {namespace: dw, table: '{table}'}}"
FAMILY = ("{source: {namespace: shop, table: 'orders_[0-3]'}, target: {namespace: dw, "
          "table: 'orders_[0-3]'}}")


def test_a_catch_all_template_writing_the_target_from_another_table_gathers_it() -> None:
    """The catch-all writes shop.orders into dw.orders, which shop.orders_archive's pair
    names too: a TRUNCATE of orders_archive would have wiped shop.orders' rows."""
    c = compiled("{source: shop.orders_archive, target: dw.orders}", CATCH_ALL,
                 options="ddl_sync: true")
    assert c.gathered("shop", "orders_archive") and c.gathered("shop", "orders")
    assert not c.gathered("shop", "items")
    change = RowChange("shop", "", ChangeType.DDL, ddl="TRUNCATE orders_archive")
    with pytest.raises(ConfigError, match="also takes rows of other source tables"):
        list(extract_transform(c, [(4, change)]))


def test_a_template_with_literal_parts_is_read_back_to_its_source_name() -> None:
    c = compiled("{source: shop.archive, target: dw.ods_orders}",
                 "{source: {namespace: shop, table: 're:.*'}, target: {namespace: dw, "
                 "table: 'ods_{table}'}}")
    assert c.gathered("shop", "archive") and c.gathered("shop", "orders")
    assert not c.gathered("shop", "ods_orders")  # the catch-all writes it to dw.ods_ods_orders


def test_a_numbered_family_writing_the_target_from_its_member_gathers_it() -> None:
    c = compiled(FAMILY, "{source: shop.x, target: dw.orders_1}")
    assert c.gathered("shop", "x") and c.gathered("shop", "orders_1")
    assert not c.gathered("shop", "orders_2")


def test_a_numbered_family_of_schemas_is_read_back_by_its_index() -> None:
    c = compiled("{source: {namespace: 'shop_[0-1]', table: orders}, target: {namespace: "
                 "'dw_[0-1]', table: orders}}", "{source: other.t, target: dw_1.orders}")
    assert c.gathered("other", "t") and c.gathered("shop_1", "orders")
    assert not c.gathered("shop_0", "orders")


def test_a_schema_template_is_read_back_to_its_source_schema() -> None:
    c = compiled("{source: {namespace: 're:shop_.*', table: 're:.*'}, target: {namespace: "
                 "'{schema}', table: '{table}'}}", "{source: other.x, target: shop_1.orders}")
    assert c.gathered("other", "x") and c.gathered("shop_1", "orders")
    assert not c.gathered("shop_2", "orders")


def test_a_template_of_schema_and_table_two_source_tables_render_alike_gathers() -> None:
    """``{schema}_{table}`` writes a_b.c and a.b_c both into dw.a_b_c."""
    c = compiled("{source: {namespace: 're:.*', table: 're:.*'}, target: {namespace: dw, "
                 "table: '{schema}_{table}'}}")
    assert c.gathered("a", "b_c") and c.gathered("a_b", "c")
    assert not c.gathered("a", "x")


@pytest.mark.parametrize(("checked", "pairs"), [
    # the only table the catch-all could write into dw.orders is shop.orders, which the
    # exact pair takes
    ("shop.orders", ("{source: shop.orders, target: dw.orders}", CATCH_ALL)),
    ("shop.orders", ("{source: shop.orders, target: dw.ods_orders}",
                     "{source: {namespace: shop, table: 're:.*'}, target: {namespace: dw, "
                     "table: 'ods_{table}'}}")),
    # shop.orders would reach dw.orders by the catch-all, but a more specific pair takes it
    ("shop.orders_archive", ("{source: shop.orders_archive, target: dw.orders}", CATCH_ALL,
                             "{source: shop.orders, target: dw.orders_v2}")),
    # the family's member would reach dw.orders_1, but a more specific pair takes it
    ("shop.x", (FAMILY, "{source: shop.orders_1, target: dw.kept}",
                "{source: shop.x, target: dw.orders_1}")),
    # the catch-all's tables of any schema would have to be named orders: its pattern
    # takes log_ tables only
    ("shop.orders_archive", ("{source: shop.orders_archive, target: dw.orders}",
                             "{source: {namespace: 're:.*', table: 're:log_.*'}, target: "
                             "{namespace: dw, table: '{table}'}}")),
])
def test_a_target_no_other_source_table_reaches_is_not_gathered(
        checked: str, pairs: tuple[str, ...]) -> None:
    assert not compiled(*pairs).gathered(*checked.split("."))


def test_a_pattern_of_schemas_into_one_database_gathers_another_schemas_table() -> None:
    """Which schemas ``re:.*`` meets is not known before their rows come: eu.orders may
    well land in dw.orders beside shop.orders_archive's rows."""
    c = compiled("{source: shop.orders_archive, target: dw.orders}",
                 "{source: {namespace: 're:.*', table: 're:.*'}, target: {namespace: dw, "
                 "table: '{table}'}}")
    assert c.gathered("shop", "orders_archive")
    assert c.gathered("shop", "orders")  # eu.orders goes there as well


def test_a_template_gives_every_way_its_fields_split_a_name() -> None:
    assert NamePattern.parse("ods_{table}").sources_of("ods_orders") == [{"table": "orders"}]
    assert NamePattern.parse("ods_{table}").sources_of("orders") == []
    assert NamePattern.parse("{schema}_{table}").sources_of("a_b_c") == [
        {"schema": "a", "table": "b_c"}, {"schema": "a_b", "table": "c"}]
    assert NamePattern.parse("{table}_{table}").sources_of("a_a") == [{"table": "a"}]
    assert NamePattern.parse("{table}_{table}").sources_of("a_b") == []
    assert NamePattern.parse("orders").sources_of("orders") == []  # not a template


def test_the_start_refuses_a_shadowed_or_repeated_pair_apply_never_checked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A definition written straight into ZooKeeper, or applied by an older setl, was never
    checked as apply checks now: a pair a fan-out pattern shadows never wrote, and a table
    read twice without fan_out went to the first pair only. The node's start refuses both."""
    import dataclasses

    from node import start
    from tests.unit.test_etl import pipeline

    monkeypatch.setattr(start.tablekeys, "read_keys", lambda source: {})
    monkeypatch.setattr(start.tablekeys, "read_nullable", lambda source, pipelines: frozenset())
    monkeypatch.setattr(start, "name_case", lambda source: 0)
    monkeypatch.setattr(start, "versioned_pair_problems", lambda compiled, source: [])
    monkeypatch.setattr(start.positions, "current_position", lambda source: BinlogPosition())
    catch_all = "{source: {namespace: shop, table: 're:.*'}, target: {namespace: lake, " \
        "table: '{table}'}, fan_out: true}"
    defined = pipeline("{source: shop.orders, target: dw.orders_v2}",
                       catch_all.replace(", fan_out: true", ""))
    made = compiled("{source: shop.orders, target: dw.orders_v2}")
    start.with_table_keys(made, None, defined)  # type: ignore[arg-type]  # fine
    first, second = defined.pairs
    shadowed = dataclasses.replace(defined, pairs=(first, dataclasses.replace(
        second, fan_out=True)))
    with pytest.raises(ConfigError) as refused:
        start.with_table_keys(made, None, shadowed)  # type: ignore[arg-type]
    assert "pipeline fwd pair src:shop.orders → dst:dw.orders_v2: pair src:shop.re:.* → " \
        "dst:lake.{table} (src:shop.re:.* → dst:lake.{table}) has fan_out and also reads " \
        "src:shop.orders" in str(refused.value)
    twice = dataclasses.replace(defined, pairs=(first, dataclasses.replace(
        first, target=second.target)))
    with pytest.raises(ConfigError, match=r"already reads src:shop\.orders; mark both"):
        start.with_table_keys(made, None, twice)  # type: ignore[arg-type]
    # a join stored without columns (apply refuses it now) added every joined column
    bare = dataclasses.replace(defined, pairs=(dataclasses.replace(first, joins=(
        LookupJoin("shop.profiles", "id", "customer_id"),)),))
    with pytest.raises(ConfigError, match=r"its join of shop\.profiles lists no columns"):
        start.with_table_keys(made, None, bare)  # type: ignore[arg-type]


def test_a_target_of_a_merge_part_or_joins_pair_holds_wide_rows_written_in_parts() -> None:
    """Its statements set stamped columns they leave out to themselves (render.Stamps)."""
    wide = ("{source: shop.customers, target: dw.wide}",
            "{source: shop.profiles, target: dw.wide, merge_part: true, "
            "key_columns: [customer_id], column_pairs: [{source: customer_id, target: id}]}")
    c = compiled(*wide, "{source: shop.items, target: dw.items}")
    assert reach.parted(c, "shop", "customers") and reach.parted(c, "shop", "profiles")
    assert not reach.parted(c, "shop", "items")
    c = compiled("{source: shop.orders, target: dw.orders, joins: [{table: shop.towns, by: "
                 "town_id, key: id, columns: [town]}]}", "{source: shop.items, target: dw.i}")
    assert reach.parted(c, "shop", "orders") and not reach.parted(c, "shop", "items")
