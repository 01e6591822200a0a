"""The effect of rendered statements on an in-memory table: a target as MySQL would leave
it, for the keyed statements Load writes of merged tables (multi-row DELETE, INSERT … ON
DUPLICATE KEY UPDATE, UPDATE … SET c = NULL of a cleared part, UPDATE … WHERE key =)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from node.changes import TargetChange
from node.merge import merge
from node.target.mysql.render import statements
from node.target.mysql.statement import Statement

Table = dict[tuple[Any, ...], dict[str, Any]]  # key → row (a column never written: absent)
KEYS = ("id",)  # the modelled tables' key

_NAME = r"`([^`]+)`"
_INSERT = re.compile(r"INSERT INTO \S+ \((.*?)\) VALUES \(.*?\) ON DUPLICATE KEY UPDATE (.*)$")
_DELETE = re.compile(r"DELETE FROM \S+ WHERE \((.*?)\) IN ")
_CLEAR = re.compile(r"UPDATE \S+ SET (.*?) WHERE \((.*?)\) IN ")
_UPDATE = re.compile(r"UPDATE \S+ SET (.*?) WHERE \((.*?)\) = \(")


def apply(table: Table, found: Iterable[Statement]) -> None:
    """Each statement's effect on ``table``, in order."""
    for statement in found:
        sql, args = statement.sql, statement.args
        if (match := _INSERT.match(sql)) is not None:
            columns = re.findall(_NAME, match.group(1))
            sets = re.findall(rf"{_NAME} = (VALUES\()?", match.group(2))
            for values in args:
                row = dict(zip(columns, values, strict=True))
                key = tuple(row[k] for k in KEYS)
                if key in table:
                    table[key].update({name: row[name] for name, by_value in sets
                                       if by_value})
                else:
                    table[key] = row
        elif (match := _DELETE.match(sql)) is not None:
            width = len(re.findall(_NAME, match.group(1)))
            for at in range(0, len(args), width):
                table.pop(tuple(args[at:at + width]), None)
        elif (match := _CLEAR.match(sql)) is not None and "= NULL" in match.group(1):
            cleared = re.findall(_NAME, match.group(1))
            width = len(re.findall(_NAME, match.group(2)))
            for at in range(0, len(args), width):
                row = table.get(tuple(args[at:at + width]))
                if row is not None:
                    row.update(dict.fromkeys(cleared))
        elif (match := _UPDATE.match(sql)) is not None:
            names = re.findall(_NAME, match.group(1))
            row = table.get(tuple(args[len(names):]))
            if row is not None:
                row.update(zip(names, args[:len(names)], strict=True))
        else:
            raise AssertionError(f"not modelled: {sql}")




def loaded(table: Table, changes: list[TargetChange],
           gathered: frozenset[tuple[str, str, str]] = frozenset()) -> Table:
    """``table`` after one batch of ``changes``, merged and rendered as Load writes them."""
    for writes in merge(changes, (), gathered):
        apply(table, statements(writes, 100))
    return table
