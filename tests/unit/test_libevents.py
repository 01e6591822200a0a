"""node/select/libevents.py: query events read as setl needs them — crafted events, the
library's wrapper around them (the real server's two-phase ALTERs: tests/integration/
test_ddl.py)."""

from __future__ import annotations

import struct
import types

import pytest
from pymysql.protocol import MysqlPacket
from pymysqlreplication.event import QueryEvent
from pymysqlreplication.packet import BinLogPacketWrapper

from node.select import libevents
from shared.errors import SetlError


def query_event(status: bytes, query: bytes = b"ALTER TABLE t ADD c INT") -> bytes:
    """A query event as the stream gives it (an OK byte, the header, no CRC32)."""
    body = struct.pack("<IIBHH", 1, 0, 2, 0, len(status)) + status + b"db\0" + query
    return b"\0" + struct.pack("<IBIIIH", 0, 2, 1, 19 + len(body), 0, 0) + body


def read(data: bytes) -> QueryEvent:
    libevents.install()
    server = types.SimpleNamespace(charset="utf8", _get_dbms=lambda: "mariadb")
    return BinLogPacketWrapper(MysqlPacket(data, "utf8"), {}, server, (10, 11, 0), False,
                               frozenset({QueryEvent}), None, None, None, None, False, False,
                               False, False, False).event


SEQUENCE = (5).to_bytes(8, "little")  # the start's sequence number


@pytest.mark.parametrize("status, phase", [
    (b"", 0),
    (bytes([130, 2]), libevents.ALTER_STARTED),
    (bytes([130, 4]) + SEQUENCE, libevents.ALTER_COMMITTED),
    (bytes([130, 8]) + SEQUENCE + bytes([0x80, 1, 2, 3]), libevents.ALTER_ROLLED_BACK),
    (bytes([1]) + (0).to_bytes(8, "little") + bytes([130, 1]), 0),  # sql_mode; two engines
])
def test_a_two_phase_alters_part_is_read_from_its_query_event(status: bytes,
                                                               phase: int) -> None:
    event = read(query_event(status))
    assert event.alter_phase == phase
    assert event.query == "ALTER TABLE t ADD c INT" and event.schema == b"db"


def test_a_status_variable_setl_does_not_know_stops_with_what_to_do() -> None:
    with pytest.raises(SetlError, match=r"status key 200.*upgrade setl"):
        read(query_event(bytes([200, 1])))


@pytest.mark.parametrize("number, dbms, found", [
    (2816, "mariadb", ("utf16", "utf16_uca1400_0", "utf16")),  # utf16_uca1400_ai_ci
    (2560, "mariadb", ("ucs2", "ucs2_uca1400_0", "ucs2")),
    (3072 + 5, "mariadb", ("utf32", "utf32_uca1400_5", "utf32")),
    (2304, "mariadb", ("utf8", "utf8mb4_uca1400_0", "utf8mb4")),
    (33, "mariadb", ("utf8", "utf8mb3_general_ci", "utf8mb3")),  # known to the library
    (4000, "mariadb", ("setl-unknown-collation-4000", None, None)),  # no guess: bytes
    (2816, "mysql", ("setl-unknown-collation-2816", None, None)),
])
def test_a_columns_collation_id_gives_its_charset(number: int, dbms: str,
                                                  found: tuple) -> None:
    """MariaDB 10.10+'s UCA-14.0 collations (ids from 2048) are read by their charset: the
    library took every id it does not know for UTF-8, and UTF-16 text arrived as
    '\\x00A\\x00B'; any other unknown id leaves the values as bytes."""
    assert libevents.find_charset(str(number), dbms) == found
