"""What a text key's collation takes for one value that another keeps apart.

A target row is found by its unique keys under the target column's collation, so a key
column whose collation is looser than the source's (``utf8mb4_general_ci`` where the source
has ``utf8mb4_bin``) lands two source rows on one target row: 'a' and 'A' are two keys on
the source and one on the target, and the second write overwrites the first, silently.
Two-way channels compare the key with exact values (:func:`loose_collation`); one-way ones
with the source's collation (:func:`looser_than_source`).
"""

from __future__ import annotations

from typing import Any

_BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob",
                           "longblob"})


def loose_collation(data_type: str, collation: str) -> str:
    """What a text key's collation takes for equal that differs (empty: nothing): every
    collation but a binary one folds case or accents; a binary one pads spaces unless it
    is NO PAD (a CHAR's trailing spaces are gone before anything compares them)."""
    name = collation.lower()
    if name == "binary":
        return ""
    if not name.endswith("_bin"):
        return "'abc' and 'ABC' (or 'é' and 'e')"
    if "_nopad_" in name or "_0900_" in name or data_type.lower() == "char":
        return ""
    return "'abc' and 'abc ' (trailing spaces)"


def source_collation(data_type: str, collation: str | None) -> str | None:
    """A source column's collation as compared here: a binary string's is ``binary``; None
    for a column that holds no string (numbers, dates: distinct values stay distinct)."""
    if collation:
        return collation.lower()
    return "binary" if data_type.lower() in _BINARY_TYPES else None


def _charset(collation: str) -> str:
    return collation.split("_", 1)[0]


def _folds_trailing_spaces(data_type: str, collation: str) -> bool:
    """Whether 'a' and 'a ' are one value in such a column: a CHAR drops trailing spaces, a
    PAD SPACE collation ignores them (every one but binary, NO PAD and MySQL 8's 0900)."""
    if data_type.lower() == "char":
        return True
    return collation != "binary" and "_nopad_" not in collation and "_0900_" not in collation


def looser_than_source(source_type: str, source: str, target_type: str, target: str) -> str:
    """What a target key column (``target_type``, collation ``target``) takes for one value
    that the source column it is filled from (``source_type``, ``source``) keeps apart, as
    an example ("" when nothing). The same collation is as strict; so is a binary string or
    a ``_bin`` collation of a charset that holds the source's characters, except that a PAD
    SPACE one (MariaDB's and MySQL's ``utf8mb4_bin``) folds trailing spaces a NO PAD source
    (or a binary string) keeps. Any other collation folds something (case, accents, 'ß' and
    'ss', …) that the source's may not."""
    source, target = source.lower(), (target or "binary").lower()
    spaces = "'a' and 'a ' (trailing spaces)"
    if source == target:
        return spaces if target_type.lower() == "char" and source_type.lower() != "char" \
            and not _folds_trailing_spaces(source_type, source) else ""
    if target != "binary" and not target.endswith("_bin"):
        return "'a' and 'A', 'é' and 'e', or 'ß' and 'ss'"
    wide = {_charset(source), _charset(target)} <= {"utf8", "utf8mb3"}
    if target != "binary" and _charset(target) not in (_charset(source), "utf8mb4") \
            and source != "binary" and not wide:
        return f"two characters {_charset(target)} lacks (each written as '?')"
    if target != "binary" and _folds_trailing_spaces(target_type, target) and \
            not _folds_trailing_spaces(source_type, source):
        return spaces
    return ""


def key_problem(where: str, target: tuple[str, str, str], columns: dict[str, Any],
                unique: tuple[frozenset[str], ...],
                fills: dict[str, tuple[str, str, str]]) -> str:
    """Why a target table would merge rows the source keeps apart ("" when it would not):
    a column of one of its ``unique`` keys (the target's ``columns``, by name) filled from a
    source string column (``fills``: target column, lower-cased → the source's column,
    data type and collation, see :func:`source_collation`) whose collation is looser."""
    datasource, schema, table = target
    by_lower = {name.lower(): (name, column) for name, column in columns.items()}
    for index in unique:
        for key in sorted(index):
            name, column = by_lower.get(key.lower(), (key, None))
            filled = fills.get(key.lower())
            if column is None or filled is None or column.generated:
                continue
            source_column, source_type, source = filled
            why = looser_than_source(source_type, source, column.data_type,
                                     column.collation or "binary")
            if not why:
                continue
            wanted = (f"CHARACTER SET {_charset(source)} COLLATE {source}"
                      if source != "binary" else "a binary type (VARBINARY) or a NO PAD "
                      "binary collation (utf8mb4_nopad_bin on MariaDB)")
            return (
                f"{where}: target table {schema}.{table} on {datasource}: key column {name} "
                f"has collation {column.collation or 'binary'}, under which the target takes "
                f"{why} for one value, where the source's column {source_column} "
                f"({source}) keeps them apart: two source rows would be written into one "
                "target row, the second over the first, and a delete of either would remove "
                f"both. Give the column the source's collation on the target (ALTER TABLE "
                f"{schema}.{table} MODIFY {name} {column.column_type or column.data_type} "
                f"{wanted}, keeping its NOT NULL and DEFAULT), then resume the channel")
    return ""
