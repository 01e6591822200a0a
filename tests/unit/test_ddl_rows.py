"""node/ddl.py: ALTER TABLE clauses that remove or bring in a replicated table's rows without
row events pause (ddl_sync off, or on where a replay would get it wrong), a partition swap
pauses either way, and a column added with values made where it runs pauses a replay."""

from __future__ import annotations

import dataclasses

import pytest

from node.changes import ChangeType, RowChange
from node.ddl import concerns, parse, tables_named
from node.ddlclauses import rewriting_clause, unrepeatable_column
from node.ddlparse import ROW_CLAUSES
from node.ddltypes import OldType, old_type
from node.extract.etl import extract_transform
from shared.errors import ConfigError
from tests.unit.test_ddl import PAIRS, SHARDS, ddl_targets
from tests.unit.test_ddl_pauses import ddl
from tests.unit.test_etl import compiled

# --- ddl_sync off: clauses that remove or bring in rows without row events ----------------

@pytest.mark.parametrize("statement, clause", [
    ("ALTER TABLE orders TRUNCATE PARTITION p2024", "TRUNCATE PARTITION"),
    ("ALTER TABLE shop.orders TRUNCATE PARTITION p1, p2", "TRUNCATE PARTITION"),
    ("ALTER TABLE orders DROP PARTITION IF EXISTS p2019", "DROP PARTITION"),
    ("alter table `orders` /*!50100 drop partition p1 */", "DROP PARTITION"),
    ("ALTER TABLE orders ADD c INT, DROP PARTITION p1", "DROP PARTITION"),
    ("ALTER TABLE orders DISCARD TABLESPACE", "DISCARD TABLESPACE"),
    ("ALTER TABLE orders IMPORT TABLESPACE", "IMPORT TABLESPACE"),
    ("ALTER TABLE orders IMPORT PARTITION p1 TABLESPACE", "IMPORT TABLESPACE"),
    ("ALTER IGNORE TABLE orders ADD UNIQUE KEY uk (code)", "ALTER IGNORE … UNIQUE"),
    ("ALTER IGNORE TABLE orders ADD CONSTRAINT pk PRIMARY KEY (id)", "ALTER IGNORE … UNIQUE"),
    ("ALTER ONLINE IGNORE TABLE orders MODIFY code INT UNIQUE", "ALTER IGNORE … UNIQUE"),
    ("ALTER IGNORE TABLE orders DROP PRIMARY KEY, ADD PRIMARY KEY (code)",
     "ALTER IGNORE … UNIQUE"),
    ("ALTER TABLE orders ENGINE=BLACKHOLE", "ENGINE=BLACKHOLE"),
    ("ALTER TABLE orders ADD c INT, engine = 'blackhole'", "ENGINE=BLACKHOLE"),
])
def test_without_ddl_sync_an_alter_that_removes_rows_without_row_events_pauses(
        statement: str, clause: str) -> None:
    """They passed unseen: the target kept the rows the source had dropped (or never got
    the ones it imported)."""
    assert clause in ROW_CLAUSES
    with pytest.raises(ConfigError, match="with ddl_sync off it is not replayed") as caught:
        ddl_targets(statement, sync=False)
    message = str(caught.value)
    assert f"({clause})" in message and "`shop`.`orders`" in message
    assert "setl position set shop/fwd" in message and "turn ddl_sync on" in message


@pytest.mark.parametrize("statement", [
    "ALTER TABLE orders CONVERT TO CHARACTER SET utf8mb4", "ALTER TABLE orders DROP COLUMN c",
    "ALTER TABLE orders ADD UNIQUE (code)", "ALTER TABLE orders ENGINE=InnoDB",
    "ALTER TABLE orders ADD PARTITION (PARTITION p9 VALUES LESS THAN (9))",
    "ALTER TABLE orders COMMENT 'TRUNCATE PARTITION p1, ENGINE=BLACKHOLE'",
    "ALTER TABLE orders ADD COLUMN engine VARCHAR(9) DEFAULT 'BLACKHOLE'",
    "ALTER TABLE orders DROP INDEX `partition`", "ALTER IGNORE TABLE orders ADD c INT",
    "ALTER IGNORE TABLE orders DROP PRIMARY KEY, DROP INDEX uk",
    "ALTER TABLE unpaired TRUNCATE PARTITION p1", "ALTER TABLE unpaired ENGINE=BLACKHOLE"])
def test_without_ddl_sync_other_alters_pass(statement: str) -> None:
    assert ddl_targets(statement, sync=False) == []


def test_with_ddl_sync_a_row_clause_is_replayed() -> None:
    assert [t[3] for t in ddl_targets("ALTER TABLE orders TRUNCATE PARTITION p1")] == [
        "ALTER TABLE `copy`.`orders_v2` TRUNCATE PARTITION p1"]


# --- EXCHANGE / CONVERT: both tables read, never replayed ----------------------------------

SWAPS = [
    ("ALTER TABLE orders EXCHANGE PARTITION p1 WITH TABLE unpaired", "unpaired"),
    ("ALTER TABLE unpaired EXCHANGE PARTITION p1 WITH TABLE orders WITHOUT VALIDATION",
     "orders"),
    ("ALTER TABLE unpaired CONVERT PARTITION p1 TO TABLE shop.orders", "orders"),
    ("ALTER TABLE unpaired CONVERT TABLE `orders` TO PARTITION p2 VALUES LESS THAN (10)",
     "orders"),
]


@pytest.mark.parametrize("statement, other", SWAPS)
def test_the_other_table_of_a_partition_swap_is_read(statement: str, other: str) -> None:
    """Only the first name was read: ``ALTER TABLE unpaired EXCHANGE … WITH TABLE orders``
    did not concern a replicated table at all."""
    parsed = parse(statement, "shop")
    assert parsed is not None and [name.pair for name in parsed.swapped] == [("shop", other)]
    assert ("shop", other) in tables_named(statement, "shop")
    c = compiled(*PAIRS)
    assert concerns(statement, "shop", 0, c.wants, c.wants_schema)


@pytest.mark.parametrize("sync", [True, False])
@pytest.mark.parametrize("statement, other", SWAPS)
def test_a_partition_swap_of_a_replicated_table_pauses(statement: str, other: str,
                                                       sync: bool) -> None:
    """With ddl_sync the second name went to the target unmapped, and a retried EXCHANGE
    swaps the rows back."""
    with pytest.raises(ConfigError, match="setl does not replay it, ddl_sync or not") as caught:
        ddl_targets(statement, sync=sync)
    message = str(caught.value)
    assert "`shop`.`orders`" in message and "setl position set shop/fwd" in message


@pytest.mark.parametrize("sync", [True, False])
def test_a_partition_swap_of_tables_no_pair_reads_passes(sync: bool) -> None:
    assert ddl_targets("ALTER TABLE unpaired EXCHANGE PARTITION p WITH TABLE elsewhere",
                       sync=sync) == []


# --- ddl_sync on, a gathered target: row clauses remove the other tables' rows ------------

@pytest.mark.parametrize("statement", [
    "ALTER TABLE orders_2 TRUNCATE PARTITION p1", "ALTER TABLE orders_2 DROP PARTITION p1",
    "ALTER IGNORE TABLE orders_2 ADD UNIQUE (code)", "ALTER TABLE orders_2 ENGINE=BLACKHOLE"])
def test_a_row_clause_on_a_table_a_target_gathers_stops(statement: str) -> None:
    """Replayed on the shared table, it removed the other shards' rows."""
    c = compiled(*SHARDS, options="ddl_sync: true")
    with pytest.raises(ConfigError, match="also takes rows of other source tables"):
        list(extract_transform(c, [(4, ddl(statement))]))
    assert [t.ddl for t in extract_transform(c, [(4, ddl("ALTER TABLE orders_2 ADD c INT"))])] \
        == ["ALTER TABLE `copy`.`orders_all` ADD c INT"]


# --- ddl_sync on: a column whose values are made where the statement runs -------------------

@pytest.mark.parametrize("statement, column, how", [
    ("ALTER TABLE orders ADD u CHAR(36) DEFAULT UUID()", "u", "UUID()"),
    ("ALTER TABLE orders ADD (a INT, `u` CHAR(36) DEFAULT (uuid()))", "u", "UUID()"),
    ("ALTER TABLE orders ADD r DOUBLE DEFAULT (RAND() * 10)", "r", "RAND()"),
    ("ALTER TABLE orders ADD c INT, ADD s BIGINT DEFAULT uuid_short()", "s", "UUID_SHORT()"),
    ("ALTER TABLE orders ADD g RAW(16) DEFAULT SYS_GUID ()", "g", "SYS_GUID()"),
    ("ALTER TABLE orders ADD d DATETIME DEFAULT (SYSDATE())", "d", "SYSDATE()"),
    # a sequence, the session, the server: not in the allow-list (node.ddldefaults)
    ("ALTER TABLE orders ADD n BIGINT DEFAULT NEXTVAL(shop.sq)", "n", "NEXTVAL()"),
    ("ALTER TABLE orders ADD n BIGINT DEFAULT (NEXT VALUE FOR sq)", "n", "NEXT VALUE FOR"),
    ("ALTER TABLE orders ADD n BIGINT DEFAULT (previous value for sq)", "n",
     "PREVIOUS VALUE FOR"),
    ("ALTER TABLE orders ADD n BIGINT DEFAULT (LASTVAL(sq) + 1)", "n", "LASTVAL()"),
    ("ALTER TABLE orders ADD w VARCHAR(99) DEFAULT USER()", "w", "USER()"),
    ("ALTER TABLE orders ADD w VARCHAR(99) DEFAULT CURRENT_USER", "w", "CURRENT_USER"),
    ("ALTER TABLE orders ADD w VARCHAR(99) DEFAULT (current_role())", "w", "CURRENT_ROLE"),
    ("ALTER TABLE orders ADD c BIGINT DEFAULT (CONNECTION_ID())", "c", "CONNECTION_ID()"),
    ("ALTER TABLE orders ADD b VARBINARY(8) DEFAULT (RANDOM_BYTES(8))", "b",
     "RANDOM_BYTES()"),
    ("ALTER TABLE orders ADD d VARCHAR(64) DEFAULT (DATABASE())", "d", "DATABASE()"),
    ("ALTER TABLE orders ADD v VARCHAR(64) DEFAULT (CONCAT('v', VERSION()))", "v",
     "VERSION()"),
    ("ALTER TABLE orders ADD h VARCHAR(64) DEFAULT (@@hostname)", "h", "a variable"),
    ("ALTER TABLE orders ADD f VARCHAR(9) DEFAULT (DATE_FORMAT(NOW(), '%W'))", "f",
     "DATE_FORMAT()"),  # lc_time_names
    ("ALTER TABLE orders ADD f INT DEFAULT (shop.f(1))", "f", "F()"),  # not known: pauses
])
def test_with_ddl_sync_a_column_added_with_unrepeatable_values_pauses(
        statement: str, column: str, how: str) -> None:
    """Replayed, it gave the target's rows other ids or uuids than the source's."""
    assert unrepeatable_column(statement) == (column, how)
    with pytest.raises(ConfigError, match=f"adds column {column} with ") as caught:
        ddl_targets(statement)
    assert "setl snapshot" in str(caught.value)
    assert ddl_targets(statement, sync=False) == []


@pytest.mark.parametrize("statement", [
    "ALTER TABLE orders ADD t TIMESTAMP DEFAULT CURRENT_TIMESTAMP",
    "ALTER TABLE orders ADD t DATETIME(6) DEFAULT NOW(6)",
    "ALTER TABLE orders ADD c INT, AUTO_INCREMENT = 100",
    # numbered in clustered-index order, alike on both sides (tests/integration/test_ddl.py)
    "ALTER TABLE orders ADD COLUMN n BIGINT AUTO_INCREMENT UNIQUE",
    "ALTER TABLE orders ADD c VARCHAR(9) DEFAULT 'UUID()' COMMENT 'rand()'",
    "ALTER TABLE orders ADD COLUMN uuid CHAR(36), ADD INDEX (uuid)",
    "ALTER TABLE orders MODIFY c INT DEFAULT 5",
    "ALTER TABLE orders MODIFY n BIGINT DEFAULT NEXTVAL(sq)",  # fills no row
    "ALTER TABLE orders ADD d DATETIME DEFAULT (CURRENT_TIMESTAMP + INTERVAL 1 DAY)",
    "ALTER TABLE orders ADD t DATETIME DEFAULT UTC_TIMESTAMP()",
    "ALTER TABLE orders ADD n INT NOT NULL DEFAULT -1",
    "ALTER TABLE orders ADD p DECIMAL(10,2) DEFAULT (CAST(qty AS DECIMAL(10,2)) * 2)",
    "ALTER TABLE orders ADD s CHAR(1) DEFAULT (IF(qty IN (1, 2), 'y', 'n'))",
    "ALTER TABLE orders ADD k VARCHAR(20) DEFAULT (CONCAT('k', LPAD(id, 5, '0')))",
    "ALTER TABLE orders ADD j JSON DEFAULT (JSON_OBJECT('a', 1))"])
def test_with_ddl_sync_other_added_columns_are_replayed(statement: str) -> None:
    assert unrepeatable_column(statement) is None
    [(_, _, _, replayed)] = ddl_targets(statement)
    assert "`copy`.`orders_v2`" in replayed


def test_an_unrepeatable_column_of_a_table_no_pair_reads_passes() -> None:
    assert ddl_targets("ALTER TABLE unpaired ADD u CHAR(36) DEFAULT UUID()") == []


# --- ddl_sync on: IMPORT TABLESPACE brings in the source's file, which the target has not -

@pytest.mark.parametrize("statement", [
    "ALTER TABLE orders IMPORT TABLESPACE",
    "ALTER TABLE shop.orders IMPORT PARTITION p1 TABLESPACE",
    "alter table `orders` /*!50100 import partition all tablespace */"])
def test_with_ddl_sync_an_import_tablespace_pauses(statement: str) -> None:
    """It was replayed: the target has no file of the source's rows to import (it failed
    with a bare server error, or imported a stale file of its own), and the rows it brought
    in on the source have no row events."""
    with pytest.raises(ConfigError, match=r"\(IMPORT TABLESPACE\)") as caught:
        ddl_targets(statement)
    message = str(caught.value)
    assert "`shop`.`orders`" in message and "setl snapshot" in message
    assert "setl position set shop/fwd" in message


def test_with_ddl_sync_a_discard_tablespace_and_an_unpaired_import_are_replayed() -> None:
    """DISCARD removes the rows on both sides alike; an import into a table no pair reads
    is nothing to this pipeline."""
    assert [t[3] for t in ddl_targets("ALTER TABLE orders DISCARD TABLESPACE")] == [
        "ALTER TABLE `copy`.`orders_v2` DISCARD TABLESPACE"]
    assert ddl_targets("ALTER TABLE unpaired IMPORT TABLESPACE") == []


# --- ddl_sync off: an ALTER that may have rewritten values in place (a lax sql_mode) ------

LAX, STRICT = 0, 1 << 21  # sql_mode '' and STRICT_TRANS_TABLES as the query event has them


def lax_targets(statement: str, mode: int | None, follows_columns: bool = False) -> list:
    c = dataclasses.replace(compiled(*PAIRS), follows_columns=follows_columns)
    session = () if mode is None else (("sql_mode", mode),)
    change = RowChange("shop", "", ChangeType.DDL, ddl=statement, session=session)
    return [t.ddl for t in extract_transform(c, [(4, change)])]


@pytest.mark.parametrize("follows_columns", [False, True], ids=["database", "lake"])
@pytest.mark.parametrize("statement, clause", [
    ("ALTER TABLE orders MODIFY note VARCHAR(5)", "MODIFY note VARCHAR(5)"),
    ("ALTER TABLE shop.orders ADD x INT, CHANGE COLUMN qty qty TINYINT NOT NULL",
     "CHANGE COLUMN qty qty TINYINT NOT NULL"),
    ("ALTER TABLE orders CONVERT TO CHARACTER SET latin1", "CONVERT TO CHARACTER SET latin1"),
    ("alter table orders convert to charset = 'utf8mb3'", "convert to charset = 'utf8mb3'"),
])
def test_without_ddl_sync_an_alter_that_may_cut_values_in_a_lax_session_pauses(
        statement: str, clause: str, follows_columns: bool) -> None:
    """In a session without a strict sql_mode the source cut its values in place ('abcdefgh'
    kept as 'abcde', 300 as 127, 'é€😀' as 'é€?'), with no row event; the ALTER passed
    unseen and the target kept the old values."""
    with pytest.raises(ConfigError, match="may have rewritten the values") as caught:
        lax_targets(statement, LAX, follows_columns)
    message = str(caught.value)
    assert f"({clause!r}" in message and "`shop`.`orders`" in message
    assert "setl position set shop/fwd" in message and "turn ddl_sync on" in message


@pytest.mark.parametrize("statement, mode", [
    ("ALTER TABLE orders MODIFY note VARCHAR(5)", STRICT),  # a value cut fails the ALTER
    ("ALTER TABLE orders MODIFY note VARCHAR(5)", STRICT | (1 << 22)),
    ("ALTER TABLE orders MODIFY note VARCHAR(5)", None),  # not known: as before
    ("ALTER TABLE orders CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", LAX),
    ("ALTER TABLE orders ALTER COLUMN note SET DEFAULT 'x'", LAX),
    ("ALTER TABLE orders RENAME COLUMN note TO remark", LAX),
    ("ALTER TABLE orders DEFAULT CHARACTER SET latin1", LAX),
    ("ALTER TABLE unpaired MODIFY note VARCHAR(5)", LAX),
])
def test_without_ddl_sync_other_alters_in_either_session_pass(statement: str,
                                                              mode: int | None) -> None:
    assert lax_targets(statement, mode) == []


def test_an_alter_ignore_that_may_cut_values_pauses_in_a_strict_session_too() -> None:
    with pytest.raises(ConfigError, match="may have rewritten the values"):
        lax_targets("ALTER IGNORE TABLE orders MODIFY qty TINYINT", STRICT)
    assert rewriting_clause("ALTER TABLE orders MODIFY qty TINYINT", STRICT,
                            {"qty": OldType("int", 32)}) is None


@pytest.mark.parametrize("statement, clause", [
    ("ALTER TABLE orders MODIFY price DECIMAL(10,1)", "MODIFY price DECIMAL(10,1)"),
    ("ALTER TABLE orders MODIFY COLUMN price numeric(10) NOT NULL",
     "MODIFY COLUMN price numeric(10) NOT NULL"),
    ("ALTER TABLE orders CHANGE at at DATETIME NOT NULL", "CHANGE at at DATETIME NOT NULL"),
    ("ALTER TABLE orders ADD x INT, MODIFY took TIME(3)", "MODIFY took TIME(3)"),
    ("ALTER TABLE orders MODIFY seen TIMESTAMP NULL", "MODIFY seen TIMESTAMP NULL"),
    ("ALTER TABLE orders MODIFY day DATE", "MODIFY day DATE"),
    ("ALTER TABLE orders MODIFY ratio FLOAT", "MODIFY ratio FLOAT"),
    ("ALTER TABLE orders CHANGE COLUMN ratio share DOUBLE(10,2)",
     "CHANGE COLUMN ratio share DOUBLE(10,2)"),
    ("ALTER TABLE orders MODIFY ratio REAL", "MODIFY ratio REAL"),
    # the type before not known (no table map since the node started): any number or time
    ("ALTER TABLE orders MODIFY price INT", "MODIFY price INT"),  # 1.655 kept as 2
    ("ALTER TABLE orders MODIFY ratio BIGINT UNSIGNED", "MODIFY ratio BIGINT UNSIGNED"),
    ("ALTER TABLE orders CHANGE ok ok BOOLEAN", "CHANGE ok ok BOOLEAN"),
    ("ALTER TABLE orders MODIFY at DATETIME(6)", "MODIFY at DATETIME(6)"),  # from DECIMAL(20,8)
    ("ALTER TABLE orders MODIFY seen TIMESTAMP(6) NULL", "MODIFY seen TIMESTAMP(6) NULL"),
])
def test_without_ddl_sync_a_type_that_rounds_values_pauses_in_a_strict_session_too(
        statement: str, clause: str) -> None:
    """A strict sql_mode does not fail these: MariaDB rounds the values in place (1.255 made
    DECIMAL(10,1) is 1.3, a DATETIME(6)'s fractional seconds are dropped, a DOUBLE made FLOAT
    loses digits) with at most a note, and no row event; the target kept the old values."""
    with pytest.raises(ConfigError, match="may have rewritten the values") as caught:
        lax_targets(statement, STRICT)
    message = str(caught.value)
    assert f"({clause!r}" in message and "DECIMAL, FLOAT, DOUBLE" in message
    assert "setl position set shop/fwd" in message and "turn ddl_sync on" in message


@pytest.mark.parametrize("statement", [
    "ALTER TABLE orders MODIFY note VARCHAR(5)",  # a cut fails the ALTER
    "ALTER TABLE orders MODIFY `decimal` TEXT",  # the column's name is not its type
    "ALTER TABLE orders ALTER COLUMN price SET DEFAULT 1.5",
    "ALTER TABLE orders ADD price DECIMAL(10,1)",  # a new column: no old values
    "ALTER TABLE orders CONVERT TO CHARACTER SET latin1",  # a character it lacks fails it
])
def test_without_ddl_sync_other_alters_in_a_strict_session_pass(statement: str) -> None:
    assert rewriting_clause(statement, STRICT) is None
    assert lax_targets(statement, STRICT) == []


def test_with_ddl_sync_an_alter_that_may_cut_values_is_replayed_under_its_sql_mode() -> None:
    c = compiled(*PAIRS, options="ddl_sync: true")
    change = RowChange("shop", "", ChangeType.DDL, ddl="ALTER TABLE orders MODIFY note "
                       "VARCHAR(5)", session=(("sql_mode", LAX),))
    [replayed] = extract_transform(c, [(4, change)])
    assert replayed.ddl == "ALTER TABLE `copy`.`orders_v2` MODIFY note VARCHAR(5)"
    assert ("sql_mode", LAX) in replayed.session


# the types before, by name, as Select attaches them from the table's last table map
BEFORE = (("price", *old_type(246, 6, 2)), ("qty", *old_type(3)), ("ratio", *old_type(5)),
          ("at", *old_type(18, fsp=3)), ("day", *old_type(10)), ("big", *old_type(8)),
          ("note", *old_type(15)))


@pytest.mark.parametrize("statement", [
    "ALTER TABLE orders MODIFY price DECIMAL(9,3)",  # wider: the lake test's change
    "ALTER TABLE orders MODIFY price DECIMAL(6,2) NOT NULL",  # the NULL-ness only
    "ALTER TABLE orders MODIFY qty DECIMAL(12,0)",  # an integer holds no fraction
    "ALTER TABLE orders MODIFY qty DOUBLE",  # 32 bits: exact in a double
    "ALTER TABLE orders MODIFY at DATETIME(3) NULL",
    "ALTER TABLE orders MODIFY at DATETIME(6)",
    "ALTER TABLE orders MODIFY day DATETIME",
    "ALTER TABLE orders CHANGE price cost DECIMAL(10,4)",  # renamed, by its old name
    "ALTER TABLE orders MODIFY ratio DOUBLE NOT NULL",
])
def test_a_modify_that_rounds_nothing_by_the_types_before_passes(statement: str) -> None:
    """With the column's type before it known (a table map read before the statement), a
    widening or a NULL-ness change does not pause, as it did on the new type alone."""
    change = RowChange("shop", "", ChangeType.DDL, ddl=statement,
                       session=(("sql_mode", STRICT), ("columns", BEFORE)))
    assert list(extract_transform(compiled(*PAIRS), [(4, change)])) == []


@pytest.mark.parametrize("statement", [
    "ALTER TABLE orders MODIFY price DECIMAL(9,1)",  # a smaller scale
    "ALTER TABLE orders MODIFY price INT",  # DECIMAL(6,2) made an integer: 1.655 → 2
    "ALTER TABLE orders MODIFY ratio BIGINT",  # a DOUBLE made an integer
    "ALTER TABLE orders MODIFY ratio FLOAT",
    "ALTER TABLE orders MODIFY big DOUBLE",  # 64 bits: not exact in a double
    "ALTER TABLE orders MODIFY at DATETIME",  # fewer fractional seconds
    "ALTER TABLE orders MODIFY at DATE",
    "ALTER TABLE orders MODIFY at TIMESTAMP(6)",  # another kind: its instant by the zone
    "ALTER TABLE orders MODIFY note DECIMAL(10,2)",  # text made a number
    "ALTER TABLE orders CHANGE price cost DECIMAL(6,1)",
])
def test_a_modify_that_rounds_by_the_types_before_pauses(statement: str) -> None:
    change = RowChange("shop", "", ChangeType.DDL, ddl=statement,
                       session=(("sql_mode", STRICT), ("columns", BEFORE)))
    with pytest.raises(ConfigError, match="may have rewritten the values"):
        list(extract_transform(compiled(*PAIRS), [(4, change)]))
