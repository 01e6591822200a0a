"""The target's current rows of a two-way batch's keys, and whether each holds a change's
before image.

A two-way load reads the rows it is about to write (:func:`current_rows`, locked until the
load transaction ends) with their values as the binlog gives them, and compares each with a
change's before image (:func:`same_row`, :func:`missing_columns`) in one comparable form
(:func:`plain_key`): the conflict check of :mod:`node.target.mysql.twoway`.
"""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from typing import Any

from pymysql.constants import FIELD_TYPE

from node.changes import Row
from node.charsets import Encoded
from node.target.mysql.render import Columns
from shared import keysql
from shared.datatypes import read_as_bytes
from shared.identifiers import qualified, quote

Key = tuple[Any, ...]


def plain_key(key: Key) -> Key:
    """A key as the binlog's and a SELECT's values of it compare."""
    return tuple(_plain(v) for v in key)


def current_rows(cursor: Any, schema: str, table: str, keys: tuple[str, ...],
                 wanted: list[Key], columns: Columns | None = None) -> dict[Key, Row]:
    """The target's rows for the keys, locked until the load transaction ends, with values
    as the binlog gives them: a FLOAT as the single-precision value it holds (a SELECT
    prints six digits: 1234.57 for 1234.567), a BIT as its number (a SELECT gives bytes),
    text of a charset kept as its bytes as :class:`~node.charsets.Encoded` (a SELECT gives
    sjis as text, never equal to the before image's bytes) — else every row holding one
    looked changed on the target, and the second pipeline left out all of their updates.
    ``columns``: the table's (read as ``*`` without them); each key's text goes converted
    into its column's charset (:mod:`shared.keysql`: MariaDB's IN list of several keys
    found no row of a latin1 'é', nor of sjis text), in its column's collation."""
    columns = columns or {}
    kept = {name: column.charset for name, column in columns.items()
            if column.charset and read_as_bytes(column.data_type, column.charset)}
    fixed = [name for name, column in columns.items() if column.data_type == "binary"]

    def chosen(name: str) -> str:
        return f"CAST({quote(name)} AS BINARY) AS {quote(name)}" if name in kept \
            else quote(name)
    condition, values = keysql.keys_in(
        keys, wanted, [columns[k].charset if k in columns else None for k in keys],
        [columns[k].collation if k in columns else None for k in keys])
    where = f"FROM {qualified(schema, table)} WHERE {condition}"
    cursor.execute(f"SELECT {', '.join(map(chosen, columns)) or '*'} {where} FOR UPDATE",
                   values)
    names = [column[0] for column in cursor.description]
    floats = [c[0] for c in cursor.description if c[1] == FIELD_TYPE.FLOAT]
    bits = [c[0] for c in cursor.description if c[1] == FIELD_TYPE.BIT]
    rows = [_as_binlog(dict(zip(names, row, strict=True)), bits, kept, fixed)
            for row in cursor.fetchall()]
    found = {plain_key(tuple(row[k] for k in keys)): row for row in rows}
    if floats and rows:  # a table with FLOAT columns: their values read again, exactly
        exact = ", ".join(f"CAST({quote(name)} AS DOUBLE)" for name in floats)
        cursor.execute(f"SELECT {', '.join(map(chosen, keys))}, {exact} {where}", values)
        for row in cursor.fetchall():
            key = _as_binlog(dict(zip(keys, row, strict=False)), bits, kept, fixed)
            known = found.get(plain_key(tuple(key[k] for k in keys)))
            if known is not None:
                known.update(zip(floats, row[len(keys):], strict=True))
    return found


def _as_binlog(row: Row, bits: list[str], kept: dict[str, str],
               fixed: list[str] | None = None) -> Row:
    """A row a SELECT gave, its BIT values as numbers, its text read as bytes as
    :class:`~node.charsets.Encoded` (an empty one as ``''``) and its BINARY(n) values
    (``fixed``) without the zero bytes that pad them, as the binlog gives them. Only a
    BINARY's: a VARBINARY or BLOB keeps the bytes written, and b'ab' and b'ab\\0' are two
    values (stripped from every value, a change between them met no conflict)."""
    for name in fixed or ():
        if isinstance(row.get(name), bytes):
            row[name] = row[name].rstrip(b"\0")
    for name in bits:
        if isinstance(row.get(name), bytes):
            row[name] = int.from_bytes(row[name], "big")
    for name, charset in kept.items():
        if isinstance(row.get(name), bytes):
            row[name] = Encoded(row[name], charset) if row[name] else ""
    return row


def missing_columns(before: Row | None, now: Row | None) -> list[str]:
    """The columns of a before image the target's row has none of (names compared as the
    server does, without case)."""
    if before is None or now is None:
        return []
    names = {name.lower() for name in now}
    return [name for name in before if name.lower() not in names]


_ABSENT = object()


def same_row(before: Row | None, now: Row | None) -> bool:
    """Whether the target's row ``now`` holds the before image's values: every column of
    it, found by name without case (a source's ``Status`` is the target's ``status``:
    compared only where the names were spelled alike, a change of it on the target met no
    conflict); a column the target lacks differs (:func:`missing_columns` refuses it)."""
    if before is None or now is None:
        return before is None and now is None
    held = {name.lower(): value for name, value in now.items()}
    return all(_plain(value) == _plain(held.get(name.lower(), _ABSENT))
               for name, value in before.items())


_ZERO = "0000-00-00 00:00:00"


def _plain(value: Any) -> Any:
    """A value from the binlog or from a SELECT in one comparable form (an empty binary
    value as ``''``; a SELECT's BINARY(n) comes without the zero bytes that pad it, as the
    binlog gives it: :func:`current_rows`). Text is compared as its
    characters, also text that looks like JSON: a VARCHAR, a TEXT or MariaDB's JSON (a
    LONGTEXT) keeps the bytes written, so '{"a": 1, "b": 2}' and '{"b": 2, "a": 1}' are two
    values (read as one, the losing side met no conflict where both sides rewrote a
    document, and wrote its own over the winner's). MySQL's binary JSON is not read from
    its binlog (node.extract.decodetypes refuses it)."""
    if isinstance(value, bytes):
        return value or ""
    if isinstance(value, str) and value.startswith(_ZERO) and "." in value:
        return value.rstrip("0").rstrip(".")  # a TIMESTAMP(n)'s zero: the binlog's has no
        # fraction, a SELECT's has n zeros (a DATETIME(n)'s text keeps them both ways)
    if isinstance(value, set | frozenset):
        return ",".join(sorted(value))
    if isinstance(value, dict | list):  # (a processor's) as Load writes it: keys.sql_value
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float | Decimal) and not isinstance(value, bool):
        return Decimal(str(value)).normalize()
    if isinstance(value, datetime.datetime):
        return value.replace(tzinfo=None)
    return value
