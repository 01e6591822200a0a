"""Rows events made without a server, for benchmarks of the job that decodes them.

Only what a benchmark table needs: ``INT`` and ``VARCHAR(255)`` columns (utf8mb4), no NULLs,
WRITE_ROWS_EVENT_V1 as MariaDB writes it, packets as the replication stream delivers them
(OK byte, 19-byte header, body, CRC32).
"""

from __future__ import annotations

import struct
import zlib

from node.extract.decode import ColumnSpec, TableSchema

INT, VARCHAR = 3, 15
WRITE_ROWS_V1 = 23
ROWS_PER_EVENT = 40  # about what MariaDB puts in its 8 KiB rows events for such rows


def schema(name: str, columns: list[tuple[str, int]], key: str = "id") -> TableSchema:
    """A table layout as the node's Select gives it (from a table map)."""
    return TableSchema("bench", name, tuple(
        ColumnSpec(column, kind, charset="utf8" if kind == VARCHAR else None,
                   max_length=1020 if kind == VARCHAR else 0) for column, kind in columns),
        (key,))


def _row(columns: tuple[ColumnSpec, ...], row: tuple[object, ...]) -> bytes:
    out = bytearray(b"\0" * ((len(columns) + 7) // 8))  # no NULLs
    for column, value in zip(columns, row, strict=True):
        if column.type == INT:
            out += struct.pack("<i", value)
        else:
            text = str(value).encode()
            out += struct.pack("<H", len(text)) + text
    return bytes(out)


def write_rows(layout: TableSchema, table_id: int, rows: list[tuple[object, ...]],
               timestamp: int = 1_700_000_000) -> bytes:
    """One WRITE_ROWS_EVENT_V1 packet holding ``rows``."""
    count = len(layout.columns)
    body = table_id.to_bytes(6, "little") + b"\1\0" + bytes([count]) + \
        b"\xff" * ((count + 7) // 8) + b"".join(_row(layout.columns, row) for row in rows)
    size = 19 + len(body) + 4
    header = struct.pack("<IBIIIH", timestamp, WRITE_ROWS_V1, 1, size, 0, 0)
    event = header + body
    return b"\0" + event + struct.pack("<I", zlib.crc32(event))


def insert_events(layout: TableSchema, table_id: int, rows: list[tuple[object, ...]]
                  ) -> list[bytes]:
    return [write_rows(layout, table_id, rows[at:at + ROWS_PER_EVENT])
            for at in range(0, len(rows), ROWS_PER_EVENT)]
