"""Target columns that would store another value than the source's without an error.

A strict session refuses a value a column cannot hold, but rounds one it can hold only
approximately, with at most a note (checked on MariaDB 10.11): a DECIMAL of a smaller scale
keeps 1.255 as 1.26, a DATETIME of fewer fractional digits rounds them, a FLOAT keeps a
DOUBLE's value to 7 digits, an integer column keeps 1.6 as 2. And MariaDB stores the time
of the write for a NULL written into a ``TIMESTAMP NOT NULL`` column, whatever the sql_mode.
A target table made by hand (or altered apart from its source) can hold such a column; its
rows would differ from the source's, silently. :func:`column_problem` says so for one target
column and the source column it is filled from, judged by their types alone (the check runs
once per source and target table, not per row: :mod:`node.extract.keycheck`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from node import sqllex
from node.ddltypes import OldType, rounds_from

_INTEGER_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}
_TIMES = ("datetime", "timestamp")


class SourceColumn(NamedTuple):
    """A source column as ``information_schema.COLUMNS`` gives it."""

    data_type: str
    collation: str | None = None
    nullable: bool = False
    column_type: str = ""
    precision: int = 0  # a DECIMAL's digits
    scale: int = 0  # a DECIMAL's scale, or a time's fractional digits


def _held(column: SourceColumn) -> OldType | None:
    """What the source column's values are, as a type change is judged by; None for a type
    whose values no column type here rounds (strings, binary, ENUM, …: a strict session
    refuses what it cannot hold)."""
    kind = column.data_type.lower()
    if kind in _INTEGER_BITS:
        return OldType("int", _INTEGER_BITS[kind])
    if kind == "decimal":
        return OldType("decimal", column.precision, column.scale)
    if kind in ("float", "double", "date", "datetime", "timestamp", "time"):
        return OldType(kind, 0, column.scale)
    return None


def _plain(column_type: str) -> str:
    """A type without what leaves its values alone (UNSIGNED refuses the negative ones,
    ZEROFILL pads what is shown)."""
    return " ".join(word for word in column_type.lower().split()
                    if word not in ("unsigned", "zerofill", "signed"))


def _digits(definition: list[Any]) -> list[int]:
    return [int(token.text) for token in definition[2:] if token.text.isdigit()]


def _rounds(source: SourceColumn, target_type: str) -> bool:
    held = _held(source)
    if held is None or not target_type or _plain(target_type) == _plain(source.column_type):
        return False  # (the same type holds the same values: FLOAT(M,D) for FLOAT(M,D))
    definition = sqllex.code(f"c {target_type}")
    word = definition[1].text.lower() if len(definition) > 1 else ""
    if held.kind in ("float", "double") and word in ("float", "double") and \
            "(" in source.column_type:  # FLOAT(M,D): as many decimals or more (a value
        theirs, mine = _digits(sqllex.code(f"c {source.column_type}")), _digits(definition)
        if len(theirs) == 2 and len(mine) == 2 and (held.kind == "float" or word == "double"):
            return mine[1] < theirs[1]  # with more integer digits than M - D is refused)
    if held.kind in (*_TIMES, "date") and word in _TIMES:  # an instant either way: only
        digits = _digits(definition)  # the fraction
        return held.kind != "date" and (digits[0] if digits else 0) < held.fraction
    return rounds_from(definition, held)


def column_problem(where: str, target: tuple[str, str, str], name: str, column: Any,
                   source_name: str, source: SourceColumn) -> str:
    """Why the target column ``name`` (a :class:`~node.target.mysql.render.Column`) would
    store another value than its source column's ("" when it would not)."""
    datasource, schema, table = target
    if column.generated:
        return ""
    place = f"{where}: target table {schema}.{table} on {datasource}: column {name}"
    if column.data_type == "timestamp" and not column.nullable and source.nullable:
        return (f"{place} is TIMESTAMP NOT NULL, and its source column {source_name} admits "
                "NULL: MariaDB stores the time of the write for a NULL there, without an "
                "error (MySQL refuses the row). Let it hold NULL (ALTER TABLE "
                f"{schema}.{table} MODIFY {name} {column.column_type or 'timestamp'} NULL "
                "DEFAULT NULL), then resume the channel")
    if _rounds(source, column.column_type):
        return (f"{place} is {column.column_type}, which rounds values of its source column "
                f"{source_name} ({source.column_type or source.data_type}) as it stores them, "
                "without an error (a strict session only notes it): the target would hold "
                "other values than the source. Give it the source's type (ALTER TABLE "
                f"{schema}.{table} MODIFY {name} {source.column_type or source.data_type}), "
                "then resume the channel")
    return ""
