"""The workers' row decoder (node.extract.decode) against Select's reader, event by event.

The schemas corpus (every type at its edges, odd names, keyless tables, generated columns),
the all-types table of test_types and a few shapes of our own run on the source, under
binlog_row_image FULL, MINIMAL and NOBLOB (the partial images must be refused: a column
left out would be written as NULL). The binlog library with setl's corrections
(``tests/libreader.py``, Select's reader before it stopped decoding rows) reads that stretch
of the binlog, keeping each rows event's packet, its table map and the row changes it made of
it; then each packet is decoded with ``decode_rows(TableSchema.of(table), …)``
(and again as a V2 event with extra data, and without its checksum) and must give the same
images: the same columns in the same order, each value of the same type and ``repr``.

Some cases run once more with log_bin_compress=ON: the library skips MariaDB's
compressed rows events (the library does not know them), so their packets are taken where
the library receives them, and their rows must equal, table by table, what the reader made
of the same statements' plain events.
"""

from __future__ import annotations

import pickle
import uuid
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from pymysqlreplication import binlogstream

from node.changes import RowChange
from node.extract import decode
from node.extract.decodeplan import present
from shared.errors import SourceError
from shared.model import BinlogPosition, DataSource
from shared.secrets import SecretRef
from tests import libreader
from tests.devcluster import Database
from tests.integration import test_types
from tests.integration.corpus import CASES, GROUPS, Case
from tests.integration.test_schemas import fill, q

pytestmark = [pytest.mark.schemas]
SYNCED = {group.name for group in GROUPS if group.ddl_sync}
ROWS_CASES = [case for case in CASES if case.group not in SYNCED]
IMAGES = ("FULL", "MINIMAL", "NOBLOB")
ZIPPED = {"int-edges", "decimal-float", "strings-utf8mb4", "charsets", "enum-set", "blobs",
          "sequence-of-values", "keyless-duplicates-nulls", "all-types", "wide",
          "multi-row-nulls", "pre-5.6-temporals"}  # run again with log_bin_compress=ON
HEAVY = {"big-blob"}  # 16 MB rows: read once, under FULL
# the binlog types MariaDB writes (all but MySQL's JSON): every one must have been decoded
TYPES = {1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 15, 16, 17, 18, 19, 246, 247, 248, 252, 254,
         255}
WIDE = 300  # columns: the column count takes three bytes, the NULL bitmap 38

EXTRA = [
    Case("all-types", "values", ("alltypes",), (
        f"CREATE TABLE {{s}}.alltypes (id INT PRIMARY KEY, "
        f"{', '.join(f'`{name}` {kind}' for name, kind in test_types.COLUMNS)}) "
        "DEFAULT CHARSET=utf8mb4",), (
        "SET time_zone = '+00:00'",
        *(f"INSERT INTO {{s}}.alltypes VALUES {row}" for row in test_types.ROWS),
        "UPDATE {s}.alltypes SET id = 4 WHERE id = 3",
        "INSERT INTO {s}.alltypes (id, dt, dtm, ts) VALUES "
        "(5, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00')",
        "UPDATE {s}.alltypes SET vc = 'changed', bl = x'01' WHERE id IN (1, 2)",
        "DELETE FROM {s}.alltypes WHERE id = 2")),
    Case("wide", "values", ("wide",), (
        "CREATE TABLE {s}.wide (id INT PRIMARY KEY, " + ", ".join(
            f"c{i} {('INT', 'VARCHAR(5)', 'TINYINT UNSIGNED', 'DOUBLE', 'DATE')[i % 5]}"
            for i in range(1, WIDE)) + ")",), (
        "INSERT INTO {s}.wide (id, c1, c2, c3, c4, c5) VALUES (1, 'a', 255, 0.5, "
        "'2020-01-01', 1), (2, NULL, NULL, NULL, NULL, NULL)",
        "INSERT INTO {s}.wide SELECT 3, " + ", ".join(
            ("-7", "'é'", "7", "-1e300", "'0000-00-00'")[i % 5] for i in range(1, WIDE))
        + " FROM DUAL",
        "UPDATE {s}.wide SET c1 = 10, c299 = NULL WHERE id = 3",
        "DELETE FROM {s}.wide WHERE id = 1")),
    Case("multi-row-nulls", "values", ("many",), (
        "CREATE TABLE {s}.many (id INT PRIMARY KEY, a INT, b VARCHAR(10), c TEXT, d BIGINT, "
        "e DOUBLE, f MEDIUMINT, g SMALLINT UNSIGNED, h CHAR(3) CHARACTER SET latin1)",), (
        "INSERT INTO {s}.many VALUES (1,1,'a','x',1,1.5,-1,1,'é'), "
        "(2,NULL,'b',NULL,2,NULL,NULL,2,NULL), (3,3,NULL,'z',NULL,3.5,8388607,NULL,'ÿ'), "
        "(4,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL), (5,5,'e','e',5,5,-8388608,65535,'a')",
        "UPDATE {s}.many SET a = IFNULL(a, 0) + 1, c = NULL",
        "DELETE FROM {s}.many WHERE id > 3")),
    Case("pre-5.6-temporals", "values", ("olds",), (  # binlog types TIME, DATETIME, TIMESTAMP
        "SET GLOBAL mysql56_temporal_format = OFF",
        "CREATE TABLE {s}.olds (id INT PRIMARY KEY, t TIME, dt DATETIME, ts TIMESTAMP NULL)",
        "SET GLOBAL mysql56_temporal_format = ON"), (
        "SET time_zone = '+00:00'", "SET sql_mode = ''",
        "INSERT INTO {s}.olds VALUES (1, '838:59:59', '9999-12-31 23:59:59', "
        "'2038-01-19 03:14:07'), (2, '00:00:00', '0000-00-00 00:00:00', '0000-00-00 00:00:00'), "
        "(3, '12:34:56', '1000-01-01 00:00:00', '1970-01-01 00:00:01'), "
        "(4, NULL, '2020-00-15 01:02:03', NULL), (5, '100:00:01', '0001-02-00 00:00:00', NULL)",
        "UPDATE {s}.olds SET t = '01:02:03', ts = '2000-02-29 12:00:00' WHERE id < 3",
        "DELETE FROM {s}.olds WHERE id = 3")),
]


@dataclass
class Captured:
    """One rows event as Select read it: the packet, its table map, what the reader made."""

    data: bytes
    table: Any
    checksum: bool
    changes: list[RowChange] | None  # None: a compressed event, which the reader skips


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[Captured]:
    """Every compressed rows event the library receives (and skips: it does not know them),
    with its packet and map; the test adds the library's reading of every other rows event,
    all in binlog order."""
    found: list[Captured] = []
    wrapper = binlogstream.BinLogPacketWrapper

    def packet(from_packet: Any, table_map: dict[int, Any], ctl_connection: Any,
               mysql_version: Any, use_checksum: bool, *more: Any, **named: Any) -> Any:
        data = from_packet._data
        if data[5] in decode.COMPRESSED and decode.table_id(data) in table_map:
            found.append(Captured(bytes(data), table_map[decode.table_id(data)], use_checksum,
                                  None))
        return wrapper(from_packet, table_map, ctl_connection, mysql_version, use_checksum,
                       *more, **named)
    monkeypatch.setattr(binlogstream, "BinLogPacketWrapper", packet)
    return found


def master(db: Database) -> BinlogPosition:
    file, pos = db.rows("SHOW MASTER STATUS")[0][:2]
    return BinlogPosition(str(file), int(pos))


def exact(image: dict[str, Any] | None) -> list[tuple[str, str, str]] | None:
    """An image compared strictly: column order, each value's type and repr."""
    if image is None:
        return None
    return [(name, type(value).__name__, repr(value)) for name, value in image.items()]


def as_v2(data: bytes, checksum: bool, extra: bytes = b"\x01\x02\x00\x05\x07") -> bytes:
    """A V1 rows event rewritten as the V2 event of the same rows, with ``extra`` data."""
    body = data[28:len(data) - (4 if checksum else 0)]
    post = data[20:28] + (2 + len(extra)).to_bytes(2, "little") + extra
    header = bytearray(data[:20])
    header[5] = data[5] + 7  # WRITE/UPDATE/DELETE_ROWS_EVENT V1 23-25 → V2 30-32
    size = 19 + len(post) + len(body) + (4 if checksum else 0)
    header[10:14] = size.to_bytes(4, "little")
    event = bytes(header) + post + body
    return event + zlib.crc32(event[1:]).to_bytes(4, "little") if checksum else event


def without_checksum(data: bytes) -> bytes:
    header = bytearray(data[:20])
    header[10:14] = (len(data) - 1 - 4).to_bytes(4, "little")
    return bytes(header) + data[20:-4]


def partial(event: Captured) -> bool:
    """Whether an image of the event leaves columns out (its present bitmaps)."""
    count = len(event.table.columns)
    size = (count + 7) // 8
    start = 28 + 1 + (2 if count >= 251 else 0)  # V1 post-header, column count
    kinds = 2 if event.data[5] == 24 else 1
    return any(len(present(event.data[start + k * size:start + (k + 1) * size], count)) < count
               for k in range(kinds))


def runs(case: Case, image: str) -> bool:
    """Whether the case runs under the row image (or ZIP: FULL, log_bin_compress=ON)."""
    if image == "ZIP":
        return case.id in ZIPPED
    if image == "NOBLOB":  # differs from FULL only where BLOB/TEXT columns are
        return case.group not in HEAVY and any(
            word in " ".join(case.setup).upper() for word in ("BLOB", "TEXT", "JSON"))
    return image == "FULL" or case.group not in HEAVY


def run_cases(sandbox: Any, source: Database, schemas: dict[tuple[str, str], str],
              cases: list[Case], other: str) -> None:
    for case in cases:
        for image in (*IMAGES, "ZIP"):
            if (case.id, image) not in schemas:
                continue
            schema = schemas[(case.id, image)]
            source.execute(f"CREATE DATABASE {q(schema)} {case.schema_options}")
            session = Database(sandbox, "source")
            try:
                for statement in case.setup:
                    session.execute(fill(statement, schema, other))
                if image == "ZIP":  # rows events of 10 bytes and more compressed
                    source.script("SET GLOBAL log_bin_compress_min_len = 10",
                                  "SET GLOBAL log_bin_compress = ON")
                else:
                    session.execute(f"SET SESSION binlog_row_image = '{image}'")
                for statement in case.work:
                    session.execute(fill(statement, schema, other))
            finally:
                source.execute("SET GLOBAL log_bin_compress = OFF")
                session.close()


def compressed_equal_their_twins(captured: list[Captured]) -> int:
    """Rows of the ZIP schemas' events (compressed: decoded here; plain: the reader's) equal,
    table by table, the reader's rows of the FULL twin's; returns the compressed events."""
    rows: dict[tuple[str, str, str], list[Any]] = {}
    zipped = 0
    for event in captured:
        schema, image = event.table.schema.rsplit("_", 1)
        if image not in ("full", "zip"):
            continue
        if event.changes is None:
            got = decode.decode_rows(decode.TableSchema.of(event.table), event.data,
                                     event.checksum)
            zipped += 1
        else:
            got = [(c.before, c.after) for c in event.changes]
        rows.setdefault((image, schema, event.table.table), []).extend(
            (exact(before), exact(after)) for before, after in got)
    tables = [key for key in rows if key[0] == "zip"]
    assert len(tables) >= len(ZIPPED)
    for _, schema, table in tables:
        assert rows[("zip", schema, table)] == rows[("full", schema, table)], (schema, table)
    return zipped


def schemas_of(prefix: str, cases: list[Case], images: tuple[str, ...]
               ) -> tuple[dict[tuple[str, str], str], str]:
    """A schema per case and row image it runs under, and the other schema, named uniquely
    after ``prefix``."""
    run = f"{prefix}{uuid.uuid4().hex[:6]}"
    return ({(case.id, image): f"{run}_{case.id.replace('-', '_')}_{image.lower()}"
             for case in cases for image in images if runs(case, image)}, f"{run}_other")


def test_worker_decoder_equals_the_librarys_reading(sandbox, captured) -> None:
    source = Database(sandbox, "source")
    cases = [*ROWS_CASES, *EXTRA]
    schemas, other = schemas_of("dc", cases, (*IMAGES, "ZIP"))
    try:
        source.execute(f"CREATE DATABASE {q(other)}")
        start = master(source)
        run_cases(sandbox, source, schemas, cases, other)
        end = master(source)
        server = sandbox.servers()["source"]
        endpoint = DataSource("source", "127.0.0.1", server.port, "setl",
                              SecretRef(f"file:{sandbox.secret_file}"))
        wanted = set(schemas.values())
        libreader.read(endpoint, start, end, wanted.__contains__, 7201, lambda one: (
            captured.append(Captured(one.data, one.table, one.checksum, one.changes))))
    finally:
        source.script("SET GLOBAL mysql56_temporal_format = ON",
                      "SET GLOBAL log_bin_compress = OFF",
                      "SET GLOBAL log_bin_compress_min_len = DEFAULT")
        for schema in [*schemas.values(), other]:
            source.execute(f"DROP DATABASE IF EXISTS {q(schema)}")
        source.close()
    by_image: Counter[str] = Counter()
    partial_by_image: Counter[str] = Counter()
    rows = 0
    for event in captured:
        if event.changes is None:
            continue  # compressed: below
        schema = decode.TableSchema.of(event.table)
        schema = pickle.loads(pickle.dumps(schema))  # as a worker gets it
        want = [(exact(c.before), exact(c.after)) for c in event.changes]
        where = f"{schema.schema}.{schema.table} at {decode.next_position(event.data)}"
        for data, checksum in ((event.data, event.checksum),
                               (as_v2(event.data, event.checksum), event.checksum),
                               (as_v2(event.data, event.checksum, b""), event.checksum),
                               (without_checksum(event.data), False)):
            if partial(event):  # a column left out would be written as NULL: refused
                with pytest.raises(SourceError, match="binlog_row_image = FULL"):
                    decode.decode_rows(schema, data, checksum)
                continue
            got = decode.decode_rows(schema, data, checksum)
            assert [(exact(b), exact(a)) for b, a in got] == want, where
            guessed = schema._decoder.guess[data[5]](data, checksum)  # now without fallback
            assert [(exact(b), exact(a)) for b, a in guessed] == want, where
        image = schema.schema.rsplit("_", 1)[-1].upper()
        by_image[image] += 1
        partial_by_image[image] += partial(event)
        rows += len(want)
    assert rows > 3000 and set(by_image) == {*IMAGES, "ZIP"}, by_image
    assert {c.type for e in captured for c in e.table.columns} >= TYPES
    # partial images were met (and refused): MINIMAL leaves out all but the key in the
    # before image of every update and delete, NOBLOB the unchanged BLOB/TEXT columns
    assert partial_by_image["FULL"] == partial_by_image["ZIP"] == 0
    assert partial_by_image["MINIMAL"] > 60, partial_by_image
    assert partial_by_image["NOBLOB"] > 10, partial_by_image
    assert compressed_equal_their_twins(captured) > 30
