"""node/target/mysql/loaddata.py and localdata.py: which tables' upserts go as LOAD
DATA … REPLACE, the bytes of their rows, and a server that asks the node for a file."""

from __future__ import annotations

import datetime
import decimal

import pymysql
import pytest

from node.target.mysql import loaddata, localdata
from node.target.mysql.render import Column

COLUMNS = {"id": Column("int", None), "name": Column("varchar", "utf8mb4"),
           "l1": Column("varchar", "latin1"), "blob": Column("blob", None),
           "dt": Column("datetime", None), "price": Column("decimal", None),
           "full": Column("varchar", "utf8mb4", generated=True)}


def test_a_table_goes_as_replace_only_with_types_and_charsets_written_exactly() -> None:
    assert loaddata.plan(COLUMNS, triggers=False) == [
        ("id", None), ("name", "utf-8"), ("l1", "setl_mariadb_latin1"), ("blob", None),
        ("dt", None), ("price", None)]  # the generated column is the target's to compute
    assert loaddata.plan(COLUMNS, triggers=True) is None
    assert loaddata.plan({**COLUMNS, "b": Column("bit", None)}, False) is None
    assert loaddata.plan({**COLUMNS, "g": Column("varchar", "gbk")}, False) is None
    assert loaddata.plan({**COLUMNS, "p": Column("point", None)}, False) is None
    assert loaddata.plan({}, False) is None  # columns unknown: INSERTs


def test_rows_are_the_bytes_the_target_stores_with_escapes_and_nulls() -> None:
    plan = loaddata.plan(COLUMNS, False)
    assert plan is not None
    rows = [{"id": 1, "name": "a\tb\nc\\d\0e\rf", "l1": "é€", "blob": b"\x00\xff\t\\",
             "dt": datetime.datetime(2024, 1, 2, 3, 4, 5, 60), "price": decimal.Decimal("1E+2")},
            {"id": -2, "name": "\\N", "l1": None, "blob": b"", "dt": "0000-00-00 00:00:00",
             "price": decimal.Decimal("-0.50")}]
    [sql] = loaddata.statements("s", "t", rows, plan)
    assert sql.rows == 2 and sql.text.startswith(
        "LOAD DATA LOCAL INFILE 'setl-rows' REPLACE INTO TABLE `s`.`t` CHARACTER SET binary")
    assert sql.text.endswith("(`id`, `name`, `l1`, `blob`, `dt`, `price`)")
    assert sql.data == (
        b"1\ta\\tb\\nc\\\\d\\0e\\rf\t\xe9\x80\t\\0\xff\\t\\\\\t2024-01-02 03:04:05.000060\t100\n"
        b"-2\t\\\\N\t\\N\t\t0000-00-00 00:00:00\t-0.50\n")


def test_the_year_0000_goes_as_four_zeros() -> None:
    """LOAD DATA reads its fields as text, and the text '0' in a YEAR column is 2000 (an
    INSERT's number 0 is 0000): the year 0000 goes as '0000', the others as their digits."""
    columns = {"id": Column("int", None), "y": Column("year", None)}
    plan = loaddata.plan(columns, triggers=False)
    rows = [{"id": 1, "y": 0}, {"id": 2, "y": 1999}, {"id": 0, "y": None}]
    [sql] = loaddata.statements("s", "t", rows, plan)
    assert sql.data == b"1\t0000\n2\t1999\n0\t\\N\n"


def test_rows_that_cannot_go_as_replace_go_as_inserts() -> None:
    plan = loaddata.plan(COLUMNS, False)
    assert plan is not None
    row = {"id": 1, "name": "x", "l1": "y", "blob": b"", "dt": None, "price": None}
    assert loaddata.statements("s", "t", [row], plan) is not None
    assert loaddata.statements("s", "t", [{**row, "l1": "中"}], plan) is None  # not latin1
    partial = {k: v for k, v in row.items() if k != "price"}  # a column group's update
    assert loaddata.statements("s", "t", [row, partial], plan) is None
    assert loaddata.statements("s", "t", [{**row, "name": ""}], plan, ["name"]) is None
    assert loaddata.statements("s", "t", [{**row, "dt": {"json": 1}}], plan) is None


def test_long_runs_are_cut_into_statements_of_bounded_size(monkeypatch) -> None:
    monkeypatch.setattr(loaddata, "CHUNK", 100)
    plan = [("id", None), ("v", "utf-8")]
    sqls = loaddata.statements("s", "t", [{"id": n, "v": "x" * 30} for n in range(10)], plan)
    assert sqls is not None and len(sqls) == 4  # 33-byte lines: three fit in 100 bytes
    assert sum(sql.rows for sql in sqls) == 10
    assert all(len(sql.data or b"") <= 100 for sql in sqls)


class Conn:
    max_allowed_packet = 16 << 20

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def write_packet(self, data: bytes) -> None:
        self.sent.append(data)


def test_the_node_sends_only_the_rows_of_its_own_statement() -> None:
    conn = Conn()
    with pytest.raises(pymysql.err.OperationalError, match="setl sends no file"):
        localdata._send(b"/etc/passwd", conn)  # a server asking for a file of the node
    with localdata.serving("setl-rows", b"1\tx\n"):
        with pytest.raises(pymysql.err.OperationalError, match="/etc/passwd"):
            localdata._send("/etc/passwd", conn)
        localdata._send(b"setl-rows", conn)
    assert conn.sent == [b"1\tx\n"]
    with pytest.raises(pymysql.err.OperationalError):
        localdata._send("setl-rows", conn)  # no statement of ours waits for it any more
    localdata.install()
    assert pymysql.connections._send_local_file is localdata._send


@pytest.mark.parametrize("special, escaped", [
    ("", b""), ("tab\there", b"tab\\there"), ("back\\slash", b"back\\\\slash"),
    ("nul\0", b"nul\\0"), ("cr\r", b"cr\\r"), ("nl\n", b"nl\\n")])
def test_columns_made_in_one_pass_are_the_fields_made_one_by_one(special: str,
                                                                 escaped: bytes) -> None:
    """Integer and clean text columns are made a column at a time; a column holding one
    value to escape is made field by field. Both give the same bytes."""
    plan = [("id", None), ("k", None), ("c", "utf-8"), ("l1", loaddata.CODECS["latin1"])]
    rows = [{"id": n, "k": None if n % 3 == 0 else -n * 7, "c": None if n % 4 == 0 else
             f"ü{n}" + (special if n == 5 else ""), "l1": "é" * (n % 3)} for n in range(1, 9)]
    [sql] = loaddata.statements("s", "t", rows, plan)
    assert sql.rows == 8
    assert sql.data == b"".join(
        b"\t".join(loaddata._field(row[name], codec) for name, codec in plan) + b"\n"
        for row in rows)
    assert b"\t\xc3\xbc5" + escaped + b"\t" in sql.data
