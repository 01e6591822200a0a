"""node/ddl.py: a statement that gives a table the very key its changes are already merged
by (read after the statement ran: a start, or a DDL's read, behind it) stops the pipeline."""

from __future__ import annotations

import dataclasses

import pytest

from node.changes import ChangeType, RowChange
from node.ddlclauses import added_keys
from node.ddlsession import POSITION, position
from node.extract.etl import extract_transform
from shared.errors import ConfigError
from shared.model import BinlogPosition
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


READ_AT = BinlogPosition("mariadb-bin.000003", 4000, "", "1@db:3306")


def logged(statement: str, pos: int, file: str = "mariadb-bin.000003",
           server: str = "1@db:3306") -> RowChange:
    return RowChange("shop", "", ChangeType.DDL, ddl=statement,
                     session=(("sql_mode", 0), (POSITION, (file, pos, server))))


def run_logged(change: RowChange, read_at: BinlogPosition | None = READ_AT) -> list:
    c = dataclasses.replace(compiled(*PAIRS), table_keys={("shop", "orders"): ("code",)},
                            keys_read_at=read_at)
    return [t.ddl for t in extract_transform(c, [(4, change)])]


@pytest.mark.parametrize("statement", [
    "ALTER TABLE orders ADD UNIQUE (code)",  # a duplicate index (MariaDB: a note)
    "CREATE UNIQUE INDEX uk2 ON orders (code)",
    "ALTER TABLE orders ADD UNIQUE KEY IF NOT EXISTS uk (code)",
])
@pytest.mark.parametrize("at", [
    (4001, "mariadb-bin.000003"), (120, "mariadb-bin.000004")], ids=["same-file", "next"])
def test_a_key_the_table_had_when_its_keys_were_read_passes(statement: str, at: tuple
                                                             ) -> None:
    """The keys were read (and showed the key) before the statement was logged: the table
    had the key all along, nothing was merged by a key it lacked; the pipeline goes on."""
    assert run_logged(logged(statement, *at)) == []


@pytest.mark.parametrize("change, read_at", [
    (logged("ALTER TABLE orders ADD UNIQUE (code)", 4000), READ_AT),  # logged before the read
    (logged("ALTER TABLE orders ADD UNIQUE (code)", 3000), READ_AT),
    (logged("ALTER TABLE orders ADD UNIQUE (code)", 9000, server="2@other:3306"), READ_AT),
    (logged("ALTER TABLE orders ADD UNIQUE (code)", 9000, server=""), READ_AT),
    (logged("ALTER TABLE orders ADD UNIQUE (code)", 9000), None),  # the read's end unknown
    (RowChange("shop", "", ChangeType.DDL, ddl="ALTER TABLE orders ADD UNIQUE (code)"),
     READ_AT),  # the statement's position not carried
], ids=["at-the-read", "before", "other-server", "server-unknown", "read-unknown",
        "position-unknown"])
def test_a_key_that_may_be_new_since_the_read_still_stops(change: RowChange,
                                                          read_at: BinlogPosition | None
                                                          ) -> None:
    with pytest.raises(ConfigError, match="merged by a key it did not have then"):
        run_logged(change, read_at)


def test_select_gives_a_ddl_the_position_after_it() -> None:
    """Select's DDL carries where the source's binlog is after it (not run on a target)."""
    from types import SimpleNamespace

    from node.select.binlog import BinlogReader
    from node.select.queries import QueryEvents

    committed: list = []
    reader = SimpleNamespace(
        ddl=False, _last_maps=SimpleNamespace(before=lambda *args, **kwargs: ()),
        _position=lambda state="": BinlogPosition("mariadb-bin.000003", 4321, state, "1@db"),
        _wants=lambda schema, table: True, _wants_schema=lambda schema: True,
        _commit=lambda events, rows, changes, state, data: committed.extend(changes))
    event = SimpleNamespace(query="ALTER TABLE orders ADD UNIQUE (code)", schema=b"shop",
                            alter_phase=0, sql_mode=0)
    QueryEvents._ddl(reader, event, "0-1-9", b"")  # type: ignore[arg-type]
    [change] = committed
    # (with its GTID state: a pause names both)
    assert position(change.session) == BinlogPosition("mariadb-bin.000003", 4321, "0-1-9",
                                                      "1@db")
    assert issubclass(BinlogReader, QueryEvents)


def test_the_keys_read_again_carry_where_the_binlog_ended(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    from node import start

    c = dataclasses.replace(compiled(*PAIRS), keys_read_at=READ_AT)
    later = BinlogPosition("mariadb-bin.000004", 4, "", "1@db:3306")
    monkeypatch.setattr(start, "with_table_keys", lambda compiled, *args: dataclasses.replace(
        compiled, keys_read_at=later))
    start.keys_again(c, None, None)  # type: ignore[arg-type]  # (read: patched above)
    assert c.keys_read_at == later


KEYED_BY_CODE = "{source: s.t, target: s2.t, key_columns: [code]}"


@pytest.mark.parametrize("columns, key, keys", [
    (("id", "v"), ("id",), {}),  # code dropped (ddl_sync off: no DDL check saw it)
    (("id", "code_new", "v"), ("id",), {}),  # renamed
    (("id", "Code", "v"), ("id",), {}),  # another case: rows name it Code
    (("id", "v"), (), {("s", "t"): ("id",)}),  # keyed by a unique key
], ids=["dropped", "renamed", "case", "unique-key"])
def test_a_table_map_without_a_key_column_pauses(columns: tuple, key: tuple, keys: dict
                                                 ) -> None:
    """Its rows were keyed by a column their images lack (a KeyError mid-stream): the table
    map pauses before a row of it is mapped, saying what to do."""
    c = dataclasses.replace(compiled(KEYED_BY_CODE), table_keys=keys)
    problem = c.layout_problem("s", "t", columns, key)
    assert problem is not None and "by key_columns code, and the table has no column code" \
        in problem and "setl apply" in problem


def test_key_columns_a_table_has_or_does_not_use_pass() -> None:
    c = compiled(KEYED_BY_CODE)
    assert c.layout_problem("s", "t", ("id", "code", "v"), ("id",)) is None
    # keyless and no join: its rows are found by their whole image, key_columns unused
    assert c.layout_problem("s", "t", ("id", "v"), ()) is None
