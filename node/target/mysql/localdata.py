"""The rows of Load's ``LOAD DATA LOCAL INFILE`` statements, sent from memory.

For ``LOCAL INFILE`` the server asks the client for a file by name, and PyMySQL opens
whatever name the server asks for. Here the client never opens a file: the only data it
sends is what the calling thread registered for the statement it is executing
(:func:`serving`); a server asking for anything else — another name, or at a time no
statement of ours waits — gets an error and nothing. So a target cannot read files of the
node, whatever it asks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pymysql
from pymysql import connections
from pymysql.constants import ER

PACKET = 1 << 20  # bytes per packet sent (the server takes up to max_allowed_packet)
# what a server says (a note or a warning) of a value it changed to store it: set to its
# default, fields missing or left over, out of range, cut, an incorrect value
VALUE_CHANGED = frozenset({1261, 1262, 1263, 1264, 1265, 1292, 1366, 1406})
_serving = threading.local()


@contextmanager
def serving(name: str, data: bytes) -> Iterator[None]:
    """Serve ``data`` as the file ``name`` while this thread runs a statement."""
    _serving.file = (name, data)
    try:
        yield
    finally:
        _serving.file = None


def load(cursor: Any, name: str, text: str, data: bytes) -> int:
    """Run the ``LOAD DATA LOCAL`` statement ``text`` with ``data`` as its file ``name``; the
    rows it wrote. ``LOCAL`` makes the server take a value it must change to store (NULL
    into a NOT NULL column becomes 0 or '', a string too long is cut, a number out of range
    clipped) with a warning where an INSERT of the same row fails, whatever the sql_mode:
    a warning fails the statement here (the batch's transaction is not committed), naming
    what the target said."""
    with serving(name, data):
        count = cursor.execute(text)
    result = getattr(cursor, "_result", None)
    if result is not None and getattr(result, "warning_count", 0):
        cursor.execute("SHOW WARNINGS")
        said = [(int(row[1]), str(row[2])) for row in cursor.fetchall()
                if int(row[1]) in VALUE_CHANGED]
        if not said:
            return int(count)
        code = said[0][0]
        shown = "; ".join(message for _, message in said[:5])
        raise pymysql.err.DataError(
            code, f"the target changed values as it loaded them ({result.warning_count} "
                  f"warning(s): {shown}): its columns do not hold the source's values; make "
                  "them as the source's (type, length, NULL), then resume")
    return int(count)


def _send(filename: str | bytes, conn: Any) -> None:
    if isinstance(filename, bytes):  # as the server's packet has it
        filename = filename.decode("utf-8", "replace")
    found = getattr(_serving, "file", None)
    if found is None or found[0] != filename:
        raise pymysql.err.OperationalError(
            ER.FILE_NOT_FOUND, f"the server asked for file {filename!r}; setl sends no file, "
                               "only the rows of its own LOAD DATA statements")
    data = found[1]
    size = max(1024, min(PACKET, int(getattr(conn, "max_allowed_packet", PACKET)) - 1024))
    for start in range(0, len(data), size):
        conn.write_packet(data[start:start + size])


def install() -> None:
    """Put :func:`_send` in PyMySQL's place (idempotent)."""
    connections._send_local_file = _send
