"""Statements rendered to the SQL text Load sends, in Spark workers.

A rendered :class:`~node.target.mysql.statement.Statement` has ``%s`` placeholders and arguments;
here they become the very text PyMySQL would send for them (its escaping, as on a target
session without ``NO_BACKSLASH_ESCAPES``, which Load's sessions never set), so that only a
few statement texts per table travel back to the node, not rows. A multi-row INSERT is
split where PyMySQL's ``executemany`` would split it (statements of at most about 1 MB).
"""

from __future__ import annotations

import functools
import re
from typing import Any, NamedTuple

from pymysql import converters

from node.charsets import Encoded
from node.target.mysql.keys import sql_value
from node.target.mysql.statement import Statement
from shared.identifiers import template

MAX_STATEMENT = 1_024_000  # as pymysql.cursors.Cursor.max_stmt_length
_ESCAPE = converters._escape_table  # backslash escapes, as converters.escape_string
_ENCODERS = converters.encoders
# the VALUES part of a multi-row INSERT, as pymysql.cursors.RE_INSERT_VALUES finds it
_INSERT = re.compile(r"\s*((?:INSERT|REPLACE)\b.+\bVALUES?\s*)"
                     r"(\(\s*(?:%s|%\(.+\)s)\s*(?:,\s*(?:%s|%\(.+\)s)\s*)*\))"
                     r"(\s*(?:ON DUPLICATE.*)?);?\s*\Z", re.IGNORECASE | re.DOTALL)


class Sql(NamedTuple):
    """One statement as Load executes it."""

    text: str
    rows: int  # the rows it writes (what Load counts)
    matches_one: bool = False  # must touch exactly one row (a keyless table's)
    lenient: tuple[str, ...] = ()  # see statement.Statement
    what: Any = None  # the keys or rows it writes: kept in one-by-one mode, for the log
    data: bytes | None = None  # a LOAD DATA LOCAL INFILE's rows (node.target.mysql.loaddata)
    inline: bool = False  # ``data`` is the statement's end (VALUES tuples), not a file
    continues: bool = False  # goes on writing the row of the one before it (see render)


def literal(value: Any) -> str:
    """``value`` as PyMySQL's Connection.escape writes it (a SET, JSON document first made
    what :func:`~node.target.mysql.render.sql_value` makes of it); :class:`Encoded` text
    with its charset as an introducer (``_sjis X'c2b1'``)."""
    kind = type(value)
    if kind is str:
        return "'" + value.translate(_ESCAPE) + "'"
    if kind is int:
        return str(value)
    if value is None:
        return "NULL"
    if isinstance(value, set | frozenset | dict | list):
        value = sql_value(value)
    if isinstance(value, str):
        return "'" + value.translate(_ESCAPE) + "'"
    if isinstance(value, bytes | bytearray):
        if type(value) is Encoded:  # text of a charset kept as bytes: the server converts
            return f"_{value.charset} X'{value.hex()}'"  # it into the column's
        return f"X'{value.hex()}'"
    return str(converters.escape_item(value, "utf8mb4", _ENCODERS))


def texts(statement: Statement, keep_what: bool = False) -> list[Sql]:
    """The SQL texts of one statement (several for a long multi-row INSERT)."""
    sql, args, many, what, matches_one, lenient = statement[:6]
    continues = len(statement) > 6 and statement[6]  # (a tuple of the six fields before it)
    if args is None:
        return [Sql(sql, len(what), matches_one, lenient, what if keep_what else None,
                    continues=continues)]
    sql = template(sql)  # a % in a name is no placeholder
    if not many:
        text = sql % tuple(literal(arg) for arg in args)
        return [Sql(text, len(what), matches_one, lenient, what if keep_what else None,
                    continues=continues)]
    parts = _parts(sql, len(args[0]) if args else -1)
    if parts is None:  # not an INSERT: one statement a row, as executemany runs it
        return [Sql(sql % tuple(literal(arg) for arg in row), 1, matches_one, lenient,
                    [one] if keep_what else None) for row, one in zip(args, what, strict=False)]
    prefix, values, postfix, plain = parts
    out: list[Sql] = []
    chunk: list[str] = []
    size = len(prefix) + len(postfix)
    first = 0
    for index, row in enumerate(args):
        # strings and integers inline, as literal() writes them: most values are
        one = "(" + ", ".join([
            "'" + arg.translate(_ESCAPE) + "'" if type(arg) is str else
            str(arg) if type(arg) is int else literal(arg) for arg in row]) + ")" if plain \
            else values % tuple(literal(arg) for arg in row)
        if chunk and size + len(one) + 1 > MAX_STATEMENT:
            out.append(_insert(prefix, chunk, postfix, matches_one, lenient,
                               what[first:index] if keep_what else None))
            chunk, size, first = [], len(prefix) + len(postfix), index
        chunk.append(one)
        size += len(one) + 1
    if chunk:
        out.append(_insert(prefix, chunk, postfix, matches_one, lenient,
                           what[first:] if keep_what else None))
    return out


@functools.lru_cache(maxsize=256)
def _parts(sql: str, width: int) -> tuple[str, str, str, bool] | None:
    """A multi-row INSERT template's text before its VALUES tuple, the tuple and the text
    after it, and whether the tuple is ``width`` bare ``%s``; None for another statement
    (remembered: every batch renders the same few templates)."""
    found = _INSERT.match(sql)
    if found is None:
        return None
    values = found.group(2).rstrip()
    plain = values == "(" + ", ".join(["%s"] * width) + ")" if width >= 0 else False
    return found.group(1) % (), values, (found.group(3) or "") % (), plain


def _insert(prefix: str, rows: list[str], postfix: str, matches_one: bool,
            lenient: tuple[str, ...], what: Any) -> Sql:
    return Sql(prefix + ",".join(rows) + postfix, len(rows), matches_one, lenient, what)
