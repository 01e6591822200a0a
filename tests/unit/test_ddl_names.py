"""A source that folds table names (lower_case_table_names 1) names its tables in lower
case in table maps, but a DDL's text keeps the case it was typed in: its names are matched
lower-cased (``CompiledPipeline.fold_names``, read at start by ``node.start``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from node import start
from node.changes import ChangeType, RowChange
from node.extract.etl import extract_transform
from node.extract.freedoor import DoorStats
from node.snapshot.door import DoorQueue
from shared.model import DataSource
from tests.unit.test_ddl import PAIRS
from tests.unit.test_etl import compiled, pipeline

GATHER = "{source: {namespace: shop, table: 're:log_.*'}, target: {namespace: copy, " \
         "table: '{table}'}}"


def targets(statement: str, fold: bool = True, schema: str = "shop") -> list[tuple[str, ...]]:
    c = dataclasses.replace(compiled(*PAIRS, GATHER, options="ddl_sync: true"),
                            fold_names=fold)
    change = RowChange(schema, "", ChangeType.DDL, ddl=statement)
    return [(t.schema, t.table, t.ddl) for t in extract_transform(c, [(4, change)])]


@pytest.mark.parametrize("statement, expected", [
    ("TRUNCATE TABLE Orders", ("copy", "orders_v2", "TRUNCATE TABLE `copy`.`orders_v2`")),
    ("DROP TABLE SHOP.Orders", ("copy", "orders_v2", "DROP TABLE `copy`.`orders_v2`")),
    ("ALTER TABLE Log_2024 ADD c INT",
     ("copy", "log_2024", "ALTER TABLE `copy`.`log_2024` ADD c INT")),
])
def test_a_ddls_names_are_matched_as_the_source_folds_them(
        statement: str, expected: tuple[str, ...]) -> None:
    assert targets(statement) == [expected]


def test_a_source_that_keeps_case_matches_names_as_typed() -> None:
    assert targets("TRUNCATE TABLE Orders", fold=False) == []


def test_a_ddl_on_a_folded_name_cuts_its_batch_without_ddl_sync() -> None:
    """Select asks whether a DDL names a wanted table (its batch is cut, the tables' keys
    read again after): as the source folds the names."""
    c = dataclasses.replace(compiled(*PAIRS), fold_names=True)
    assert c.wants("Shop", "ORDERS") and c.wants_schema("SHOP")


class Cursor:
    def __init__(self, value: int) -> None:
        self.value = value

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *_: Any) -> None:
        return None

    def execute(self, query: str) -> None:
        assert query == "SELECT @@lower_case_table_names"

    def fetchone(self) -> tuple[int]:
        return (self.value,)


# (2: names are stored, and given in table maps, as created: folding them would lose the
# rows of a pair written as created)
@pytest.mark.parametrize("value, folds", [(0, False), (1, True), (2, False)])
def test_the_start_reads_whether_the_source_folds_names(
        monkeypatch: pytest.MonkeyPatch, value: int, folds: bool) -> None:
    class Conn(Cursor):
        def cursor(self) -> Cursor:
            return Cursor(self.value)

    monkeypatch.setattr(start, "connect", lambda source: Conn(value))
    assert start.folds_names(None) is folds  # type: ignore[arg-type]


def test_a_pair_written_in_capitals_is_refused_on_a_source_that_folds_names() -> None:
    """Its binlog names ``shop.orders``: ``Shop.Orders`` (or ``re:Orders_.*``) would take
    nothing, and the pipeline would run green with an empty target."""
    source = DataSource("src", "h1")
    capitals = pipeline("{source: Shop.Orders, target: copy.orders}",
                        "{source: {namespace: shop, table: 're:Log_\\d+'}, target: copy.log}",
                        "{source: {namespace: shop, table: 're:\\S+_v2'}, target: copy.v2}",
                        "{source: {namespace: shop, table: 're:(?i)Audit'}, target: c.a}",
                        "{source: {namespace: shop, table: 're:[A-Za-z]+_x'}, target: c.x}")
    found = start.cased_pair_problems(capitals, source)
    assert len(found) == 2
    assert "pair src:Shop.Orders → dst:copy.orders: source src stores its table and " \
        "database names in lower case (lower_case_table_names=1), so its binlog never " \
        "names 'Shop' and the pair would replicate nothing; write it 'shop'" in found[0]
    assert "never names 're:Log_\\\\d+'" in found[1]
    assert start.cased_pair_problems(pipeline(*PAIRS), source) == []


def test_a_free_door_request_is_named_as_the_source_stores_the_table() -> None:
    """``Shop.Orders`` in FULL_NAME on a source that folds names is shop.orders: the
    window's check meets the stream's changes of it, and its pair takes it."""
    c = dataclasses.replace(compiled(*PAIRS), fold_names=True)
    door = DoorQueue("shop.fwd", DataSource("src", "h1"), c, None, DoorStats())
    change = RowChange("retl", "retl_buffer", ChangeType.INSERT, ("ID",), None,
                       {"ID": 7, "FULL_NAME": "Shop.Orders", "TYPE": "I", "PK_DATA": "[7]"})
    request = door._checked(change)
    assert (request.schema, request.table) == ("shop", "orders")
