"""Events of a binlog file of another checksum setting than the stream's, made as its."""

from __future__ import annotations

import struct
import zlib

from node.select.checksums import as_stream, has_crc


def event(body: bytes, crc: bool) -> bytes:
    """A packet: the OK byte, the 19-byte header (its size field right), the body, a CRC."""
    size = 19 + len(body) + (4 if crc else 0)
    raw = struct.pack("<IBIIIH", 1_700_000_000, 23, 1, size, 4242, 0) + body
    return b"\0" + raw + (zlib.crc32(raw).to_bytes(4, "little") if crc else b"")


def test_a_rows_event_is_made_as_the_streams_either_way() -> None:
    with_crc, without = event(b"rows of a table", True), event(b"rows of a table", False)
    assert has_crc(with_crc) and not has_crc(without)
    assert as_stream(with_crc, crc=False) == without
    made = as_stream(without, crc=True)
    assert made[:-4] == with_crc[:-4] and len(made) == len(with_crc)
    assert int.from_bytes(made[10:14], "little") == len(made) - 1  # what Extract checks
