"""The workers' row decoder on rows events built by hand: the shapes a server rarely writes
(V2 with extra data, truncated events, types setl does not decode, 300 columns) and the
errors, with no server. tests/integration/test_decode.py checks values against Select's
reader on a real binlog."""

from __future__ import annotations

import datetime
import decimal
import pickle
import struct
import zlib
from types import SimpleNamespace

import pytest

from node.extract import decode
from node.extract.decode import ColumnSpec, TableSchema, decode_rows
from shared.errors import SourceError

WRITE, UPDATE, DELETE = 23, 24, 25
NEXT = 4242  # the events' next position: errors name it
SYSBENCH = TableSchema("sbtest", "sbtest1", (
    ColumnSpec("id", 3), ColumnSpec("k", 3), ColumnSpec("c", 254, charset="utf8", max_length=480),
    ColumnSpec("pad", 254, charset="cp1252", max_length=60)), ("id",))


def packet(event_type: int, body: bytes, checksum: bool = True, extra: bytes = b"",
           table: int = 77) -> bytes:
    """A rows event as pymysql reads it from the stream: OK byte, header, post-header (V2:
    with ``extra`` data), body and CRC32."""
    post = table.to_bytes(6, "little") + b"\x01\x00"
    if event_type in (30, 31, 32, 169, 170, 171):
        post += (2 + len(extra)).to_bytes(2, "little") + extra
    size = 19 + len(post) + len(body) + (4 if checksum else 0)
    event = struct.pack("<IBIIIH", 1_700_000_000, event_type, 1, size, NEXT, 0) + post + body
    return b"\x00" + event + (zlib.crc32(event).to_bytes(4, "little") if checksum else b"")


def rows_body(count: int, bitmaps: list[bytes], *rows: bytes) -> bytes:
    return bytes([count]) + b"".join(bitmaps) + b"".join(rows)


def sysbench_row(id_: int, k: int, c: bytes, pad: bytes, nulls: int = 0) -> bytes:
    return bytes([nulls]) + struct.pack("<iiH", id_, k, len(c)) + c + bytes([len(pad)]) + pad


ROW1 = sysbench_row(1, 10, "ü-c".encode(), b"pad\x81\xe9")  # MariaDB latin1 keeps 0x81
ROW2 = sysbench_row(2, 20, b"c2", b"")
IMAGE1 = {"id": 1, "k": 10, "c": "ü-c", "pad": "pad\x81é"}
IMAGE2 = {"id": 2, "k": 20, "c": "c2", "pad": ""}


@pytest.mark.parametrize("checksum", [True, False])
@pytest.mark.parametrize(("version", "extra"), [(1, b""), (2, b""), (2, b"\x01\x02\x00\x09")])
def test_inserts_updates_and_deletes_in_v1_and_v2_with_or_without_checksum(
        checksum: bool, version: int, extra: bytes) -> None:
    shift = 0 if version == 1 else 7  # V2: 30-32
    insert = packet(WRITE + shift, rows_body(4, [b"\x0f"], ROW1, ROW2), checksum, extra)
    update = packet(UPDATE + shift, rows_body(4, [b"\x0f", b"\x0f"], ROW1, ROW2), checksum,
                    extra)
    delete = packet(DELETE + shift, rows_body(4, [b"\x0f"], ROW2), checksum, extra)
    assert decode_rows(SYSBENCH, insert, checksum) == [(None, IMAGE1), (None, IMAGE2)]
    assert decode_rows(SYSBENCH, update, checksum) == [(IMAGE1, IMAGE2)]
    assert decode_rows(SYSBENCH, delete, checksum) == [(IMAGE2, None)]


def test_header_helpers_read_fixed_offsets() -> None:
    data = packet(WRITE, rows_body(4, [b"\x0f"], ROW1), table=0x0102030405)
    assert decode.event_type(data) == WRITE
    assert decode.event_timestamp(data) == 1_700_000_000
    assert decode.table_id(data) == 0x0102030405
    assert decode.next_position(data) == NEXT


def test_nulls_leave_columns_none_in_table_order() -> None:
    nulls = bytes([0b0101]) + struct.pack("<i", 20) + b"\x02p2"  # id and c NULL
    got = decode_rows(SYSBENCH, packet(WRITE, rows_body(4, [b"\x0f"], nulls)), True)
    assert got == [(None, {"id": None, "k": 20, "c": None, "pad": "p2"})]
    assert list(got[0][1]) == ["id", "k", "c", "pad"]


@pytest.mark.parametrize("unused", [0x00, 0xF0, 0x50])
def test_null_bitmap_bits_past_the_columns_are_ignored(unused: int) -> None:
    """MariaDB sets them to 1: a row without NULLs is still one."""
    row = bytes([unused]) + ROW1[1:]
    assert decode_rows(SYSBENCH, packet(WRITE, rows_body(4, [b"\x0f"], row)), True) == [
        (None, IMAGE1)]
    nulls = bytes([unused | 0b0100]) + struct.pack("<i", 1) + struct.pack("<i", 10) + b"\x01z"
    assert decode_rows(SYSBENCH, packet(WRITE, rows_body(4, [b"\x0f"], nulls)), True) == [
        (None, {"id": 1, "k": 10, "c": None, "pad": "z"})]


def test_the_last_bitmaps_reader_is_guessed_and_other_bitmaps_still_decode() -> None:
    schema = TableSchema("s", "guess", SYSBENCH.columns)
    full = packet(WRITE, rows_body(4, [b"\x0f"], ROW1))
    other = packet(WRITE, rows_body(4, [b"\xff"], ROW2))  # bits past the columns set
    assert decode_rows(schema, full, True) == [(None, IMAGE1)]
    decoder = schema._decoder
    assert decoder is not None
    guessed = decoder.guess[WRITE]
    assert guessed(full, True) == [(None, IMAGE1)]  # the whole event in one call
    assert decode_rows(schema, other, True) == [(None, IMAGE2)]
    assert decoder.guess[WRITE] is not guessed
    assert decode_rows(schema, full, True) == [(None, IMAGE1)]
    assert decoder.guess[WRITE] is guessed and decoder.guess[DELETE] == decoder.checked
    assert "truncated" in errors(schema, full[:-1])  # the guess checks, the checked way says


def test_a_zero_row_event_has_no_rows() -> None:
    assert decode_rows(SYSBENCH, packet(WRITE, rows_body(4, [b"\x0f"])), True) == []


def wide_schema(count: int) -> TableSchema:
    return TableSchema("s", "wide", tuple(
        ColumnSpec(f"c{i}", (3, 15, 1)[i % 3], i % 3 == 2, "utf8", max_length=20)
        for i in range(count)))


@pytest.mark.parametrize("count", [9, 33, 300])  # NULL bitmap of 2, 5 and 38 bytes
def test_wide_tables_with_long_bitmaps_and_a_three_byte_column_count(count: int) -> None:
    schema = wide_schema(count)
    size = (count + 7) // 8
    values = [(-i, f"v{i}".encode(), 200 + i % 50)[i % 3] for i in range(count)]
    nulls = bytearray(size)
    row = b""
    for i, value in enumerate(values):
        if i % 7 == 3:
            nulls[i >> 3] |= 1 << (i & 7)
        elif isinstance(value, bytes):
            row += bytes([len(value)]) + value
        else:
            row += struct.pack("<i" if i % 3 == 0 else "<B", value)
    counted = bytes([count]) if count < 251 else b"\xfc" + count.to_bytes(2, "little")
    body = counted + b"\xff" * size + bytes(nulls) + row
    want = {f"c{i}": None if i % 7 == 3 else v.decode() if isinstance(v, bytes) else v
            for i, v in enumerate(values)}
    assert decode_rows(schema, packet(WRITE, body), True) == [(None, want)]
    no_nulls = b"".join(bytes([len(v)]) + v if isinstance(v, bytes) else
                        struct.pack("<i" if i % 3 == 0 else "<B", v)
                        for i, v in enumerate(values))
    assert decode_rows(schema, packet(DELETE, counted + b"\xff" * size + bytes(size) + no_nulls),
                       True)[0][0] == {f"c{i}": v.decode() if isinstance(v, bytes) else v
                                       for i, v in enumerate(values)}


def test_values_of_every_other_type_from_their_bytes() -> None:
    schema = TableSchema("s", "t", (
        ColumnSpec("dec", 246, precision=10, decimals=4), ColumnSpec("mi", 9),
        ColumnSpec("y", 13), ColumnSpec("bit", 16, bits=10),
        ColumnSpec("e", 247, charset="cp1252", size=1, enum_values=(b"a", b"\xe9")),
        ColumnSpec("s", 248, charset="utf8", size=1, set_values=(b"x", b"y", b"z")),
        ColumnSpec("dt", 18, fsp=3), ColumnSpec("ts", 17, fsp=0), ColumnSpec("d", 10),
        ColumnSpec("g", 255, length_size=4), ColumnSpec("b", 252, charset="binary",
                                                         length_size=2)))
    dt = ((2021 * 13 + 2) << 22 | 31 << 17 | 13 << 12 | 14 << 6 | 15) + 0x8000000000
    row = (b"\x00\x00"
           + bytes([0x80, 0x30, 0x39]) + (5000).to_bytes(2, "big")  # 12345.5000
           + (-5).to_bytes(3, "little", signed=True) + bytes([124]) + (0x3ff).to_bytes(2, "big")
           + bytes([2]) + bytes([0b101])
           + dt.to_bytes(5, "big") + (1230).to_bytes(2, "big")  # 2021-02-31 (invalid): text
           + (0).to_bytes(4, "big")  # the zero TIMESTAMP
           + (2024 << 9 | 2 << 5 | 29).to_bytes(3, "little")
           + (3).to_bytes(4, "little") + b"\x01\x02\x03" + b"\x00\x00")
    assert decode_rows(schema, packet(WRITE, rows_body(11, [b"\xff\x07"], row)), True) == [(None, {
        "dec": decimal.Decimal("12345.5000"), "mi": -5, "y": 2024, "bit": 1023, "e": "é",
        "s": "x,z", "dt": "2021-02-31 13:14:15.123", "ts": "0000-00-00 00:00:00",
        "d": datetime.date(2024, 2, 29), "g": b"\x01\x02\x03", "b": ""})]


@pytest.mark.parametrize("seconds, fraction, expected", [
    (2**31 - 1, 0, datetime.datetime(2038, 1, 19, 3, 14, 7)),
    (2**31, 0, datetime.datetime(2038, 1, 19, 3, 14, 8)),  # MariaDB 11.5+ goes on to 2106
    (2**32 - 1, 999999, datetime.datetime(2106, 2, 7, 6, 28, 15, 999999)),
    (1, 5, datetime.datetime(1970, 1, 1, 0, 0, 1, 5)),
])
def test_a_timestamp_past_2038_is_read_as_the_server_stores_it(
        seconds: int, fraction: int, expected: datetime.datetime) -> None:
    """Its seconds are unsigned: read signed, 2038-01-19 03:14:08 was 1901-12-13."""
    schema = TableSchema("s", "t", (ColumnSpec("ts", 17, fsp=6),))
    row = b"\x00" + seconds.to_bytes(4, "big") + fraction.to_bytes(3, "big")
    assert decode_rows(schema, packet(WRITE, rows_body(1, [b"\x01"], row)), True) == [
        (None, {"ts": expected})]


def test_a_table_schema_pickles_without_its_compiled_readers() -> None:
    insert = packet(WRITE, rows_body(4, [b"\x0f"], ROW1))
    assert decode_rows(SYSBENCH, insert, True)  # compiles and keeps a reader on the instance
    copy = pickle.loads(pickle.dumps(SYSBENCH))
    assert copy == SYSBENCH and hash(copy) == hash(SYSBENCH)
    assert "_decoder" in SYSBENCH.__dict__ and "_decoder" not in copy.__dict__
    assert b"_decoder" not in pickle.dumps(SYSBENCH)
    assert decode_rows(copy, insert, True) == decode_rows(SYSBENCH, insert, True)


def library_table(**columns: SimpleNamespace) -> SimpleNamespace:
    return SimpleNamespace(schema="db", table="t", primary_key="id", columns=[
        SimpleNamespace(name=name, **attrs.__dict__) for name, attrs in columns.items()])


def test_a_schema_is_made_from_the_librarys_table_by_its_attributes() -> None:
    table = library_table(
        id=SimpleNamespace(type=3, unsigned=True, character_set_name=None),
        v=SimpleNamespace(type=15, unsigned=False, character_set_name="cp1252", max_length=300),
        e=SimpleNamespace(type=247, unsigned=False, character_set_name="utf8", size=1,
                          enum_values=["", b"a", b"b"], set_values=None))
    schema = TableSchema.of(table)
    assert schema == TableSchema("db", "t", (
        ColumnSpec("id", 3, True), ColumnSpec("v", 15, charset="cp1252", max_length=300),
        ColumnSpec("e", 247, charset="utf8", size=1, enum_values=(b"a", b"b"))), ("id",))
    table.primary_key = ("a", "b")
    assert TableSchema.of(table).primary_key == ("a", "b")
    table.primary_key = ""
    assert TableSchema.of(table).primary_key == ()


def test_a_table_map_without_names_or_with_text_members_is_refused() -> None:
    nameless = SimpleNamespace(schema="db", table="t", primary_key="", columns=[
        SimpleNamespace(name=None, type=3)])
    with pytest.raises(SourceError, match=r"db\.t has no column names.*binlog_row_metadata=FULL"):
        TableSchema.of(nameless)
    decoded = library_table(e=SimpleNamespace(type=247, size=1, enum_values=["", "a"]))
    with pytest.raises(SourceError, match=r"members of db\.t\.e were decoded as text"):
        TableSchema.of(decoded)


def errors(schema: TableSchema, data: bytes, checksum: bool = True) -> str:
    with pytest.raises(SourceError) as raised:
        decode_rows(schema, data, checksum)
    return str(raised.value)


def test_a_truncated_event_names_table_and_position() -> None:
    whole = packet(WRITE, rows_body(4, [b"\x0f"], ROW1, ROW2))
    message = errors(SYSBENCH, whole[:-10])
    assert "sbtest.sbtest1" in message and f"position {NEXT}" in message
    assert "truncated" in message
    cut = packet(WRITE, rows_body(4, [b"\x0f"], ROW1, ROW2[:-3]))  # the header agrees
    message = errors(SYSBENCH, cut)
    assert "sbtest.sbtest1" in message and f"position {NEXT}" in message
    assert "past the end of the event" in message
    short = errors(SYSBENCH, packet(WRITE, rows_body(4, [b"\x0f"], ROW1[:4])))
    assert f"position {NEXT}" in short


def test_a_checksum_taken_for_row_bytes_is_caught() -> None:
    """Decoded as if without a checksum, the CRC's four bytes are read as a row: it runs
    past the event's end instead of making up a row."""
    message = errors(SYSBENCH, packet(WRITE, rows_body(4, [b"\x0f"], ROW1)), checksum=False)
    assert f"position {NEXT}" in message


@pytest.mark.parametrize(("event_type", "says"), [
    (39, "binlog_row_value_options"), (2, "event type 2"), (165, "event type 165")])
def test_events_setl_does_not_decode_are_refused_with_what_to_do(event_type: int,
                                                                 says: str) -> None:
    message = errors(SYSBENCH, packet(event_type, rows_body(4, [b"\x0f"], ROW1)))
    assert says in message and "sbtest.sbtest1" in message and f"position {NEXT}" in message


def compressed(rows: bytes, size: int = 2, head: int = 0x80) -> bytes:
    """Rows as MariaDB's log_bin_compress writes them: header byte, length, zlib stream."""
    return bytes([head | size]) + len(rows).to_bytes(size, "big") + zlib.compress(rows)


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_mariadb_compressed_rows_events_are_inflated(size: int) -> None:
    """log_bin_compress=ON: 166-168 (V1 post-header; what MariaDB writes), 169-171 (V2)."""
    rows = ROW1 + ROW2
    for event_type, extra in ((166, b""), (169, b"\x01\x02\x00\x09"), (169, b"")):
        data = packet(event_type, rows_body(4, [b"\x0f"], compressed(rows, size)), extra=extra)
        assert decode_rows(SYSBENCH, data, True) == [(None, IMAGE1), (None, IMAGE2)]
    update = packet(167, rows_body(4, [b"\x0f", b"\x0f"], compressed(rows, size)))
    assert decode_rows(SYSBENCH, update, True) == [(IMAGE1, IMAGE2)]
    delete = packet(171, rows_body(4, [b"\x0f"], compressed(ROW2, size)), False)
    assert decode_rows(SYSBENCH, delete, False) == [(IMAGE2, None)]


@pytest.mark.parametrize(("body", "says"), [
    (compressed(ROW1)[:-3], "do not inflate"), (compressed(ROW1, head=0x90), "not zlib's"),
    (b"\x82\x00\x05" + zlib.compress(ROW1), "inflate to"),
    (compressed(ROW1[:-2]), "past the end"),
    (b"\x84\xff\xff\xff\xf0" + zlib.compress(ROW1), "more than zlib can make")])
def test_damaged_compressed_rows_are_refused(body: bytes, says: str) -> None:
    message = errors(SYSBENCH, packet(166, rows_body(4, [b"\x0f"], body)))
    assert says in message and f"position {NEXT}" in message and "sbtest.sbtest1" in message


@pytest.mark.parametrize("kind", [WRITE, 31, 32])
def test_rows_whose_bitmaps_name_no_column_are_refused_not_read_forever(kind: int) -> None:
    """Rows of no column take no bytes: read as rows, the event would never end."""
    bitmaps = [b"\x00"] * (2 if kind == 31 else 1)
    message = errors(SYSBENCH, packet(kind, rows_body(4, bitmaps, b"\x00\x00\x00")))
    assert "lack column(s) id, k, c, pad" in message and f"position {NEXT}" in message


@pytest.mark.parametrize(("kind", "bitmaps"), [
    (UPDATE, [b"\x01", b"\x04"]),  # MINIMAL: the key before, the changed column after
    (UPDATE, [b"\x0f", b"\x05"]),  # NOBLOB-like: an after image without two columns
    (DELETE, [b"\x01"]), (WRITE, [b"\x07"])])
def test_partial_row_images_are_refused_not_written_with_nulls(kind: int,
                                                               bitmaps: list[bytes]) -> None:
    """binlog_row_image = MINIMAL (a session can set it): a column not in an image was
    decoded as NULL, and the update became an upsert of NULLs over the row."""
    row = b"\x00" + struct.pack("<i", 1)
    message = errors(SYSBENCH, packet(kind, rows_body(4, bitmaps, row, row)))
    assert "binlog_row_image = FULL" in message and f"position {NEXT}" in message


def test_the_year_0000_is_0_and_others_count_from_1900() -> None:
    schema = TableSchema("s", "t", (ColumnSpec("id", 3), ColumnSpec("y", 13)))
    rows = b"".join(b"\x00" + struct.pack("<iB", n, stored)
                    for n, stored in ((1, 0), (2, 1), (3, 255)))
    assert [after for _, after in decode_rows(schema, packet(WRITE, rows_body(2, [b"\x03"],
                                                                             rows)), True)] \
        == [{"id": 1, "y": 0}, {"id": 2, "y": 1901}, {"id": 3, "y": 2155}]


def test_v2_extra_data_shorter_than_its_length_is_refused() -> None:
    data = bytearray(packet(30, rows_body(4, [b"\x0f"], ROW1)))
    data[28:30] = b"\x01\x00"
    assert "extra data is 1 bytes long" in errors(SYSBENCH, bytes(data))


def test_a_few_bytes_are_not_an_event() -> None:
    assert "too short" in errors(SYSBENCH, b"\x00\x01\x02")


def test_a_column_count_that_is_not_the_table_maps_is_refused() -> None:
    message = errors(SYSBENCH, packet(WRITE, rows_body(5, [b"\x1f"], ROW1)))
    assert "5 columns, the table map 4" in message


@pytest.mark.parametrize(("kind", "says"), [
    (245, "MySQL's binary JSON"), (253, "VAR_STRING"), (0, "DECIMAL (pre-5.0)"),
    (200, "type 200")])
def test_a_column_type_setl_does_not_decode_fails_only_when_a_value_is_there(
        kind: int, says: str) -> None:
    schema = TableSchema("s", "t", (ColumnSpec("id", 3), ColumnSpec("x", kind, length_size=4)))
    null = packet(WRITE, rows_body(2, [b"\x03"], b"\x02" + struct.pack("<i", 1)))
    assert decode_rows(schema, null, True) == [(None, {"id": 1, "x": None})]
    value = packet(WRITE, rows_body(2, [b"\x03"], b"\x00" + struct.pack("<i", 1) + b"\x00" * 8))
    message = errors(schema, value)
    assert "column 'x'" in message and says in message and "s.t" in message


@pytest.mark.parametrize(("column", "raw", "says"), [
    (ColumnSpec("t", 11), (0x800000 | 1).to_bytes(3, "little"), "negative TIME"),
    (ColumnSpec("t", 11), (1261).to_bytes(3, "little"), "TIME(n)"),  # 00:12:61
    (ColumnSpec("dt", 12), (20201301000000).to_bytes(8, "little"), "DATETIME(n)"),
    (ColumnSpec("e", 247, size=1, enum_values=(b"a",)), b"\x02", "ENUM index 2"),
    (ColumnSpec("e", 247, size=1), b"\x01", "no members of this ENUM"),
    (ColumnSpec("v", 15, charset="utf8", max_length=10), b"\x02\xff\xfe", "UnicodeDecodeError"),
])
def test_values_select_would_misread_fail_naming_the_column(column: ColumnSpec, raw: bytes,
                                                            says: str) -> None:
    schema = TableSchema("s", "t", (ColumnSpec("id", 3), column))
    message = errors(schema, packet(WRITE, rows_body(
        2, [b"\x03"], b"\x00" + struct.pack("<i", 1) + raw)))
    assert f"column {column.name!r}" in message and says in message
    assert f"position {NEXT}" in message


def test_pre_5_6_temporals_decode_as_select_reads_them() -> None:
    schema = TableSchema("s", "t", (ColumnSpec("t", 11), ColumnSpec("dt", 12),
                                    ColumnSpec("ts", 7)))
    row = (b"\x00" + (8385959).to_bytes(3, "little") + (20200015010203).to_bytes(8, "little")
           + (1).to_bytes(4, "little"))
    zero = b"\x00" + bytes(3 + 8 + 4)
    assert decode_rows(schema, packet(WRITE, rows_body(3, [b"\x07"], row, zero)), True) == [
        (None, {"t": datetime.timedelta(hours=838, minutes=59, seconds=59),
                "dt": "2020-00-15 01:02:03", "ts": datetime.datetime(1970, 1, 1, 0, 0, 1)}),
        (None, {"t": datetime.timedelta(0), "dt": "0000-00-00 00:00:00",
                "ts": "0000-00-00 00:00:00"})]


def test_a_bulk_events_rows_are_estimated_from_what_one_row_events_taught() -> None:
    """Select counts a batch's rows from its events' sizes and what Extract learned from the
    last ones: a stream of one-row events must not make a 500-row event look like fewer
    rows (each one-row event's head — header, bitmap, checksum — is not a row's)."""
    from array import array

    from node.extract.job import Part, decoded
    from node.select.binlog import BinlogReader
    from node.select.framing import estimate

    row = sysbench_row(2, 20, b"c" * 20, b"p" * 10)
    singles = [packet(WRITE, rows_body(4, [b"\x0f"], row)) for _ in range(50)]
    part = Part({1: SYSBENCH}, b"".join(singles), array("I", map(len, singles)),
                array("I", [1] * 50), array("I", range(50)))
    sizes: dict[int, list[int]] = {}
    assert len(decoded(part, True, sizes)) == 50
    reader = SimpleNamespace(row_bytes={1: (SYSBENCH.event_head(), float(SYSBENCH.row_bytes()))})
    BinlogReader.learn(reader, {1: (sizes[1][0], sizes[1][1])})  # type: ignore[arg-type]
    learned = reader.row_bytes[1]
    assert estimate(len(singles[0]), learned) == 1
    bulk = packet(WRITE, rows_body(4, [b"\x0f"], *[row] * 500))
    assert len(decode_rows(SYSBENCH, bulk, True)) == 500
    assert 475 <= estimate(len(bulk), learned) <= 525
    assert estimate(10, learned) == 1  # never less than one row
