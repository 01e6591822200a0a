"""node/target/mysql/rounding.py: target columns that store another value than their source
column's without an error, judged by the two columns' types."""

from __future__ import annotations

import pytest

from node.target.mysql.render import Column
from node.target.mysql.rounding import SourceColumn, column_problem

TARGET = ("dst", "s", "t")


def source(column_type: str, nullable: bool = False) -> SourceColumn:
    """A source column as information_schema gives it, from its COLUMN_TYPE."""
    kind = column_type.split("(")[0].split()[0]
    numbers = [int(n) for n in column_type.partition("(")[2].partition(")")[0].split(",")
               if n]
    precision, scale = [*numbers, 0, 0][:2] if kind == "decimal" else (0, (numbers or [0])[0])
    if kind in ("int", "bigint", "tinyint", "float", "double"):
        precision, scale = 0, 0
    return SourceColumn(kind, None, nullable, column_type, precision, scale)


def problem(source_type: str, target_type: str, nullable: bool = False,
            target_nullable: bool = True) -> str:
    column = Column(target_type.split("(")[0].split()[0], None, column_type=target_type,
                    nullable=target_nullable)
    return column_problem("pipeline c.p", TARGET, "v", column, "v",
                          source(source_type, nullable))


@pytest.mark.parametrize(("held", "stored"), [
    ("decimal(10,3)", "decimal(10,2)"),  # 1.255 kept as 1.26, a note at most
    ("decimal(10,2)", "int(11)"),  # 1.6 kept as 2
    ("double", "float"),  # to 7 digits
    ("bigint(20)", "double"),  # past 2^53
    ("decimal(10,2)", "double"),
    ("datetime(6)", "datetime(3)"),  # fractional seconds rounded, not even a note
    ("timestamp(3)", "datetime"),
    ("datetime", "date"),
    ("float", "decimal(10,2)"),
    ("float(7,3)", "float(7,2)"), ("double(16,4)", "float(16,4)"), ("float", "float(9,2)"),
])
def test_a_target_type_that_rounds_the_sources_values_is_named(held: str, stored: str) -> None:
    found = problem(held, stored)
    for part in ("pipeline c.p: target table s.t on dst: column v is " + stored,
                 f"rounds values of its source column v ({held})",
                 f"ALTER TABLE s.t MODIFY v {held}", "resume the channel"):
        assert part in found, found


@pytest.mark.parametrize(("held", "stored"), [
    ("decimal(10,2)", "decimal(12,2)"), ("decimal(10,2)", "decimal(10,4)"),
    ("int(11)", "bigint(20)"), ("int(11)", "decimal(12,0)"), ("int(11)", "double"),
    ("float", "double"), ("datetime(3)", "datetime(6)"), ("datetime", "timestamp"),
    ("timestamp(6)", "datetime(6)"), ("date", "datetime"), ("date", "date"),
    ("varchar(10)", "int(11)"),  # a strict session refuses what a text cannot be
    ("varchar(10)", "varchar(5)"),  # refused too ("Data too long")
    ("bigint(20) unsigned", "bigint(20)"),  # out of range: refused
    ("double(30,10)", "double(30,10)"), ("float(7,3)", "float(7,3)"),  # the same type
    ("float(7,2)", "float(9,2)"), ("float(7,2)", "float(7,2) unsigned"),
    ("double(16,4)", "double(20,4)"), ("float(7,2)", "double(9,3)"),
    ("int(11) unsigned zerofill", "int(10) unsigned"),
    ("double(20,4)", "double(18,4)"),  # a value past 14 integer digits is refused
])
def test_a_target_type_that_holds_the_sources_values_or_refuses_them_is_fine(
        held: str, stored: str) -> None:
    assert problem(held, stored) == ""


def test_a_timestamp_not_null_filled_from_a_nullable_column_is_named() -> None:
    """MariaDB stores the time of the write for a NULL written into a TIMESTAMP NOT NULL
    column, in any sql_mode (checked on 10.11)."""
    found = problem("timestamp", "timestamp", nullable=True, target_nullable=False)
    assert "column v is TIMESTAMP NOT NULL, and its source column v admits NULL" in found
    assert "ALTER TABLE s.t MODIFY v timestamp NULL DEFAULT NULL" in found
    assert problem("timestamp", "timestamp", nullable=False, target_nullable=False) == ""
    assert problem("timestamp", "timestamp", nullable=True, target_nullable=True) == ""
    assert problem("datetime", "timestamp", nullable=True, target_nullable=False) != ""
