"""A source that folds table names (lower_case_table_names 1) names its tables in lower
case in table maps, but a DDL's text keeps the case it was typed in: its names are matched
lower-cased (``CompiledPipeline.fold_names``, read at start by ``node.start``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from node import start
from node.changes import ChangeType, RowChange
from node.ddl import concerns
from node.extract.etl import extract_transform
from node.extract.freedoor import DoorStats
from node.snapshot.door import DoorQueue
from shared.errors import ConfigError
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
@pytest.mark.parametrize("value", [0, 1, 2])
def test_the_start_reads_whether_the_source_folds_names(
        monkeypatch: pytest.MonkeyPatch, value: int) -> None:
    class Conn(Cursor):
        def cursor(self) -> Cursor:
            return Cursor(self.value)

    monkeypatch.setattr(start, "connect", lambda source: Conn(value))
    assert start.name_case(None) == value  # type: ignore[arg-type]


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


# lower_case_table_names 2 (macOS): names stored, and in table maps, as created; compared
# without case, so a statement may type them in any case
CREATED = {("shop", ""): ("shop", ""), ("shop", "orders"): ("shop", "Orders"),
           ("shop", "log_1"): ("shop", "Log_1")}
BLIND = ("{source: shop.Orders, target: copy.orders}",
         "{source: {namespace: shop, table: 're:Log_.*'}, target: {namespace: copy, "
         "table: '{table}'}}")


def blind(options: str = "") -> Any:
    return dataclasses.replace(compiled(*BLIND, options=options), blind_names=dict(CREATED))


@pytest.mark.parametrize("statement", ["TRUNCATE TABLE ORDERS", "DROP TABLE SHOP.orders",
                                       "RENAME TABLE orders TO o2", "ALTER TABLE LOG_1 ADD c INT"])
def test_a_ddl_typed_in_another_case_concerns_its_table_where_the_source_ignores_case(
        statement: str) -> None:
    """Select passes it on (else the pause a TRUNCATE makes never fires, and the target
    keeps the rows the source emptied)."""
    assert concerns(statement, "shop", 0, blind().wants, blind().wants_schema)
    plain = compiled(*BLIND)
    assert not concerns(statement, "shop", 0, plain.wants, plain.wants_schema)


def test_a_truncate_typed_in_another_case_pauses_without_ddl_sync() -> None:
    change = RowChange("SHOP", "", ChangeType.DDL, ddl="TRUNCATE TABLE ORDERS")
    with pytest.raises(ConfigError, match="TRUNCATE"):
        list(extract_transform(blind(), [(4, change)]))


@pytest.mark.parametrize("statement, expected", [
    ("TRUNCATE TABLE ORDERS", ("copy", "orders", "TRUNCATE TABLE `copy`.`orders`")),
    ("ALTER TABLE shop.LOG_1 ADD c INT",  # the target named by the table as created
     ("copy", "Log_1", "ALTER TABLE `copy`.`Log_1` ADD c INT")),
])
def test_a_ddl_typed_in_another_case_is_replayed_on_its_tables_target(
        statement: str, expected: tuple[str, ...]) -> None:
    change = RowChange("shop", "", ChangeType.DDL, ddl=statement)
    assert [(t.schema, t.table, t.ddl) for t in extract_transform(
        blind("ddl_sync: true"), [(4, change)])] == [expected]


def test_the_start_reads_the_names_a_source_that_ignores_case_stores(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class Names(Cursor):
        def execute(self, query: str, args: Any = None) -> None:
            assert "information_schema.TABLES" in query

        def fetchall(self) -> list[tuple[str, str]]:
            return [("Shop", "Orders"), ("Shop", "ΤΑΣ")]

    class Conn(Cursor):
        def cursor(self) -> Cursor:
            return Names(0)

    monkeypatch.setattr(start, "connect", lambda source: Conn(0))
    assert start.stored_names(None) == {  # type: ignore[arg-type]
        ("shop", ""): ("Shop", ""), ("shop", "orders"): ("Shop", "Orders"),
        ("shop", "τασ"): ("Shop", "ΤΑΣ")}


def test_the_names_are_read_again_after_a_ddl(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table created or renamed since the start is found in its other case too."""
    c = blind()
    monkeypatch.setattr(start, "with_table_keys", lambda compiled, *args: dataclasses.replace(
        compiled, blind_names={**CREATED, ("shop", "log_2"): ("shop", "Log_2")}))
    assert not c.wants("shop", "LOG_2")
    start.keys_again(c, None, None)  # type: ignore[arg-type]  # (read: patched above)
    assert c.wants("shop", "LOG_2") and c.stored("shop", "LOG_2") == ("shop", "Log_2")


def test_a_folded_name_is_lowered_letter_by_letter_as_the_server_does() -> None:
    """MariaDB lowers Σ to σ wherever it stands; Python's str.lower() ends a word in ς."""
    c = dataclasses.replace(compiled("{source: shop.τασ, target: copy.t}"), fold_names=True)
    assert c.wants("shop", "ΤΑΣ") and c.stored("SHOP", "ÇA") == ("shop", "ça")


def test_a_folded_name_whose_lower_case_is_not_sure_is_refused() -> None:
    c = dataclasses.replace(compiled(*PAIRS), fold_names=True)
    with pytest.raises(ConfigError, match=r"'İ' \(U\+0130\).*cannot tell which table"):
        c.wants("shop", "İNDEX")


def test_a_table_not_known_yet_is_named_in_its_database_as_created() -> None:
    """A CREATE TABLE shop.orders2 in a database created `Shop`: the table was looked for in
    'shop', which no pair names, and the pipeline passed it by."""
    c = dataclasses.replace(compiled("{source: {namespace: Shop, table: 're:orders.*'}, "
                                     "target: {namespace: copy, table: '{table}'}}"),
                            blind_names={("shop", ""): ("Shop", ""),
                                         ("shop", "orders"): ("Shop", "orders")})
    assert c.stored("SHOP", "orders2") == ("Shop", "orders2")
    assert c.wants("shop", "orders2")
