"""Whether a ``MODIFY``/``CHANGE`` of a column rounds the values it holds in place, given the
column's type before it: the table map of the table's last rows before the statement
(Select keeps it, :class:`node.select.binlog.BinlogReader`), where there was one in this run.

In a strict session MariaDB fails a value the new type cannot hold, but rounds without error
(at most a note 1265, checked on MariaDB 10.11): a DECIMAL made of a smaller scale (1.255
kept as 1.3), a DOUBLE made FLOAT, a BIGINT or a DECIMAL made DOUBLE, a DECIMAL or a DOUBLE
made an integer (1.655 kept as 2), fewer fractional seconds, a DATETIME made DATE. The same
type made wider, or given another NULL-ness or default, rounds nothing."""

from __future__ import annotations

from typing import NamedTuple

from node.sqllex import Token

# binlog column types (the table map's), by what they hold
_INTEGERS = {1: 8, 2: 16, 9: 24, 3: 32, 8: 64}  # TINY, SHORT, INT24, LONG, LONGLONG: bits
_DECIMALS, _FLOAT, _DOUBLE = (0, 246), 4, 5
_TEMPORAL = {10: "date", 14: "date", 7: "timestamp", 17: "timestamp", 12: "datetime",
             18: "datetime", 11: "time", 19: "time"}
_NEW_INTEGERS = ("TINYINT", "SMALLINT", "MEDIUMINT", "INT", "INTEGER", "BIGINT", "INT1",
                 "INT2", "INT3", "INT4", "INT8", "MIDDLEINT")
_NEW_DECIMALS = ("DECIMAL", "DEC", "NUMERIC", "FIXED")


class OldType(NamedTuple):
    """A column's type as its table map gave it: ``kind`` (int, decimal, float, double,
    date, datetime, timestamp, time, other), the integer's bits or the DECIMAL's precision
    (``digits``), and the DECIMAL's scale or the fractional seconds (``fraction``)."""

    kind: str
    digits: int = 0
    fraction: int = 0


def old_type(type_code: int, precision: int = 0, decimals: int = 0, fsp: int = 0
             ) -> OldType:
    """A table map column's :class:`OldType`."""
    if type_code in _INTEGERS:
        return OldType("int", _INTEGERS[type_code])
    if type_code in _DECIMALS:
        return OldType("decimal", precision, decimals)
    if type_code in (_FLOAT, _DOUBLE):
        return OldType("float" if type_code == _FLOAT else "double")
    kind = _TEMPORAL.get(type_code)
    return OldType(kind, 0, fsp) if kind else OldType("other")


def rounds_from(definition: list[Token], old: OldType) -> bool:
    """Whether a ``MODIFY``/``CHANGE`` to the column definition ``definition`` (name, type,
    …) may round values of the ``old`` type in place (a text made a number or a time may: it
    says yes); a new type not listed here (text, ENUM, …) rounds nothing (a strict session
    fails what it cannot hold)."""
    if len(definition) < 2:
        return False
    word = definition[1].text.upper()
    numbers = type_numbers(definition[2:])
    if word in _NEW_DECIMALS:
        scale = numbers[1] if len(numbers) > 1 else 0
        if old.kind == "decimal":
            return scale < old.fraction
        return old.kind != "int"  # (an integer too long for it fails; the rest rounds)
    if word in ("FLOAT", "FLOAT4", "DOUBLE", "FLOAT8", "REAL"):
        if len(numbers) > 1:
            return True  # FLOAT(M,D) rounds to D digits
        single = word in ("FLOAT", "FLOAT4") and (not numbers or numbers[0] <= 24)
        if single:
            return not (old.kind == "float" or (old.kind == "int" and old.digits <= 24))
        return not (old.kind in ("float", "double") or (old.kind == "int" and old.digits <= 32))
    if word in _NEW_INTEGERS:
        return old.kind != "int" and not (old.kind == "decimal" and old.fraction == 0)
    if word == "DATE":
        return old.kind != "date"
    if word in ("DATETIME", "TIMESTAMP", "TIME"):
        fsp = numbers[0] if numbers else 0
        if old.kind == word.lower():
            return fsp < old.fraction
        return not (old.kind == "date" and word == "DATETIME")
    return False


def type_numbers(tokens: list[Token]) -> list[int]:
    """The integers of a type's parenthesized arguments (``(10, 3)`` → [10, 3])."""
    if not tokens or tokens[0].text != "(":
        return []
    found = []
    for token in tokens[1:]:
        if token.text == ")":
            break
        if token.text.isdigit():
            found.append(int(token.text))
    return found
