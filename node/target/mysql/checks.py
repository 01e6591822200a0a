"""A target table's CHECK constraints, as far as writing its rows needs them: which columns
a value written a piece at a time (an empty start, then ``CONCAT`` appends; see
:mod:`node.target.mysql.pieces`) could not pass.

MariaDB's ``JSON`` is a ``LONGTEXT`` with a ``CHECK (json_valid(`col`))``: its
``information_schema.COLUMNS.DATA_TYPE`` says ``longtext``, and only the check tells it from
text. A partial document is no valid one, so the check refuses it. Any other check that
names a column may refuse a partial value as well (``CHECK (length(c) > 10)``,
``CHECK (c LIKE '%x')``), and whether it does cannot be told without evaluating it: a
column named in a check is never written a piece at a time. Its value goes whole, in one
statement, or the row stops the pipeline before anything is sent (see
:func:`node.target.mysql.pieces.whole_values`).

MariaDB 10.2+ has ``information_schema.CHECK_CONSTRAINTS`` with ``TABLE_NAME``; MySQL
8.0.16+ has it without (its constraints are named per schema: ``TABLE_CONSTRAINTS`` says
whose); older servers have no checks to read (and enforce none).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pymysql

from node.target.mysql.render import Columns

_MARIADB = ("SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS WHERE "
            "CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s")
_MYSQL = ("SELECT c.CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS c JOIN "
          "information_schema.TABLE_CONSTRAINTS t ON t.CONSTRAINT_SCHEMA = c.CONSTRAINT_SCHEMA "
          "AND t.CONSTRAINT_NAME = c.CONSTRAINT_NAME WHERE t.CONSTRAINT_TYPE = 'CHECK' AND "
          "t.TABLE_SCHEMA = %s AND t.TABLE_NAME = %s")
# a query's error where the server has no such table (before MariaDB 10.2, MySQL 8.0.16:
# no checks to read) or no TABLE_NAME in it (MySQL)
_NO_TABLE = frozenset({1109, 1146})
_NO_COLUMN = 1054
_STRING = re.compile(r"'(?:[^'\\]|\\.|'')*'", re.S)  # a string literal of a clause


def check_clauses(cursor: Any, schema: str, table: str) -> list[str]:
    """The CHECK clauses of a target table (none on a server without them)."""
    for query in (_MARIADB, _MYSQL):
        try:
            cursor.execute(query, (schema, table))
        except pymysql.MySQLError as exc:
            code = exc.args[0] if exc.args else 0
            if code in _NO_TABLE:
                return []
            if code == _NO_COLUMN and query is _MARIADB:
                continue
            raise
        return [str(row[0]) for row in cursor.fetchall()]
    return []


def named(clause: str, column: str) -> bool:
    """Whether a check clause names a column: quoted as the server writes it back
    (```c```), or bare (as typed, on a server that keeps the text)."""
    quoted = "`" + column.replace("`", "``") + "`"
    if quoted.lower() in clause.lower():
        return True
    return re.search(r"(?<![\w$`])" + re.escape(column) + r"(?![\w$`])",
                     _STRING.sub("''", clause), re.IGNORECASE) is not None


def json_checked(clause: str, column: str) -> bool:
    """Whether a check clause is MariaDB's JSON check of a column: ``json_valid(`c`)``."""
    quoted = re.escape("`" + column.replace("`", "``") + "`")
    bare = re.escape(column)
    return re.fullmatch(r"\s*\(?\s*json_valid\s*\(\s*(?:" + quoted + "|" + bare +
                        r")\s*\)\s*\)?\s*", clause, re.IGNORECASE) is not None


def with_checks(columns: Columns, clauses: list[str]) -> Columns:
    """``columns`` with those the clauses name marked ``checked`` (and ``json`` where the
    clause is a JSON check)."""
    if not clauses:
        return columns
    marked = dict(columns)
    for name, column in columns.items():
        found = [clause for clause in clauses if named(clause, name)]
        if found:
            marked[name] = dataclasses.replace(
                column, checked=True,
                json=column.json or any(json_checked(clause, name) for clause in found))
    return marked


def read_checks(cursor: Any, schema: str, table: str, columns: Columns) -> Columns:
    """``columns`` of a target table, those its CHECK constraints name marked."""
    return with_checks(columns, check_clauses(cursor, schema, table))


def with_generated(columns: Columns, expressions: dict[str, str]) -> Columns:
    """``columns`` with those a checked or unique generated column is computed from
    (``expressions``: the generated columns' by name) marked as it is: a part of their value
    makes a part of its (``h AS (MD5(doc)) UNIQUE``: an empty start of ``doc`` meets
    another row's ``MD5('')`` there; ``g AS (LEFT(doc, 1)) CHECK (g = '{')`` refuses it)."""
    marked = dict(columns)
    for generated, expression in expressions.items():
        column = columns.get(generated)
        if column is None or not (column.checked or column.unique):
            continue
        for name in columns:
            if name != generated and named(expression, name):
                marked[name] = dataclasses.replace(
                    marked[name], checked=marked[name].checked or column.checked,
                    unique=marked[name].unique or column.unique)
    return marked
