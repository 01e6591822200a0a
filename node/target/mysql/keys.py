"""How a row's values are written and compared on the target, for the SQL renderers
(:mod:`node.target.mysql.render`, :mod:`node.target.mysql.keyless`,
:mod:`node.target.mysql.twoway`).

- :func:`sql_value`: a binlog value as a PyMySQL parameter.
- A key's values as the target compares them: BINARY(n) columns padded again
  (:func:`key_padding`), a composite key's text columns converted into their charsets
  (:func:`key_place`).
- A keyless row found by its whole image (:func:`exact_match`): strings byte for byte in
  their column's charset, binary values and geometries as bytes, NULL with ``IS NULL``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from node.changes import Row
from node.charsets import Encoded
from shared.identifiers import quote
from shared.keysql import converted

if TYPE_CHECKING:
    from node.target.mysql.render import Column, Columns


def sql_value(value: Any) -> Any:
    """A binlog value as a PyMySQL parameter."""
    if isinstance(value, set | frozenset):
        members = sorted(value)
        if members and type(members[0]) is Encoded:  # a SET of a charset kept as bytes
            return Encoded(b",".join(members), members[0].charset)
        return ",".join(members)
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return value


def binary_widths(columns: Columns) -> dict[str, int]:
    """The BINARY(n) columns' widths, by lower-cased name: the binlog gives their values
    without the zero bytes that pad them (``'ab'`` for ``'ab\\0\\0'``), and a comparison
    needs every byte."""
    return {name.lower(): int(column.column_type[7:-1]) for name, column in columns.items()
            if column.data_type == "binary" and column.column_type.startswith("binary(")}


def _padded(value: Any, width: int) -> Any:
    return (value or b"").ljust(width, b"\0") if isinstance(value, bytes) or value == "" \
        else value


def key_padding(keys: tuple[str, ...], columns: Columns) -> Any:
    """How a key's values are compared on the target: as they are, or with the BINARY
    columns padded again (an insert pads them itself)."""
    widths = binary_widths(columns)
    if not any(name.lower() in widths for name in keys):  # (lower-cased: see binary_widths)
        return same_key
    padding = [widths.get(name.lower(), 0) for name in keys]
    return lambda key: tuple(_padded(value, width) if width else value
                             for value, width in zip(key, padding, strict=True))


def same_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return key


def key_place(keys: tuple[str, ...], columns: Columns) -> str:
    """One key's row constructor in ``(a, b) IN ((…), (…))``: MariaDB 10.11 compares a text
    value there unconverted into its column's charset (a latin1 'é' as a UTF-8 parameter
    matched no row: a DELETE of two such keys deleted nothing, the target kept both), so a
    composite key's text columns take theirs converted, in their collations
    (:mod:`shared.keysql`)."""
    if len(keys) == 1:
        return "(%s)"
    by_name = {name.lower(): column for name, column in columns.items()}
    known = [by_name.get(name.lower()) for name in keys]
    return "(" + ", ".join(converted("%s", column.charset, column.collation) if column
                           else "%s" for column in known) + ")"


def _named(columns: Columns, name: str) -> Column | None:
    """The column ``name`` spelt in another case (a pair's ``login`` for the target's
    ``Login``: MySQL's column names ignore case)."""
    name = name.lower()
    return next((column for known, column in columns.items() if known.lower() == name), None)


def exact_match(image: Row, columns: Columns, widths: dict[str, int]) -> tuple[str, list[Any]]:
    """A WHERE clause true for exactly the rows equal to ``image`` byte for byte (``widths``:
    see :func:`binary_widths`)."""
    parts, args = [], []
    for name, value in image.items():
        column, expr = columns.get(name) or _named(columns, name), quote(name)
        if value is None:
            parts.append(f"{expr} IS NULL")
            continue
        if widths and name.lower() in widths:
            value = _padded(value, widths[name.lower()])
        if isinstance(value, bytes) and not (type(value) is Encoded and column is not None
                                             and column.charset):
            parts.append(f"CAST({expr} AS BINARY) = %s")  # binary strings, geometry
        elif column is not None and column.charset and isinstance(value, str | bytes):
            # text (Encoded: of a charset kept as bytes, converted by the server)
            parts.append(f"CAST({expr} AS BINARY) = "
                         f"CAST(CONVERT(%s USING {column.charset}) AS BINARY)")
        elif column is not None and column.data_type == "json":  # MySQL's binary JSON
            parts.append(f"{expr} = CAST(%s AS JSON)")
        else:
            parts.append(f"{expr} = %s")
        args.append(sql_value(value))
    return " AND ".join(parts), args
