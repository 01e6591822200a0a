"""The chunk splitter on real tables: every row in exactly one chunk and chunks of about
the size asked, for dense and sparse integers, a composite key, a string key in a
case-insensitive collation, a table keyed by a NOT NULL unique key, key_columns that admit
NULL, a --where condition, and a row inserted after the split."""

from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest

from node.extract.chunks import read_chunk, split, table_key
from tests.devcluster import Database

TABLES = {
    "dense": "CREATE TABLE `{schema}`.dense (id INT PRIMARY KEY, v INT)",
    "sparse": "CREATE TABLE `{schema}`.sparse (id BIGINT UNSIGNED PRIMARY KEY, v INT)",
    "composite": ("CREATE TABLE `{schema}`.composite (a INT, b VARCHAR(10), v INT, "
                  "PRIMARY KEY (a, b))"),
    "words": ("CREATE TABLE `{schema}`.words (w VARCHAR(20) COLLATE utf8mb4_general_ci "
              "PRIMARY KEY, v INT)"),
    "unique_key": ("CREATE TABLE `{schema}`.unique_key (u DATETIME(6) NOT NULL, v INT, "
                   "UNIQUE KEY (u))"),
    "loose": "CREATE TABLE `{schema}`.loose (ref VARCHAR(10), v INT)",
    "floats": "CREATE TABLE `{schema}`.floats (f FLOAT PRIMARY KEY, v INT)",
}


@pytest.fixture(scope="module")
def schema(source: Database) -> str:
    name = f"t_{uuid.uuid4().hex[:10]}"
    source.execute(f"CREATE DATABASE `{name}`")
    for ddl in TABLES.values():
        source.execute(ddl.format(schema=name))
    rng = random.Random(3)
    t = f"`{name}`"
    source.execute(f"INSERT INTO {t}.dense VALUES " + ", ".join(f"({i}, {i})"
                                                               for i in range(1, 1001)))
    sparse = [*sorted(rng.sample(range(1, 10**12), 700)), 2**64 - 1]
    source.execute(f"INSERT INTO {t}.sparse VALUES " + ", ".join(f"({i}, 1)" for i in sparse))
    source.execute(f"INSERT INTO {t}.composite VALUES " + ", ".join(
        f"({a}, 'k{b}', 1)" for a in range(1, 40) for b in range(rng.randint(1, 30))))
    words = {"".join(rng.choice("abcXYZ é") for _ in range(rng.randint(1, 8))).strip() or "x"
             for _ in range(900)}  # 'a' and 'A', 'e' and 'é' are one key: IGNORE keeps one
    source.execute(f"INSERT IGNORE INTO {t}.words VALUES " + ", ".join(
        f"('{w}', 1)" for w in words))
    source.execute(f"INSERT INTO {t}.unique_key VALUES " + ", ".join(
        f"('2024-01-01 00:00:00' + INTERVAL {i * 37} SECOND, {i})" for i in range(800)))
    source.execute(f"INSERT INTO {t}.loose VALUES " + ", ".join(
        f"({'NULL' if i % 10 == 0 else repr(f'r{i:04d}')}, {i})" for i in range(500)))
    source.execute(f"INSERT INTO {t}.floats VALUES " + ", ".join(  # 8 to a unit: the text
        f"({1234500 + i / 8}, {i})" for i in range(1000)))  # of six digits rounds by tens
    return name


def chunked(source: Database, schema: str, table: str, size: int, where: str = "",
            key_columns: tuple[str, ...] = ()) -> tuple[list[list[tuple]], str]:
    cursor = source.conn.cursor()
    key = table_key(cursor, schema, table, key_columns)
    assert key is not None
    plan = split(cursor, key, size, where)
    rows = [read_chunk(cursor, key, chunk, where=where) for chunk in plan.chunks]
    return rows, plan.method


@pytest.mark.parametrize("table, size, method, largest", [
    ("dense", 100, "fixed", 100), ("sparse", 64, "stepped", 64), ("words", 50, "stepped", 50),
    ("composite", 60, "fixed", 4 * 30), ("unique_key", 100, "stepped", 100),
    ("floats", 50, "stepped", 50)])
def test_every_row_is_in_exactly_one_chunk_of_about_the_size_asked(
        source: Database, schema: str, table: str, size: int, method: str,
        largest: int) -> None:
    chunks, used = chunked(source, schema, table, size)
    everything = source.rows(f"SELECT * FROM `{schema}`.{table}")
    assert used == method
    assert Counter(row for chunk in chunks for row in chunk) == Counter(everything)
    assert max(map(len, chunks)) <= largest
    assert len(chunks) >= len(everything) // largest


def test_key_columns_that_admit_null_get_a_chunk_for_their_nulls(
        source: Database, schema: str) -> None:
    chunks, method = chunked(source, schema, "loose", 100, key_columns=("ref",))
    assert method == "stepped" and len(chunks[-1]) == 50  # the NULL chunk, last
    assert all(row[0] is None for row in chunks[-1])
    assert sum(map(len, chunks)) == 500


def test_a_where_condition_and_a_row_added_after_the_split(source: Database,
                                                           schema: str) -> None:
    cursor = source.conn.cursor()
    key = table_key(cursor, schema, "dense")
    plan = split(cursor, key, 100, "v % 3 = 0")  # a third of the values: stepped
    assert plan.rows == 333 and plan.method == "stepped"
    assert [len(read_chunk(cursor, key, c, where="v % 3 = 0")) for c in plan.chunks] == \
        [100, 100, 100, 33]
    source.execute(f"INSERT INTO `{schema}`.dense VALUES (5000, 5001)")  # past the last bound
    found = [row for chunk in plan.chunks for row in read_chunk(cursor, key, chunk)]
    assert len(found) == 1001 and (5000, 5001) in found
    source.execute(f"DELETE FROM `{schema}`.dense WHERE id = 5000")


def test_a_large_table_is_not_counted_its_statistics_size_the_chunks(
        source: Database, schema: str) -> None:
    source.execute(f"ANALYZE TABLE `{schema}`.dense")
    estimate = source.rows("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE "
                           "TABLE_SCHEMA = %s AND TABLE_NAME = 'dense'", (schema,))[0][0]
    cursor = source.conn.cursor()
    key = table_key(cursor, schema, "dense")
    plan = split(cursor, key, 5)  # 1,000 rows are 200 chunks of 5: past the estimate's 100
    assert plan.rows == estimate and plan.method == "fixed"
    found = [row for chunk in plan.chunks for row in read_chunk(cursor, key, chunk)]
    assert sorted(found) == sorted(source.rows(f"SELECT * FROM `{schema}`.dense"))
