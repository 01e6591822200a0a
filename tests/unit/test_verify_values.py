"""How verify reads and hashes values, without a server: what Transform makes and what the
target stores compare equal where the target would store them alike, and only there."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from node.verify.values import Column, canonical, decoded, row_hash, select_list, sql_hash


@pytest.mark.parametrize("column_type, data_type, made, stored", [
    ("int(11)", "int", 7, 7), ("int(11)", "int", "7", 7), ("int(11)", "int", 7.0, 7),
    ("int(11)", "int", 7.5, 8), ("tinyint(1)", "tinyint", True, 1),
    ("decimal(10,2)", "decimal", Decimal("1.5"), Decimal("1.50")),
    ("decimal(10,2)", "decimal", 1.555, Decimal("1.56")),
    ("decimal(12,0) unsigned", "decimal", 12, Decimal("12")),
    ("float", "float", 0.1, 0.10000000149011612),  # a single, read as its double
    ("double", "double", 7, 7.0),
    ("timestamp(6)", "timestamp", "0000-00-00 00:00:00", "0000-00-00 00:00:00.000000"),
    ("datetime(3)", "datetime", datetime.datetime(2024, 1, 2, 3, 4, 5, 120000),
     datetime.datetime(2024, 1, 2, 3, 4, 5, 120000)),
    ("varchar(9)", "varchar", 7, "7"), ("varbinary(9)", "varbinary", "ab", b"ab"),
    ("bit(5)", "bit", 5, b"\x05"), ("time(1)", "time", datetime.timedelta(hours=-1),
                                    datetime.timedelta(seconds=-3600)),
])
def test_equal_where_the_target_stores_them_alike(column_type: str, data_type: str,
                                                  made: object, stored: object) -> None:
    kind = Column("c", data_type, column_type).kind
    assert canonical(made, kind) == canonical(stored, kind)


@pytest.mark.parametrize("column_type, data_type, one, other", [
    ("int(11)", "int", 7, 8), ("decimal(10,3)", "decimal", Decimal("1.555"), Decimal("1.556")),
    ("float", "float", 0.1, 0.2), ("varchar(9)", "varchar", "a", "a "),
    ("varchar(9)", "varchar", "", None), ("int(11)", "int", 0, None),
    ("datetime(6)", "datetime", "0001-00-00 00:00:00.5", "0001-00-00 00:00:00"),
    ("blob", "blob", b"\x00", b""),
])
def test_different_values_stay_different(column_type: str, data_type: str, one: object,
                                         other: object) -> None:
    kind = Column("c", data_type, column_type).kind
    assert canonical(one, kind) != canonical(other, kind)


def test_a_row_hash_is_over_the_columns_named_by_name() -> None:
    kinds = {"id": "int", "name": "text"}
    row = {"id": 1, "name": "a", "ignored": "x"}
    assert row_hash(row, ("id", "name"), kinds) == row_hash({"name": "a", "id": "1"},
                                                            ("id", "name"), kinds)
    assert row_hash(row, ("id", "name"), kinds) != row_hash(row, ("id",), kinds)
    # a value cannot pass for two: lengths are part of what is hashed
    assert row_hash({"a": "x", "b": "yz"}, ("a", "b"), {}) != \
        row_hash({"a": "xy", "b": "z"}, ("a", "b"), {})


def test_what_the_databases_are_asked() -> None:
    columns = [Column("id", "int", "int(11)"), Column("f", "float", "float"),
               Column("b", "bit", "bit(3)"), Column("odd`name", "varchar", "varchar(3)"),
               Column("s", "varchar", "varchar(3)", "sjis")]
    assert select_list(columns) == ("`id`, CAST(`f` AS DOUBLE) AS `f`, `b` + 0 AS `b`, "
                                    "`odd``name`, CAST(`s` AS BINARY) AS `s`")
    joined = "CONCAT_WS('\x1f', `id`, `odd``name`, CONCAT(ISNULL(`odd``name`)))"
    names, nullable, kinds = ["id", "odd`name"], [False, True], ["int", "text"]
    assert sql_hash(names, nullable, function="md5", kinds=kinds) == \
        f"CAST(CONV(LEFT(MD5({joined}), 16), 16, 10) AS UNSIGNED)"
    assert sql_hash(names, nullable, kinds=kinds) == \
        f"((CRC32({joined}) * 2654435761) ^ (CRC32C({joined}) << 32))"
    assert sql_hash(names, nullable, wide=False, kinds=kinds) == \
        f"(CRC32({joined}) * 2654435761)"
    assert sql_hash(["a"], [False]) == \
        "((CRC32(CONCAT_WS('\x1f', `a`)) * 2654435761) ^ " \
        "(CRC32C(CONCAT_WS('\x1f', `a`)) << 32))"
    # a FLOAT as its double; the lengths of the binary values but the last after the rest
    assert sql_hash(["f", "s", "t", "u", "n"], [False] * 5, False,
                    kinds=["single", "text", "binary", "binary", "int"]) == \
        "(CRC32(CONCAT_WS('\x1f', CAST(`f` AS DOUBLE), `s`, `t`, `u`, `n`, " \
        "LENGTH(`t`))) * 2654435761)"


def test_rows_read_are_mended_into_the_binlog_decoders_form() -> None:
    """As the snapshot's reads (node.extract.reads.mend): a virtual column computed from a
    SELECT's own value (padded, '.000000', decoded text) was not the stream's."""
    columns = [Column("b", "binary", "binary(4)"), Column("t", "timestamp", "timestamp(6)"),
               Column("s", "varchar", "varchar(3)", "sjis")]
    rows = [(b"ab\0\0", "0000-00-00 00:00:00.000000", b"\x81\x5f"), (b"\0\0\0\0", None, b"")]
    assert decoded(columns, rows) == [(b"ab", "0000-00-00 00:00:00", b"\x81\x5f"),
                                      ("", None, "")]
