"""Column names a pair gives that the table's layout must hold, matched without case as
MySQL matches them: ``columns: {exclude: [...]}`` and a join's ``by``
(node/extract/pairs.py, node/extract/layouts.py)."""

from __future__ import annotations

import pytest

from node.changes import ChangeType, RowChange
from node.extract.etl import transform
from tests.unit.test_etl import PIPELINE_ID, compiled

USERS = "{source: s.users, target: t.users, columns: {exclude: [Password]}}"


def test_an_excluded_column_named_in_another_case_is_left_out() -> None:
    """``exclude: [Password]`` on a column ``password``: the password was copied."""
    c = compiled(USERS)
    row = RowChange("s", "users", ChangeType.INSERT, ("id",), None,
                    {"id": 1, "password": "hunter2"})
    assert c.layout_problem("s", "users", ("id", "password"), ("id",)) is None
    assert [change.after for change in transform(c, 1, row)] == [{"id": 1}]
    plain = c.plain("s", "users", ("id",))
    assert plain is not None
    assert [mapping.changes(1, row, False).after for mapping in plain] == [{"id": 1}]


def test_an_excluded_name_the_table_lacks_stops_at_its_table_map() -> None:
    """A misspelt name left out nothing: the column meant to be left out was copied."""
    problem = compiled("{source: s.users, target: t.users, columns: {exclude: [pasword]}}"
                       ).layout_problem("s", "users", ("id", "password"), ("id",))
    assert problem is not None
    assert f"pipeline {PIPELINE_ID}: pair src:s.users → dst:t.users excludes column(s) " \
        "pasword, which s.users does not have" in problem
    assert "columns: exclude" in problem


def test_an_excluded_column_dropped_on_the_source_stops_as_an_included_one_does() -> None:
    c = compiled(USERS)
    assert c.layout_problem("s", "users", ("id", "password"), ("id",)) is None
    assert "excludes column(s) Password" in c.layout_problem(  # type: ignore[operator]
        "s", "users", ("id",), ("id",))
    included = compiled("{source: s.users, target: t.users, columns: {include: [name]}}")
    assert "includes column(s) name" in included.layout_problem(  # type: ignore[operator]
        "s", "users", ("id",), ("id",))


def test_a_pattern_pair_stops_only_where_the_table_had_the_excluded_column() -> None:
    """As for include: a table the pattern matches that never had the column lost none."""
    c = compiled("{source: 's.users_[0-1]', target: t.users, columns: {exclude: [password]}}")
    assert c.layout_problem("s", "users_0", ("id",), ("id",)) is None
    assert c.layout_problem("s", "users_1", ("id", "Password"), ("id",)) is None
    assert "excludes column(s) password" in c.layout_problem(  # type: ignore[operator]
        "s", "users_1", ("id",), ("id",))


WIDE = "{source: shop.customers, target: t.wide, joins: [{table: shop.profiles, by: %s, " \
    "key: customer_id, columns: [city]}]}"
PARIS = {("shop.profiles", "customer_id"): {1: {"customer_id": 1, "city": "Paris"}}}


@pytest.mark.parametrize("by", ["id_customer", "customer"])
def test_a_join_by_a_column_the_table_lacks_stops_at_its_table_map(by: str) -> None:
    """Every row missed its joined row: each insert dropped, each update a delete."""
    problem = compiled(WIDE % by).layout_problem("shop", "customers", ("id", "name"), ("id",))
    assert problem is not None
    assert f"pipeline {PIPELINE_ID}: pair src:shop.customers → dst:t.wide joins " \
        f"shop.profiles by {by}, a column shop.customers does not have" in problem
    assert "join's by" in problem


def test_a_join_by_column_dropped_on_the_source_stops() -> None:
    c = compiled(WIDE % "id")
    assert c.layout_problem("shop", "customers", ("id", "name"), ("id",)) is None
    assert "joins shop.profiles by id" in c.layout_problem(  # type: ignore[operator]
        "shop", "customers", ("ID2", "name"), ("ID2",))


def test_a_join_by_a_column_named_in_another_case_fits() -> None:
    assert compiled(WIDE % "ID").layout_problem("shop", "customers", ("id", "name"),
                                                ("id",)) is None


def test_a_join_by_a_column_named_in_another_case_finds_its_row() -> None:
    c = compiled(WIDE % "ID")
    row = RowChange("shop", "customers", ChangeType.INSERT, ("id",), None,
                    {"id": 1, "name": "Ada"})
    assert [change.after for change in transform(c, 1, row, joined=PARIS)] == \
        [{"id": 1, "name": "Ada", "city": "Paris"}]
