"""A target that compares table names without case (lower_case_table_names 1 or 2) takes
two source tables the source keeps apart (shop.Users, shop.users) for one: refused at
start (node/target/mysql/namecase.py), unless a pair gathers them into one name on
purpose."""

from __future__ import annotations

from typing import Any

import pytest

from node.target import kinds
from node.target.mysql import namecase
from shared.errors import ConfigError
from tests.unit.test_etl import compiled

EACH = "{source: {namespace: shop, table: 're:.*'}, target: {namespace: shop, table: '{table}'}}"
TABLES = [("shop", "Users"), ("shop", "orders"), ("shop", "users")]


@pytest.mark.parametrize("case", [1, 2])
def test_two_tables_a_target_would_fold_into_one_are_refused(case: int) -> None:
    [problem] = namecase.folded_collisions(compiled(EACH), TABLES, {"dst": case})
    assert problem == (
        "pipeline shop.fwd: source tables `shop`.`Users` and `shop`.`users` go to "
        "`shop`.`Users` and `shop`.`users` on target dst, which compares table names "
        f"without case (lower_case_table_names={case}): they are one table there, and the "
        "rows of each would overwrite the other's of equal keys. Give one of them a pair of "
        "its own whose target names another table (target: {table: 'users_2'}, or a "
        "template such as '{table}_cs'), or leave it out of the pipeline's pairs")


def test_a_target_that_keeps_case_and_tables_kept_apart_are_fine() -> None:
    assert namecase.folded_collisions(compiled(EACH), TABLES, {"dst": 0}) == []
    apart = compiled("{source: shop.Users, target: shop.users_2}", EACH)
    assert namecase.folded_collisions(apart, TABLES, {"dst": 1}) == []


def test_tables_a_pair_gathers_into_one_name_on_purpose_are_fine() -> None:
    gather = compiled("{source: {namespace: shop, table: 're:.*'}, target: shop.all}")
    assert namecase.folded_collisions(gather, TABLES, {"dst": 1}) == []


def test_the_start_of_a_mysql_target_reads_its_folding(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    for name in ("refuse_undecodable", "refuse_stored_types"):
        monkeypatch.setattr(kinds, name, lambda *args, **kwargs: None)
    asked: list[Any] = []

    def cases(targets: Any) -> dict[str, int]:
        asked.append(targets)
        return {"dst": 1}

    monkeypatch.setattr(namecase, "name_cases", cases)
    monkeypatch.setattr(namecase, "source_tables", lambda source: TABLES)
    with pytest.raises(ConfigError, match=r"`shop`\.`Users` and `shop`\.`users` go to"):
        kinds.check_source("mysql", compiled(EACH), None, targets={"dst": None})  # type: ignore[dict-item]
    kinds.check_source("mysql", compiled(EACH), None, after_ddl=True)  # (none kept)
    assert asked == [{"dst": None}]


def test_a_table_created_later_into_a_folded_name_is_refused_after_its_ddl(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """shop.users made on the source (CREATE TABLE, ddl_sync or not) beside shop.Users: the
    check after the DDL stops the pipeline before a row of it is loaded."""
    for name in ("refuse_undecodable", "refuse_stored_types"):
        monkeypatch.setattr(kinds, name, lambda *args, **kwargs: None)
    monkeypatch.setattr(namecase, "name_cases", lambda targets: {"dst": 1})
    tables = [("shop", "Users")]
    monkeypatch.setattr(namecase, "source_tables", lambda source: tables)
    made = compiled(EACH)
    kinds.check_source("mysql", made, None, targets={"dst": None})  # type: ignore[dict-item]
    tables.append(("shop", "users"))
    with pytest.raises(ConfigError, match="lower_case_table_names=1"):
        kinds.check_source("mysql", made, None, after_ddl=True)
    kinds.check_source("mysql", compiled(EACH), None, after_ddl=True)  # no folding target
