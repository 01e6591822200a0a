"""Families of the type names ``information_schema.COLUMNS.DATA_TYPE`` gives, for code that
reads rows with SQL and must treat a value as its column's kind (verify's hashes, the free
door's keys)."""

from __future__ import annotations

from shared.identifiers import quote
from shared.textcodecs import decodable

INTEGER = frozenset(("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"))
TEXT = frozenset(("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum",
                  "set"))
BINARY = frozenset(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob",
                    "geometry", "point", "linestring", "polygon", "multipoint",
                    "multilinestring", "multipolygon", "geometrycollection"))
TEMPORAL = frozenset(("date", "datetime", "timestamp"))

# text types whose values stay bytes in a charset Python does not read exactly
_STRINGS = frozenset(("char", "varchar", "tinytext", "text", "mediumtext", "longtext"))


def read_expression(name: str, data_type: str, charset: str | None) -> str:
    """How a column is selected to read its value in the binlog decoder's form (under
    :data:`shared.endpoint.READING`): the node's reads and ``setl backfill``'s keys, so a
    key read by one is the key the other finds. A FLOAT as the double of the stored single
    (its text is rounded to six digits), a BIT as a number, text in a charset Python does
    not read exactly as its bytes (sjis 0x815F came back as 0x5C through Unicode:
    :data:`shared.textcodecs.INEXACT`)."""
    column = quote(name)
    if data_type == "float":
        return f"CAST({column} AS DOUBLE)"
    if data_type == "bit":
        return f"{column} + 0"
    if read_as_bytes(data_type, charset):
        return f"CAST({column} AS BINARY)"
    return column


def read_as_bytes(data_type: str, charset: str | None) -> bool:
    """Whether a text column is read as its bytes (its charset is one Python does not read
    exactly): the binlog decoder gives such a value as bytes too, but an empty one as ''."""
    return bool(charset) and data_type in _STRINGS and not decodable(charset or "")
