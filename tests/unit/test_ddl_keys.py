"""node/ddl.py: a statement that gives a table the very key its changes are already merged
by (read after the statement ran: a start, or a DDL's read, behind it) stops the pipeline."""

from __future__ import annotations

import dataclasses

import pytest

from node.changes import ChangeType, RowChange
from node.ddlclauses import added_keys
from node.extract.etl import extract_transform
from shared.errors import ConfigError
from tests.unit.test_ddl import PAIRS
from tests.unit.test_etl import compiled


def run(statement: str, keys: dict, sync: bool = False) -> list:
    c = dataclasses.replace(compiled(*PAIRS, options=f"ddl_sync: {str(sync).lower()}"),
                            table_keys=keys)
    change = RowChange("shop", "", ChangeType.DDL, ddl=statement)
    return [t.ddl for t in extract_transform(c, [(4, change)])]


@pytest.mark.parametrize("sync", [False, True], ids=["sync-off", "sync-on"])
@pytest.mark.parametrize("statement, key", [
    ("ALTER TABLE orders ADD UNIQUE KEY uk (code)", ("code",)),
    ("ALTER TABLE shop.orders ADD CONSTRAINT uk UNIQUE (Code, qty)", ("code", "QTY")),
    ("CREATE UNIQUE INDEX uk ON orders (code)", ("code",)),
    ("ALTER TABLE orders ADD COLUMN id BIGINT AUTO_INCREMENT UNIQUE", ("id",)),
    ("ALTER TABLE orders MODIFY code INT NOT NULL UNIQUE", ("code",)),
])
def test_a_key_added_by_a_statement_behind_the_keys_read_stops(statement: str, key: tuple,
                                                                sync: bool) -> None:
    """The pipeline started behind an ADD UNIQUE of a table with no primary key: the key it
    read at its start was the one the statement adds, and the changes before it were
    merged by it (two rows of one code taken for one, a DELETE of one removing both)."""
    with pytest.raises(ConfigError, match="merged by a key it did not have then") as caught:
        run(statement, {("shop", "orders"): key}, sync)
    message = str(caught.value)
    assert "`shop`.`orders`" in message and "setl snapshot" in message
    assert "setl position set shop/fwd" in message


@pytest.mark.parametrize("statement, keys", [
    # read before the statement: the table had no key then (or another one)
    ("ALTER TABLE orders ADD UNIQUE KEY uk (code)", {}),
    ("ALTER TABLE orders ADD UNIQUE KEY uk (code)", {("shop", "orders"): ("id",)}),
    ("ALTER TABLE orders ADD UNIQUE KEY uk (code, qty)", {("shop", "orders"): ("code",)}),
    # a key put back as it was
    ("ALTER TABLE orders DROP INDEX uk, ADD UNIQUE KEY uk (code)",
     {("shop", "orders"): ("code",)}),
    ("ALTER TABLE orders DROP PRIMARY KEY, ADD PRIMARY KEY (id)",
     {("shop", "orders"): ("id",)}),
    # a primary key: the table maps of the changes logged while the table had one name it
    # (a DROP PRIMARY KEY, then an ADD PRIMARY KEY with no row between, is no sign)
    ("ALTER TABLE orders ADD PRIMARY KEY (id)", {("shop", "orders"): ("id",)}),
    ("ALTER TABLE orders ADD COLUMN id INT AUTO_INCREMENT PRIMARY KEY",
     {("shop", "orders"): ("id",)}),
    ("ALTER TABLE orders ADD INDEX i (code)", {("shop", "orders"): ("code",)}),
    ("ALTER TABLE unpaired ADD UNIQUE (code)", {("shop", "unpaired"): ("code",)}),
])
def test_other_keys_pass(statement: str, keys: dict) -> None:
    assert run(statement, keys) == []


def test_added_keys_reads_the_columns_of_each_form() -> None:
    assert added_keys("ALTER TABLE t ADD u VARCHAR(10) UNIQUE, ADD INDEX (v)") == [("u",)]
    assert added_keys("ALTER TABLE t ADD c VARCHAR(9) COMMENT 'unique (x)'") == []
    assert added_keys("ALTER TABLE t ADD (a INT UNIQUE, b INT), ADD UNIQUE KEY IF NOT EXISTS "
                      "k USING BTREE (`B`(10) DESC, c)") == [("a",), ("b", "c")]
    assert added_keys("ALTER TABLE t CHANGE old u INT UNIQUE KEY") == [("u",)]
    assert added_keys("CREATE INDEX i ON t (u)") == []
