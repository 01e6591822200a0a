"""The row keys read from a real server's catalog (:func:`shared.tablekeys.row_keys`): a
primary key first, else a unique key whose columns all refuse NULL (rows with NULL there
would be merged as one key), else none; a view is no table. Read as two
plain reads joined in Python (the server's own join of its catalog's tables took 35-42 s
for 3,000 tables, at every start and after each DDL batch: a review)."""

from __future__ import annotations

from shared import tablekeys
from tests.devcluster import Database, make_schema


def test_a_unique_key_keys_a_table_only_where_no_column_of_it_admits_null(
        source: Database, target: Database) -> None:
    schema = make_schema(
        source, target,
        "CREATE TABLE `{schema}`.nullable (a INT NULL, b INT NOT NULL, UNIQUE KEY u (a, b))",
        "CREATE TABLE `{schema}`.not_null (a INT NOT NULL, b INT, UNIQUE KEY u (A))",
        "CREATE TABLE `{schema}`.primary_too (id INT PRIMARY KEY, u INT NOT NULL, "
        "UNIQUE KEY uu (u))",
        "CREATE TABLE `{schema}`.both (x INT NULL, y INT NOT NULL, UNIQUE KEY ax (x), "
        "UNIQUE KEY by_y (y))",
        "CREATE TABLE `{schema}`.none (a INT)",
        "CREATE VIEW `{schema}`.seen AS SELECT * FROM `{schema}`.none")
    with source.conn.cursor() as cursor:
        found = {table: key for (name, table), key in tablekeys.row_keys(cursor).items()
                 if name == schema}
        assert found == {"nullable": None, "not_null": ("a",), "primary_too": ("id",),
                         "both": ("y",), "none": None}
        assert tablekeys.row_keys(cursor, (schema, "both")) == {(schema, "both"): ("y",)}
