"""Replication packets read straight off the stream connection's socket.

PyMySQL reads a packet in two buffered reads, joins its pieces and wraps it in a
``MysqlPacket``: several microseconds a packet, which on ``oltp_write_only`` (ten binlog
events a transaction) was a large part of Select. Here the socket is read in large chunks
and packets are cut out of the buffer; what comes out is each packet's payload as
``bytes``, exactly what ``MysqlPacket._data`` would hold.
"""

from __future__ import annotations

import errno
from typing import Any

import pymysql
from pymysql.constants import CR

from shared.errors import SourceError

CHUNK = 1 << 18  # bytes asked of the socket at once
MAX_PACKET = 0xFFFFFF  # a payload this long continues in the next packet


class PacketReader:
    """The packets of one replication stream, in order (sequence numbers checked)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._file = connection._rfile
        self._seq = connection._next_seq_id
        self._buffer = b""
        self._at = 0
        sock = connection._sock
        if connection._current_timeout != connection._read_timeout:
            sock.settimeout(connection._read_timeout)
            connection._current_timeout = connection._read_timeout

    def _fill(self, needed: int) -> None:
        """Make ``needed`` bytes available from ``self._at`` on."""
        pieces = [self._buffer[self._at:]]
        have = len(pieces[0])
        while have < needed:
            try:
                chunk = self._file.read1(max(CHUNK, needed - have))
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                self._connection._force_close()
                raise pymysql.err.OperationalError(
                    CR.CR_SERVER_LOST, f"Lost connection to the binlog stream ({exc})") from None
            if not chunk:
                self._connection._force_close()
                raise pymysql.err.OperationalError(CR.CR_SERVER_LOST,
                                                   "Lost connection to the binlog stream")
            pieces.append(chunk)
            have += len(chunk)
        self._buffer, self._at = b"".join(pieces), 0

    def _payload(self) -> tuple[bytes, int]:
        if len(self._buffer) - self._at < 4:
            self._fill(4)
        buffer, at = self._buffer, self._at  # (byte by byte: typed C reads once compiled)
        length = buffer[at] | buffer[at + 1] << 8 | buffer[at + 2] << 16
        seq = buffer[at + 3]
        if seq != self._seq:
            self._connection._force_close()
            raise pymysql.err.OperationalError(
                CR.CR_SERVER_LOST, f"binlog stream out of step: packet {seq}, expected "
                                   f"{self._seq}")
        self._seq = (self._seq + 1) % 256
        if len(self._buffer) - self._at < 4 + length:
            self._fill(4 + length)
        start = self._at + 4
        self._at = start + length
        return self._buffer[start:self._at], length

    def next(self) -> bytes:
        """The next event packet's payload (OK byte first); raises the server's error."""
        data, length = self._payload()
        while length == MAX_PACKET:  # a payload of 16 MiB or more comes in pieces
            more, length = self._payload()
            data += more
        first = data[0] if data else 0xFF
        if first == 0:
            return data
        if first == 0xFF:
            self._connection._force_close()
            pymysql.err.raise_mysql_exception(data)
        if first == 0xFE and len(data) < 9:
            raise SourceError("the source ended the binlog stream (EOF packet)")
        raise SourceError(f"the binlog stream sent a packet of unknown kind {first:#x}")
