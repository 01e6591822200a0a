"""Keys in a query's condition: ``(a, b) IN ((…), (…))`` as the server finds their rows.

MariaDB 10.11 compares the text of a row constructor in a list of several rows without
converting it into its column's charset: ``(k, n) IN (('é7', 1), ('é8', 1))`` on a latin1
column found no row although ``('é7', 1)`` is there (the parameter is UTF-8), nor did sjis
text written with its charset (``_sjis X'…'``) in a utf8mb4 column. So each text value of a
composite key goes converted into its column's charset (``CONVERT(… USING latin1)``), and
text setl keeps as its bytes (:class:`~shared.textcodecs.Encoded`) with its charset, never
as a parameter (bytes compare as bytes: no row of a column of another charset). The
converted value takes its column's collation explicitly (``CONVERT(… USING latin1) COLLATE
latin1_general_cs``): ``CONVERT`` gives the charset's default collation, as implicit as the
column's, and a column of any other one but ``_bin`` (utf8mb4_unicode_ci, latin1_general_cs)
failed with "Illegal mix of collations" (1267) wherever the server compares with ``=`` (one
key's ``(a, b) IN ((…))``, the lookup's ``IF``); a parameter took the column's. With
its collation the value compares exactly as the column does, and the key's index is used.
Shared by the lookup (反查), the free door's reads, verify, the two-way conflict check and
Load's multi-row deletes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from shared.identifiers import quote
from shared.textcodecs import Encoded

_NAME = re.compile(r"[a-z0-9_]+")


def named(name: str) -> str:
    """A charset's or collation's name as it goes into SQL unquoted: checked (they come from
    information_schema, or a decoded value's charset; anything else is refused)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"not a charset or collation name: {name!r}")
    return name


def placed(value: Any) -> tuple[str, bool]:
    """Where a value goes in the SQL: a parameter (True), or text kept as its bytes
    (:class:`~shared.textcodecs.Encoded`) written with its charset, which the server
    converts into the column's (as a parameter, bytes: sjis matched no row of a utf8mb4
    column)."""
    if type(value) is Encoded:
        return f"_{named(value.charset)} X'{value.hex()}'", False
    return "%s", True


def converted(place: str, charset: str | None, collation: str | None = None) -> str:
    """A value's place converted into its column's charset, in its column's collation (as
    it is without a charset: a column without one)."""
    if not charset:
        return place
    return f"CONVERT({place} USING {named(charset)})" + (
        f" COLLATE {named(collation)}" if collation else "")


def placed_key(key: Sequence[Any], charsets: Sequence[str | None],
               collations: Sequence[str | None] | None = None) -> tuple[str, list[Any]]:
    """A key's row constructor and its parameters: a text column's value (``charsets``:
    each key column's, None for one without) converted into its column's charset, which
    MariaDB 10.11's ``(a, b) IN ((…), (…))`` leaves undone (a latin1 'é' as a parameter,
    sjis text as bytes or with its charset: no row found), in its column's collation
    (``collations``: each key column's; without it the charset's default, which meets a
    column of another collation with "Illegal mix of collations"); text kept as its bytes
    with its charset (:func:`placed`)."""
    places, args = [], []
    every = list(collations) if collations is not None else [None] * len(charsets)
    for value, charset, collation in zip(key, charsets, every, strict=True):
        place, given = placed(value)
        places.append(converted(place, charset, collation))
        args += [value] if given else []
    return "(" + ", ".join(places) + ")", args


def keys_in(columns: Sequence[str], keys: Sequence[Sequence[Any]],
            charsets: Sequence[str | None] | None = None,
            collations: Sequence[str | None] | None = None) -> tuple[str, list[Any]]:
    """``(a, b) IN ((…), …)`` for ``keys`` and its parameters; ``charsets``: each key
    column's charset (None for one without; not given: no text column among them), and
    ``collations`` each one's collation (:func:`placed_key`).
    One column: ``a IN (…)``, which the server converts itself."""
    if len(columns) == 1:
        asked = [placed(key[0]) for key in keys]
        return (f"{quote(columns[0])} IN ({', '.join(place for place, _ in asked)})",
                [key[0] for key, (_, given) in zip(keys, asked, strict=True) if given])
    every = list(charsets) if charsets is not None else [None] * len(columns)
    rows = [placed_key(key, every, collations) for key in keys]
    return (f"({', '.join(map(quote, columns))}) IN ({', '.join(row for row, _ in rows)})",
            [arg for _, given in rows for arg in given])
