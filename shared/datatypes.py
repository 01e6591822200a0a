"""Families of the type names ``information_schema.COLUMNS.DATA_TYPE`` gives, for code that
reads rows with SQL and must treat a value as its column's kind (verify's hashes, the free
door's keys)."""

from __future__ import annotations

INTEGER = frozenset(("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"))
TEXT = frozenset(("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum",
                  "set"))
BINARY = frozenset(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob",
                    "geometry", "point", "linestring", "polygon", "multipoint",
                    "multilinestring", "multipolygon", "geometrycollection"))
TEMPORAL = frozenset(("date", "datetime", "timestamp"))
