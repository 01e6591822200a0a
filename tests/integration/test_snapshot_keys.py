"""A snapshot's read row and the stream's image of the same row give the same key.

A chunk's rows are dropped where the stream changed their key inside the read's window
(:func:`node.extract.reads.joined`), by comparing the key of the row as the snapshot's
SELECT gave it with the keys of the binlog decoder's images, in Python. Were the two forms
of one key unequal for some type, a read row older than the stream's change would be written
after it. Here every key type is read both ways from a real server and must compare equal.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from node.extract import decode
from node.extract.reads import _key, columns_of, select
from shared.endpoint import READING, connect
from shared.model import BinlogPosition, DataSource
from shared.secrets import SecretRef
from tests import libreader
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_for

# (table, key columns DDL, primary key, the key values inserted)
KEYS: list[tuple[str, str, str, list[str]]] = [
    ("dt6", "k DATETIME(6)", "k", [
        "'2020-01-02 03:04:05.123456'", "'2020-01-02 03:04:05'", "'2020-01-02 03:04:06.5'",
        "'1000-01-01 00:00:00'", "'9999-12-31 23:59:59.999999'", "'0000-00-00 00:00:00'",
        "'2020-00-15 01:02:03.000001'", "'2020-02-00 00:00:00'"]),
    ("dt0", "k DATETIME", "k", [
        "'2020-01-02 03:04:05'", "'0000-00-00 00:00:00'", "'2020-00-00 00:00:00'"]),
    ("ts6", "k TIMESTAMP(6) NOT NULL", "k", [
        "'1970-01-01 03:00:01'", "'2038-01-19 06:14:07.999999'", "'2020-01-02 03:04:05.5'",
        "'0000-00-00 00:00:00'"]),
    ("ts3", "k TIMESTAMP(3) NOT NULL", "k", [
        "'2021-03-04 05:06:07.123'", "'2021-03-04 05:06:07'", "'0000-00-00 00:00:00'"]),
    ("t3", "k TIME(3)", "k", [
        "'-838:59:59'", "'-00:00:00.500'", "'00:00:00'", "'12:34:56.789'", "'838:59:59'",
        "'-01:02:03.004'", "'100:00:00.001'"]),
    ("t0", "k TIME", "k", ["'-838:59:59'", "'-00:00:01'", "'00:00:00'", "'838:59:59'"]),
    ("d", "k DATE", "k", [
        "'2020-02-29'", "'1000-01-01'", "'9999-12-31'", "'0000-00-00'", "'2020-00-00'",
        "'2020-05-00'"]),
    ("y", "k YEAR", "k", ["0", "1901", "2000", "2155"]),
    ("dec", "k DECIMAL(10,3)", "k", [
        "-9999999.999", "0", "1.5", "-0.001", "1234567.890", "10"]),
    ("u64", "k BIGINT UNSIGNED", "k", [
        "18446744073709551615", "18446744073709551614", "0", "9223372036854775808"]),
    ("i64", "k BIGINT", "k", ["-9223372036854775808", "9223372036854775807", "0"]),
    ("en", "k ENUM('a','b','é','Z') CHARACTER SET utf8mb4", "k", [
        "'a'", "'é'", "'Z'", "'bogus'"]),  # 'bogus' is the empty value (sql_mode '')
    ("st", "k SET('x','y','z') CHARACTER SET utf8mb4", "k", ["''", "'x'", "'z,x'", "'x,y,z'"]),
    ("bt", "k BIT(5)", "k", ["b'0'", "b'11111'", "b'101'"]),
    ("bt64", "k BIT(64)", "k", ["b'0'", "0xFFFFFFFFFFFFFFFF", "0x8000000000000001"]),
    ("dbl", "k DOUBLE", "k", [
        "0.1", "-1e300", "1.7976931348623157e308", "4.9e-324", "0", "1e15", "123456789.125"]),
    ("flt", "k FLOAT", "k", ["0.1", "3.4e38", "-1.5", "16777217"]),
    ("ci", "k VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", "k", [
        "'a'", "'B'", "'é'", "'x '", "'😀'", "''", "'ß'"]),
    ("latin", "k VARCHAR(10) CHARACTER SET latin1", "k", ["'é'", "'ÿ'", "'A'"]),
    ("vb", "k VARBINARY(10)", "k", ["x'00'", "x'ff00'", "''", "'ab'", "x'c3'"]),
    ("bn", "k BINARY(4)", "k", ["x'00'", "x'ff'", "'ab'", "x'00000001'"]),
    ("ch", "k CHAR(5) CHARACTER SET utf8mb4", "k", ["'a'", "'ab  '", "''", "' x'"]),
    ("comp", "k INT, k2 VARCHAR(10) CHARACTER SET utf8mb4", "k, k2", [
        "1, 'a'", "1, 'b'", "-1, ''", "2, 'é '"]),
]


def test_a_read_rows_key_equals_its_binlog_images_key_for_every_key_type(sandbox) -> None:
    schema = f"sk_{uuid.uuid4().hex[:8]}"
    db = Database(sandbox, "source")
    server = sandbox.servers()["source"]
    endpoint = DataSource("source", "127.0.0.1", server.port, "setl",
                          SecretRef(f"file:{sandbox.secret_file}"))
    try:
        db.script(f"CREATE DATABASE {schema}", "SET SESSION sql_mode = ''",
                  "SET SESSION time_zone = '+03:00'",  # the snapshot reads in UTC
                  "SET SESSION binlog_row_image = 'FULL'")
        for table, columns, key, _ in KEYS:
            db.execute(f"CREATE TABLE {schema}.{table} ({columns}, v INT, "
                       f"PRIMARY KEY ({key}))")
        file, pos = db.rows("SHOW MASTER STATUS")[0][:2]
        start = BinlogPosition(str(file), int(pos))
        for table, _, _, values in KEYS:
            for value in values:
                db.execute(f"INSERT INTO {schema}.{table} VALUES ({value}, 1)")
            db.execute(f"UPDATE {schema}.{table} SET v = v + 1")
        file, pos = db.rows("SHOW MASTER STATUS")[0][:2]
        end = BinlogPosition(str(file), int(pos))
        stream: dict[str, list[tuple[Any, ...] | None]] = {}
        names: dict[str, tuple[str, ...]] = {}
        for event in libreader.read(endpoint, start, end, schema.__eq__, 7233):
            layout = decode.TableSchema.of(event.table)
            names[layout.table] = layout.primary_key
            for before, after in decode.decode_rows(layout, event.data, event.checksum):
                stream.setdefault(layout.table, []).extend(
                    _key(image, layout.primary_key) for image in (before, after)
                    if image is not None)
        read: dict[str, list[tuple[Any, ...] | None]] = {}
        with connect(endpoint, init_command=READING) as conn, conn.cursor() as cursor:
            for table, *_ in KEYS:
                columns = columns_of(cursor, schema, table)
                rows = select(cursor, schema, table, columns, "TRUE", ())
                named = tuple(column.name for column in columns)
                read[table] = [_key(dict(zip(named, row, strict=True)), names[table])
                               for row in rows]
    finally:
        db.execute(f"DROP DATABASE IF EXISTS {schema}")
        db.close()
    unequal = {}
    for table, _, _, values in KEYS:
        assert len(read[table]) == len(values), (table, read[table])
        if set(read[table]) != set(stream[table]):  # as joined() compares them
            unequal[table] = (sorted(map(repr, read[table])),
                              sorted(set(map(repr, stream[table]))))
    assert not unequal, "\n".join(f"{table}: read {got} stream {want}"
                                  for table, (got, want) in unequal.items())


ZERO = "CREATE TABLE `{schema}`.zt (k TIMESTAMP(6) NOT NULL PRIMARY KEY, v INT)"
FILLER = 300_000  # rows read in the zero key's chunk: the read lasts long enough to be seen


def test_a_row_keyed_by_the_zero_timestamp_updated_while_its_chunk_is_read_ends_new(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The stream updates the row keyed by the zero TIMESTAMP(6) after the snapshot's read
    of its chunk began and before the window's high watermark: the read row (older) is
    dropped for the stream's change, and the target ends with the source's newest row (the
    read gave the key as '0000-00-00 00:00:00.000000', the stream as '0000-00-00 00:00:00':
    the read row was written last, and the target kept v = 1)."""
    schema = make_schema(source, target, ZERO)
    t = f"`{schema}`.zt"
    source.script(f"USE `{schema}`", "SET SESSION sql_mode = ''",
                  "SET SESSION time_zone = '+00:00'",
                  f"INSERT INTO {t} VALUES ('0000-00-00 00:00:00', 1)",
                  f"INSERT INTO {t} SELECT FROM_UNIXTIME(seq) + INTERVAL seq MICROSECOND, seq "
                  f"FROM seq_1_to_{FILLER}")
    cluster.apply([one_way("snapkeys-zero", schema, ["zt"], start="snapshot",
                           snapshot_chunk_size=2 * FILLER)])
    cluster.set_status("snapkeys-zero", "START")
    reading = (f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE "
               f"'SELECT `k`, `v` FROM `{schema}`.`zt` WHERE %'")
    deadline = time.monotonic() + 120
    while not source.rows(reading)[0][0]:  # polled without pause: the read lasts a moment
        assert time.monotonic() < deadline, "the chunk's read was never seen"
    source.execute(f"UPDATE {t} SET v = 2 WHERE k = '0000-00-00 00:00:00'")  # inside it
    zero = f"SELECT v FROM {t} WHERE k = '0000-00-00 00:00:00'"
    wait_for(lambda: target.rows(f"SELECT COUNT(*) FROM {t}")[0][0] == FILLER + 1, 120,
             "the table copied")

    def done() -> bool:
        copies = list(cluster.pipeline_state("snapkeys-zero").snapshots)
        return bool(copies) and all(c.state == "done" for c in copies)

    wait_for(done, 60, "the copy done")
    source.execute(f"INSERT INTO {t} VALUES ('2030-01-01 00:00:00', 0)")  # a marker after it
    wait_for(lambda: target.rows(f"SELECT COUNT(*) FROM {t}")[0][0] == FILLER + 2, 60,
             "the stream after the copy")
    assert source.rows(zero) == [(2,)]
    assert target.rows(zero) == [(2,)]
    cluster.set_status("snapkeys-zero", "STOP")
