"""Binlog events of files written under another ``binlog_checksum`` than the stream's: each
file's format description says whether its events end with a CRC32; a rotate event says it
itself (the one the server makes at the stream's start comes before any description); a
rows event of such a file is made as the stream's, so that Extract reads every event alike."""

from __future__ import annotations

import zlib


def described(data: bytes) -> bool:
    """Whether a format description's file has CRC32s: it always ends with its checksum
    algorithm and four bytes."""
    return data[-5] == 1


def has_crc(data: bytes) -> bool:
    """Whether an event (after the packet's OK byte) ends with the CRC32 of the rest."""
    return len(data) > 24 and zlib.crc32(data[1:-4]) == int.from_bytes(data[-4:], "little")


def as_stream(data: bytes, crc: bool) -> bytes:
    """A rows event made as the stream's (``crc``: whether the stream's end with a CRC32):
    its CRC32 taken off, or four bytes added for one (nothing reads them), and the event's
    size in its header changed to match (Extract checks it)."""
    body = data + b"\0\0\0\0" if crc else data[:-4]
    return body[:10] + (len(body) - 1).to_bytes(4, "little") + body[14:]
