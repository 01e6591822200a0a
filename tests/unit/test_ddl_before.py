"""A MODIFY/CHANGE not replayed (ddl_sync off) is judged by the column's type before it:
its last table map's, else the type an earlier ALTER of this run set, else its target
column's (:mod:`node.ddlset`, :class:`node.select.lastmaps.LastMaps`); only where none is
known does any number or time type pause. The pause says where the statement ends, the
table and the column. Added-column defaults setl knows to repeat (FROM_UNIXTIME, geometry
made of literals) and an inline REFERENCES are replayed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from node.changes import ChangeType, RowChange
from node.ddlclauses import unrepeatable_column
from node.ddlsession import POSITION
from node.ddlset import ZONED, column_type, set_types, target_types, zone_bound_clause
from node.ddltypes import OldType
from node.extract.etl import extract_transform
from node.select.lastmaps import LastMaps
from shared.errors import ConfigError, LoadError
from tests.unit.test_ddl import PAIRS
from tests.unit.test_etl import compiled

STRICT = 1 << 21  # STRICT_TRANS_TABLES
# the target's orders_v2, as information_schema.COLUMNS gives its COLUMN_TYPE
TARGET = {"n": "int(11)", "price": "decimal(10,3)", "at": "datetime(6)", "ratio": "float",
          "big": "bigint(20) unsigned", "note": "varchar(10)"}
ENDS = (POSITION, ("mariadb-bin.000003", 4321, "1@db", "0-1-9"))


def judged(maps: LastMaps, statement: str, target: bool = True) -> list:
    """What Extract makes of a DDL not replayed, with the types Select attaches to it."""
    before = maps.before(statement, "shop", STRICT, target=target)
    change = RowChange("shop", "", ChangeType.DDL, ddl=statement, session=(
        ("sql_mode", STRICT), ("columns", before), ENDS))
    return list(extract_transform(compiled(*PAIRS), [(4, change)]))


def restarted() -> LastMaps:
    """Select right after a restart: no table map of orders read; its target's columns."""
    return LastMaps(lambda schema, table: {
        name: column_type(kind) for name, kind in TARGET.items()
        if column_type(kind).kind not in ZONED} if table == "orders" else {})


@pytest.mark.parametrize("statement", [
    "ALTER TABLE orders MODIFY n BIGINT",  # a plain widening: the false stop
    "ALTER TABLE orders MODIFY n INT NOT NULL",
    "ALTER TABLE orders MODIFY price DECIMAL(12,3)",
    "ALTER TABLE orders CHANGE price cost DECIMAL(10,4)",
    "ALTER TABLE orders MODIFY ratio DOUBLE",
    "ALTER TABLE orders MODIFY n DECIMAL(12,0)",
])
def test_after_a_restart_a_modify_that_rounds_nothing_of_the_target_column_passes(
        statement: str) -> None:
    """No table map since the start: the new type alone paused every number or time type.
    With ddl_sync off the target's column holds the values, so a type that holds all of
    its values rounds none of the source's either."""
    assert judged(restarted(), statement) == []
    with pytest.raises(ConfigError, match="type before it is not known"):
        judged(LastMaps(), statement)  # no target's column to go by: as before


@pytest.mark.parametrize("statement", [
    "ALTER TABLE orders MODIFY price INT",  # DECIMAL(10,3) to INT: 1.655 kept as 2
    "ALTER TABLE orders MODIFY price DECIMAL(10,1)",
    "ALTER TABLE orders MODIFY at DATETIME",  # DATETIME(6) to DATETIME
    "ALTER TABLE orders MODIFY ratio DECIMAL(10,2)",  # FLOAT to DECIMAL
    "ALTER TABLE orders MODIFY big DOUBLE",  # 64 bits are not exact in a double
    "ALTER TABLE orders MODIFY note INT",  # a text made a number
    "ALTER TABLE orders MODIFY gone BIGINT",  # a column the target lacks: not known
    "ALTER TABLE orders MODIFY at DATETIME(6) NULL",  # a DATETIME target: not known
])
def test_after_a_restart_a_modify_that_rounds_the_target_column_still_pauses(
        statement: str) -> None:
    with pytest.raises(ConfigError, match="may have rewritten the values") as caught:
        judged(restarted(), statement)
    message = str(caught.value)
    column = statement.split()[4]
    assert f"column `{column}` of `shop`.`orders`" in message, message
    assert "the statement ends at binlog mariadb-bin.000003:4321 gtid=0-1-9" in message
    assert "setl position set shop/fwd --file mariadb-bin.000003 --pos 4321" in message
    assert ("not known" in message) == (column in ("gone", "at"))


def test_the_target_is_asked_only_without_ddl_sync_and_for_a_column_not_known() -> None:
    asked: list[tuple[str, str]] = []
    maps = LastMaps(lambda schema, table: asked.append((schema, table)) or {})
    maps.before("ALTER TABLE orders MODIFY n BIGINT", "shop", STRICT, target=False)
    maps.before("ALTER TABLE orders ADD x INT", "shop", STRICT, target=True)
    maps.before("ALTER TABLE orders MODIFY x BIGINT", "shop", STRICT, target=True)  # set
    maps.before("ALTER TABLE orders MODIFY n INT", "shop", STRICT, target=True)  # set too
    assert asked == []
    maps.before("ALTER TABLE orders MODIFY m BIGINT", "shop", STRICT, target=True)
    assert asked == [("shop", "orders")]


def layout(**types: tuple[int, int, int, int]) -> Any:
    """A table map's layout: (type code, precision, decimals, fsp) by column."""
    return SimpleNamespace(columns=[SimpleNamespace(name=name, type=t, precision=p,
                                                    decimals=d, fsp=f)
                                    for name, (t, p, d, f) in types.items()])


def test_a_second_modify_with_no_row_between_is_judged_by_the_type_the_first_set() -> None:
    """The first MODIFY made the column unknown until the next table map: a second one with
    no row event between paused on any number or time type."""
    maps = LastMaps()  # (no target's column to go by)
    maps.seen("shop", "orders", layout(price=(246, 6, 2, 0), n=(3, 0, 0, 0)))
    assert judged(maps, "ALTER TABLE orders MODIFY price DECIMAL(8,2)") == []
    assert judged(maps, "ALTER TABLE orders MODIFY price DECIMAL(8,2) NOT NULL") == []
    assert judged(maps, "ALTER TABLE orders CHANGE n m BIGINT, ADD d DECIMAL(10,2)") == []
    assert judged(maps, "ALTER TABLE orders MODIFY m BIGINT NOT NULL, "
                        "MODIFY d DECIMAL(12,2)") == []
    with pytest.raises(ConfigError, match="`price`"):  # a real rounding still pauses
        judged(maps, "ALTER TABLE orders MODIFY price DECIMAL(8,1)")
    with pytest.raises(ConfigError, match="`d`"):
        judged(maps, "ALTER TABLE orders MODIFY d INT")


@pytest.mark.parametrize("between", [
    "ALTER TABLE orders DROP COLUMN price",
    "ALTER TABLE orders RENAME COLUMN price TO cost",
    "ALTER TABLE orders CHANGE price cost DECIMAL(8,2)",
    "ALTER TABLE orders RENAME TO orders_old",
    "ALTER TABLE orders RENAME orders_old",
    "RENAME TABLE orders TO orders_old, orders_new TO orders",
    "DROP TABLE orders",
    "CREATE OR REPLACE TABLE orders (price DECIMAL(8,2))",
])
def test_a_drop_a_rename_or_another_statement_forgets_the_type_set(between: str) -> None:
    maps = LastMaps()
    maps.seen("shop", "orders", layout(price=(246, 6, 2, 0)))
    assert judged(maps, "ALTER TABLE orders MODIFY price DECIMAL(8,2)") == []
    maps.before(between, "shop", STRICT)
    with pytest.raises(ConfigError, match="type before it is not known"):
        judged(maps, "ALTER TABLE orders MODIFY price DECIMAL(9,2)")


def test_a_two_phase_alters_start_leaves_the_columns_it_names_unknown() -> None:
    maps = LastMaps()
    maps.seen("shop", "orders", layout(price=(246, 6, 2, 0)))
    maps.before("ALTER TABLE orders MODIFY price DECIMAL(8,2)", "shop", STRICT, settled=False)
    with pytest.raises(ConfigError, match="type before it is not known"):
        judged(maps, "ALTER TABLE orders MODIFY price DECIMAL(9,2)")


def test_the_types_an_alter_sets() -> None:
    assert set_types("ALTER TABLE t MODIFY n BIGINT UNSIGNED, ADD COLUMN (x FLOAT(30), "
                     "y TIMESTAMP(3)), CHANGE p q DECIMAL(9,3), DROP COLUMN z") == {
        "n": OldType("int", 64), "x": OldType("double"), "y": OldType("timestamp", 0, 3),
        "p": None, "q": OldType("decimal", 9, 3), "column": None, "z": None}
    assert set_types("ALTER TABLE t ADD INDEX i (y)") == {}
    assert set_types("ALTER TABLE t ADD COLUMN IF NOT EXISTS x INT, ADD y INT") == {
        "x": None, "y": OldType("int", 32)}  # (x may have been there, a DECIMAL)
    assert set_types("ALTER TABLE t RENAME TO u") is None
    assert set_types("RENAME TABLE t TO u") is None


@pytest.mark.parametrize("text, kind", [
    ("int(11)", OldType("int", 32)), ("int(10) unsigned", OldType("int", 32)),
    ("tinyint(1)", OldType("int", 8)), ("bigint(20)", OldType("int", 64)),
    ("mediumint(9)", OldType("int", 24)), ("decimal(10,3)", OldType("decimal", 10, 3)),
    ("decimal(12,0) unsigned", OldType("decimal", 12, 0)), ("float", OldType("float")),
    ("float(10,2)", OldType("float")), ("double", OldType("double")),
    ("date", OldType("date")), ("datetime(6)", OldType("datetime", 0, 6)),
    ("timestamp", OldType("timestamp", 0, 0)), ("time(3)", OldType("time", 0, 3)),
    ("varchar(10)", OldType("other")), ("bit(1)", OldType("other")),
    ("year(4)", OldType("other")), ("enum('a','b')", OldType("other")),
])
def test_a_target_columns_type_is_read_as_a_table_map_gives_it(text: str, kind: OldType
                                                                ) -> None:
    assert column_type(text) == kind


class Facts:
    """TargetFacts' part the reading uses."""

    def __init__(self, columns: dict[str, str] | None) -> None:
        self.columns, self.dropped = columns, []

    def drop(self, target: tuple[str, str, str]) -> None:
        self.dropped.append(target)

    def of(self, target: tuple[str, str, str]) -> Any:
        if self.columns is None:
            raise LoadError("target: cannot read the columns")
        return SimpleNamespace(columns={name: SimpleNamespace(column_type=kind)
                                        for name, kind in self.columns.items()})


def test_the_target_columns_are_read_afresh_where_the_pair_writes_them_as_they_are() -> None:
    facts = Facts({"Price": "decimal(10,3)", "at": "datetime(6)", "ts": "timestamp"})
    assert target_types(compiled(*PAIRS), facts, "shop", "orders") == {
        "price": OldType("decimal", 10, 3)}  # (a DATETIME or TIMESTAMP: not known)
    assert facts.dropped == [("dst", "copy", "orders_v2")]  # (altered by hand since)
    assert target_types(compiled(*PAIRS), facts, "shop", "unpaired") == {}
    assert target_types(compiled(*PAIRS), Facts(None), "shop", "orders") == {}  # no answer
    renamed = ("{source: shop.orders, target: copy.o, "
               "column_pairs: [{source: price, target: cost}]}")
    excluded = "{source: shop.orders, target: copy.o, columns: {exclude: [note]}}"
    for pair in (renamed, excluded):
        assert target_types(compiled(pair), facts, "shop", "orders") == {}


@pytest.mark.parametrize("statement", [
    "ALTER TABLE orders ADD at DATETIME DEFAULT (FROM_UNIXTIME(0))",
    "ALTER TABLE orders ADD at DATETIME(6) DEFAULT (FROM_UNIXTIME(1700000000.5))",
    "ALTER TABLE orders ADD p POINT DEFAULT (POINT(1, 2))",
    "ALTER TABLE orders ADD g GEOMETRY DEFAULT (ST_GeomFromText('POINT(1 2)', 4326))",
    "ALTER TABLE orders ADD l LINESTRING DEFAULT (LINESTRING(POINT(0, 0), POINT(1, 1)))",
    "ALTER TABLE orders ADD u INT REFERENCES uuid (id)",  # a table's name, not a call
    "ALTER TABLE orders ADD u INT DEFAULT 7 REFERENCES nextval (id) ON DELETE SET DEFAULT",
])
def test_an_added_column_setl_knows_to_repeat_is_replayed(statement: str) -> None:
    assert unrepeatable_column(statement) is None


@pytest.mark.parametrize("statement, how", [
    ("ALTER TABLE orders ADD at DATETIME DEFAULT (FROM_UNIXTIME(RAND()))", "RAND()"),
    ("ALTER TABLE orders ADD p POINT DEFAULT (POINT(RAND(), 2))", "RAND()"),
    ("ALTER TABLE orders ADD u CHAR(36) DEFAULT (UUID()) REFERENCES t (id)", "UUID()"),
    ("ALTER TABLE orders ADD u INT AS (RAND() * 9) REFERENCES t (id)", "RAND()"),
])
def test_an_unrepeatable_default_beside_them_still_pauses(statement: str, how: str) -> None:
    assert unrepeatable_column(statement) == (statement.split()[4], how)


def test_an_inline_references_set_default_is_not_a_timestamps_literal_default() -> None:
    assert zone_bound_clause("ALTER TABLE orders ADD ts TIMESTAMP NULL REFERENCES t (id) "
                             "ON DELETE SET DEFAULT ON UPDATE CASCADE") is None
    assert zone_bound_clause("ALTER TABLE orders ADD ts TIMESTAMP NULL DEFAULT "
                             "'2024-01-01 00:00:00' REFERENCES t (id)") is not None
