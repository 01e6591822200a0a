"""The library's readers of table maps and query events that setl uses, made exact.

Part of the binlog adapter (:mod:`node.select.binlog`); nothing else touches the library.
Select reads rows events as bytes (the Spark workers decode them), but it takes table maps and
query events from python-mysql-replication 1.0.x, whose readers lose what setl needs:

- **ENUM and SET members** in a table map were decoded as UTF-8 whatever their column's
  charset (a latin1 ``'é'`` became ``''``): they stay bytes here, and
  :func:`node.charsets.member` decodes them with their column's charset.
- **Two-phase ALTERs** (MariaDB's ``binlog_alter_two_phase``): their query events carry a
  status variable the library does not know (``Q_GTID_FLAGS3``), and it stopped at the first
  ALTER. It is read here, and says which part of the ALTER the event is
  (``alter_phase``).
- **Columns of a collation the library does not know** were read as UTF-8: MariaDB
  10.10+'s UCA-14.0 collations (``utf16_uca1400_ai_ci``, ids from 2048; the default for
  ucs2/utf16/utf32 from 11.5) made UTF-16 text arrive as ``'\\x00A\\x00B'``. Those ids are
  read by their charset (:func:`find_charset`); any other id unknown leaves the column's
  values as bytes, written back byte for byte, never decoded by a guess.
- **Statements in a client charset other than UTF-8** (query events): the text was decoded
  as UTF-8 with backslash escapes for other bytes, so a latin1 ``DEFAULT 'é'`` became
  ``'\\xe9'``. The statement's bytes are kept (``query_bytes``) for :mod:`node.ddlsession`
  to decode in the session's charset.

:func:`install` puts these readers on the library's classes; it checks that what it replaces
exists, so a library upgrade that renames it stops setl at start with a clear error instead
of reading with the old bugs. (The library's row readers, which setl does not use, are
corrected for the tests' reference reader in ``tests/librows.py``.)
"""

from __future__ import annotations

from typing import Any

from pymysqlreplication import row_event
from pymysqlreplication.constants import CHARSET
from pymysqlreplication.event import BinLogEvent, QueryEvent
from pymysqlreplication.exceptions import StatusVariableMismatch
from pymysqlreplication.row_event import TableMapEvent

from shared.errors import SetlError

# a query event's status variable (MariaDB 10.8+): the parts of a two-phase ALTER, logged at
# its start and again at its commit or rollback (then with the start's sequence number)
Q_GTID_FLAGS3 = 130
ALTER_STARTED, ALTER_COMMITTED, ALTER_ROLLED_BACK = 2, 4, 8


# MariaDB's UCA-14.0 collations: id 2048 + 256 × the charset's slot + the collation's number
# (information_schema.COLLATION_CHARACTER_SET_APPLICABILITY on 10.11)
UCA1400_BASE = 2048
UCA1400_CHARSETS = ("utf8mb3", "utf8mb4", "ucs2", "utf16", "utf32")
UNKNOWN = "setl-unknown-collation-%d"  # no codec has the name: the values stay bytes


def find_charset(charset_id: Any, dbms: str = "mysql") -> tuple[str, str | None, str | None]:
    """A column's (encoding name, collation, charset) from its collation id, as the
    library's ``find_charset`` gives them; an id it does not know is a UCA-14.0 one of
    MariaDB's, or else none to decode by (the library took UTF-8)."""
    number = int(charset_id)
    charset = CHARSET.charset_by_id(number, dbms)
    slot = (number - UCA1400_BASE) >> 8
    if charset is None and dbms == "mariadb" and 0 <= slot < len(UCA1400_CHARSETS):
        charset = CHARSET.Charset(number, UCA1400_CHARSETS[slot],
                                  f"{UCA1400_CHARSETS[slot]}_uca1400_{number & 255}",
                                  dbms=dbms)
    if charset is None:
        return UNKNOWN % number, None, None
    return charset.encoding, charset.collation, charset.name


def read_type_values(event: Any, length: int) -> list[list[bytes]] | None:
    """The members of each ENUM or SET column of a table map, as bytes."""
    packet = event.packet
    result = []
    end = packet.read_bytes + length
    while packet.read_bytes < end:
        count = packet.read_length_coded_binary()
        result.append([packet.read_variable_length_string() for _ in range(count)])
    return result or None


def read_query_event(event: Any, from_packet: Any, event_size: int, table_map: Any,
                     ctl_connection: Any, **kwargs: Any) -> None:
    """A query event (the library's ``QueryEvent.__init__``, keeping the statement's bytes):
    post-header, status variables (the session: the library's reader of each), schema,
    statement."""
    BinLogEvent.__init__(event, from_packet, event_size, table_map, ctl_connection, **kwargs)
    packet = event.packet
    event.slave_proxy_id = packet.read_uint32()
    event.execution_time = packet.read_uint32()
    event.schema_length = packet.read_uint8()
    event.error_code = packet.read_uint16()
    event.status_vars_length = packet.read_uint16()
    post_header = event._advance_to_payload(13)
    end = packet.read_bytes + event.status_vars_length
    event.alter_phase = 0
    while packet.read_bytes < end:
        key = packet.read_uint8()
        if key != Q_GTID_FLAGS3:
            try:
                event._read_status_vars_value_for_key(key)
            except StatusVariableMismatch:
                raise SetlError(
                    f"a query event carries a session variable setl cannot read (status key "
                    f"{key}: written by a server version newer than this build knows); "
                    "upgrade setl, or replicate from a server version it is tested with "
                    "(MariaDB 10.11)") from None
            continue
        event.alter_phase = packet.read_uint8() & (ALTER_STARTED | ALTER_COMMITTED |
                                                  ALTER_ROLLED_BACK)
        if event.alter_phase & (ALTER_COMMITTED | ALTER_ROLLED_BACK):
            packet.advance(8)  # the start's sequence number
    event.schema = packet.read(event.schema_length)
    packet.advance(1)
    length = event_size - post_header - event.status_vars_length - event.schema_length - 1
    if length < 0:
        raise SetlError(f"a query event of {event_size} bytes is shorter than its headers say "
                        f"({post_header} + {event.status_vars_length} + {event.schema_length})")
    event.query_bytes = packet.read(length)
    # as the library has it, for BEGIN/COMMIT and logs; a DDL is decoded by node.ddlsession
    event.query = event.query_bytes.decode("utf-8", errors="backslashreplace")


_installed = False


def install() -> None:
    """Replace the library's readers (idempotent); refuse a library that lacks them."""
    global _installed
    if _installed:
        return
    missing = [] if "_read_type_values" in TableMapEvent.__dict__ else ["_read_type_values"]
    missing += [name for name in ("_advance_to_payload", "_read_status_vars_value_for_key")
                if not hasattr(QueryEvent, name)]
    missing += [] if hasattr(row_event, "find_charset") else ["row_event.find_charset"]
    if missing:
        raise SetlError(
            f"the installed python-mysql-replication has no {', '.join(missing)} to replace; "
            "setl needs mysql-replication 1.0.x (pip install 'mysql-replication>=1.0.9,<1.1')")
    _installed = True
    TableMapEvent._read_type_values = read_type_values  # type: ignore[method-assign]
    QueryEvent.__init__ = read_query_event  # type: ignore[method-assign]
    row_event.find_charset = find_charset  # (what its table maps call, by that name)
