"""What a pipeline's pairs check at each table map of the stream (node/extract/layouts.py):
a rename onto a column the source has, and parts of a wide row that write one column."""

from __future__ import annotations

import pickle

import pytest

from tests.unit.test_etl import PIPELINE_ID, compiled

RENAMED = "{source: shop.t, target: copy.t, column_pairs: [{source: a, target: x}]}"


@pytest.mark.parametrize("columns", [("id", "a", "x"), ("id", "a", "X")])
def test_a_rename_onto_a_column_the_source_added_stops_at_its_table_map(
        columns: tuple[str, ...]) -> None:
    """The pair renames a → x; the source adds a column x: every row's a was overwritten by
    x's value (NULL), silently. The new table map stops the pipeline; no row is mapped."""
    problem = compiled(RENAMED).layout_problem("shop", "t", columns)
    assert problem is not None
    assert f"pipeline {PIPELINE_ID}: pair src:shop.t → dst:copy.t" in problem
    assert f"(a and {columns[2]} → x)" in problem


@pytest.mark.parametrize("pair", [
    RENAMED,
    "{source: shop.t, target: copy.t, columns: {exclude: [x]}, "
    "column_pairs: [{source: a, target: x}]}",  # x is left out: a takes its name
    "{source: shop.t, target: copy.t, "
    "column_pairs: [{source: a, target: x}, {source: x, target: y}]}",  # a swap of names
])
def test_a_rename_that_meets_no_kept_column_fits(pair: str) -> None:
    columns = ("id", "a") if pair == RENAMED else ("id", "a", "x")
    assert compiled(pair).layout_problem("shop", "t", columns) is None


WIDE = ("{source: shop.customers, target: dw.wide}",
        "{source: shop.profiles, target: dw.wide, merge_part: true, key_columns: [customer_id], "
        "column_pairs: [{source: customer_id, target: id}]}")


def test_parts_of_a_wide_row_that_write_one_column_stop_at_the_second_table_map() -> None:
    """customers and profiles both have updated_at: each part's change overwrote the other's
    value in the wide row, which held whichever table wrote last (a copy, another)."""
    c = compiled(*WIDE)
    assert c.layout_problem("shop", "customers", ("id", "name", "updated_at"), ("id",)) is None
    problem = c.layout_problem("shop", "profiles", ("customer_id", "city", "updated_at"),
                               ("customer_id",))
    assert problem is not None
    assert "shop.profiles (pair src:shop.profiles) and shop.customers (pair " \
        "src:shop.customers) both write column(s) updated_at of the wide rows of dw.wide" \
        in problem


def test_a_wide_row_part_gaining_a_column_another_part_writes_stops() -> None:
    """An ADD COLUMN of a part (ddl_sync replays it; the target already has the column)."""
    c = compiled(*WIDE)
    assert c.layout_problem("shop", "customers", ("id", "name", "Tier"), ("id",)) is None
    assert c.layout_problem("shop", "profiles", ("customer_id", "city"), ("customer_id",)) \
        is None
    assert "both write column(s) tier" in c.layout_problem(  # type: ignore[operator]
        "shop", "profiles", ("customer_id", "city", "tier"), ("customer_id",))


@pytest.mark.parametrize("profiles", [
    WIDE[1],
    WIDE[1].replace("}]}", "}, {source: updated_at, target: profile_updated_at}]}"),
    WIDE[1].replace("merge_part: true, ", "merge_part: true, columns: {exclude: "
                                          "[updated_at]}, "),
])
def test_parts_of_a_wide_row_meeting_only_on_the_key_fit(profiles: str) -> None:
    c = compiled(WIDE[0], profiles)
    columns = ("customer_id", "city") if profiles == WIDE[1] else \
        ("customer_id", "city", "updated_at")
    assert c.layout_problem("shop", "customers", ("id", "name", "updated_at"), ("id",)) is None
    assert c.layout_problem("shop", "profiles", columns, ("customer_id",)) is None
    assert c.layout_problem("shop", "customers", ("id", "name", "updated_at"), ("id",)) is None


def test_a_join_and_the_part_of_the_joined_table_may_write_its_columns() -> None:
    """The join reads the joined table's current row: the same values its part writes."""
    c = compiled("{source: shop.customers, target: dw.wide, joins: [{table: shop.profiles, "
                 "by: id, key: customer_id, columns: [city]}]}", WIDE[1])
    assert c.layout_problem("shop", "customers", ("id", "name"), ("id",)) is None
    assert c.layout_problem("shop", "profiles", ("customer_id", "city"), ("pid",)) is None
    c = compiled("{source: shop.customers, target: dw.wide, joins: [{table: shop.towns, "
                 "by: id, key: customer_id, columns: [city]}]}", WIDE[1])
    assert c.layout_problem("shop", "customers", ("id", "name"), ("id",)) is None
    assert "both write column(s) city" in c.layout_problem(  # type: ignore[operator]
        "shop", "profiles", ("customer_id", "city"), ("pid",))


def test_two_parts_joining_one_table_may_write_its_columns() -> None:
    join = "joins: [{table: shop.towns, by: town_id, key: id, columns: [town]}]"
    c = compiled("{source: shop.customers, target: dw.wide, " + join + "}",
                 WIDE[1].replace("merge_part: true,", "merge_part: true, " + join + ","))
    assert c.layout_problem("shop", "customers", ("id", "town_id"), ("id",)) is None
    assert c.layout_problem("shop", "profiles", ("customer_id", "city", "town_id"),
                            ("customer_id",)) is not None  # town_id: their own, both write it
    c = compiled("{source: shop.customers, target: dw.wide, " + join + "}",
                 WIDE[1].replace("merge_part: true,", "merge_part: true, " + join + ", "
                                 "columns: {exclude: [town_id]},"))
    assert c.layout_problem("shop", "customers", ("id", "town_id"), ("id",)) is None
    assert c.layout_problem("shop", "profiles", ("customer_id", "city", "town_id"),
                            ("customer_id",)) is None


def test_a_column_moved_from_one_part_to_the_other_by_ddl_is_no_meeting() -> None:
    """ALTER customers DROP note; ALTER profiles ADD note: customers' layout before its
    DROP still wrote note, and the profiles' next table map stopped the pipeline."""
    c = compiled(*WIDE)
    assert c.layout_problem("shop", "customers", ("id", "name", "note"), ("id",)) is None
    c.altered("shop", "customers")
    assert c.layout_problem("shop", "profiles", ("customer_id", "city", "note"),
                            ("customer_id",)) is None
    assert "both write column(s) note" in c.layout_problem(  # type: ignore[operator]
        "shop", "customers", ("id", "name", "note"), ("id",))  # added back: they meet


def test_a_pipeline_sent_to_a_worker_checks_layouts_afresh() -> None:
    c = pickle.loads(pickle.dumps(compiled(*WIDE)))
    assert c.layout_problem("shop", "customers", ("id", "name"), ("id",)) is None


def test_shards_of_one_part_and_tables_gathered_without_parts_may_meet() -> None:
    c = compiled("{source: shop.customers, target: dw.wide}",
                 "{source: {namespace: shop, table: 'profiles_[0-1]'}, target: dw.wide, "
                 "merge_part: true}")
    for table in ("profiles_0", "profiles_1"):
        assert c.layout_problem("shop", table, ("id", "city"), ("id",)) is None
    c = compiled("{source: shop.a, target: dw.all}", "{source: shop.b, target: dw.all}")
    for table in ("a", "b"):
        assert c.layout_problem("shop", table, ("id", "v"), ("id",)) is None


def test_a_key_column_left_out_is_still_written_so_a_rename_onto_it_stops() -> None:
    c = compiled("{source: shop.t, target: copy.t, columns: {exclude: [code]}, "
                 "column_pairs: [{source: a, target: code}]}")
    object.__setattr__(c, "table_keys", {("shop", "t"): ("code",)})
    assert c.layout_problem("shop", "t", ("code", "a")) is not None
