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
_serving = threading.local()


@contextmanager
def serving(name: str, data: bytes) -> Iterator[None]:
    """Serve ``data`` as the file ``name`` while this thread runs a statement."""
    _serving.file = (name, data)
    try:
        yield
    finally:
        _serving.file = None


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
