"""A faster reader of row images for the binlog library's rows events.

python-mysql-replication reads every column of every row through a chain of method calls,
dictionary look-ups of the table map and one ``packet.read`` each; on ``oltp_write_only``
that was a third of Select's CPU. :func:`read_column_data` replaces the library's
``RowsEvent._read_column_data`` with a loop over a plan made once per table map (what to do
with each column) that reads integers, floats and strings straight from the packet's bytes.
Every other type (decimals, dates and times, BIT, ENUM, SET, JSON, geometry, and the readers
:mod:`node.select.rowvalues` corrects) is read by the library's own reader, with the packet
positioned where it expects it; so each value is the one the library (as corrected) gives.
The schemas corpus (``pytest -m schemas``) checks the result on every type.
"""

from __future__ import annotations

import codecs
import struct
from typing import Any

from pymysqlreplication.bitmap import BitCount
from pymysqlreplication.constants import BINLOG, FIELD_TYPE, NONE_SOURCE
from pymysqlreplication.row_event import RowsEvent
from pymysqlreplication.table import Table

_FIXED = {FIELD_TYPE.TINY: ("<b", "<B"), FIELD_TYPE.SHORT: ("<h", "<H"),
          FIELD_TYPE.LONG: ("<i", "<I"), FIELD_TYPE.LONGLONG: ("<q", "<Q"),
          FIELD_TYPE.FLOAT: ("<f", "<f"), FIELD_TYPE.DOUBLE: ("<d", "<d")}
FIXED, TEXT, LIBRARY = 0, 1, 2  # what a plan does with a column
_PLAN = "_setl_plan"  # kept on the library's Table (a name with "_": not in Table.data)
_DATA = "_setl_data"
_ORIGINAL = RowsEvent.__dict__["_read_column_data"]
_read_values = RowsEvent.__dict__["_RowsEvent__read_values_name"]


def _plan(event: Any) -> list[tuple[Any, ...]] | None:
    return table_plan(event.table_map[event.table_id])


def table_plan(table: Any) -> list[tuple[Any, ...]] | None:
    """Per column: (name, what, how, column, unsigned); None when the library must read the
    table itself (a column without a name, which it looks up)."""
    found = table.__dict__.get(_PLAN, False)
    if found is not False:
        return found  # type: ignore[no-any-return]
    plan: list[tuple[Any, ...]] | None = []
    for column in table.columns:
        if not column.name:
            plan = None
            break
        unsigned = bool(column.unsigned)
        if column.type in _FIXED:
            fmt = struct.Struct(_FIXED[column.type][unsigned])
            plan.append((column.name, FIXED, fmt, column, unsigned))
        elif column.type in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING):
            size = 2 if column.max_length > 255 else 1
            plan.append((column.name, TEXT, (size, _encoding(column)), column, unsigned))
        elif column.type == FIELD_TYPE.BLOB:
            plan.append((column.name, TEXT, (column.length_size, _encoding(column)),
                         column, unsigned))
        else:
            plan.append((column.name, LIBRARY, None, column, unsigned))
    table.__dict__[_PLAN] = plan
    return plan


def _encoding(column: Any) -> str | None:
    """The codec of a text column as the library picks it (None for undecodable: bytes)."""
    if column.character_set_name is None:
        return "utf-8"
    name = RowsEvent.charset_to_encoding(column.character_set_name)
    try:
        codecs.lookup(name)
    except LookupError:
        return None  # the library keeps such values as bytes
    return str(name)


def read_column_data(event: Any, cols_bitmap: bytes, row_image_type: Any = None) -> dict:
    plan = _plan(event)
    wrapper = event.packet
    if plan is None or event.event_type == BINLOG.PARTIAL_UPDATE_ROWS_EVENT or \
            wrapper._BinLogPacketWrapper__data_buffer:
        return _ORIGINAL(event, cols_bitmap, row_image_type)  # type: ignore[no-any-return]
    event.is_partial_json_update = False
    none_sources = event._RowsEvent__none_sources
    errors = "ignore" if event._ignore_decode_errors else "strict"
    null_bitmap = wrapper.read((BitCount(cols_bitmap) + 7) // 8)
    packet = wrapper.packet
    data, start = packet._data, packet._position
    pos, null_index, values = start, 0, {}
    for i, (name, what, how, column, unsigned) in enumerate(plan):
        if not cols_bitmap[i >> 3] & (1 << (i & 7)):  # not in the image (MINIMAL): as the library
            values[name] = None
            none_sources[name] = NONE_SOURCE.COLS_BITMAP
            continue
        if null_bitmap[null_index >> 3] & (1 << (null_index & 7)):
            values[name] = None
            none_sources[name] = NONE_SOURCE.NULL
        elif what == FIXED:
            values[name] = how.unpack_from(data, pos)[0]
            pos += how.size
        elif what == TEXT:
            values[name], pos = read_text(data, pos, how, errors, event, name)
        else:  # the library's reader, at the place it expects
            wrapper.read_bytes += pos - start
            packet._position = pos
            values[name] = _read_values(event, column, null_bitmap, null_index, False,
                                        cols_bitmap, unsigned, i)
            start = pos = packet._position
        null_index += 1
    if pos > len(data):
        raise AssertionError(f"a row of {event.schema}.{event.table} is longer than its event")
    wrapper.read_bytes += pos - start
    packet._position = pos
    return values


def read_text(data: bytes, pos: int, how: tuple[int, str | None], errors: str, event: Any,
              name: str) -> tuple[Any, int]:
    """A string column's value at ``pos`` (length prefix of ``how[0]`` bytes, decoded by
    ``how[1]``) and the position after it."""
    size, encoding = how
    length = int.from_bytes(data[pos:pos + size], "little")
    raw = data[pos + size:pos + size + length]
    if len(raw) != length:
        raise AssertionError(f"a row of {event.schema}.{event.table} ends inside column "
                             f"{name}")
    # (the library decodes even an undecodable charset's empty value: '', not b'')
    return raw.decode(encoding, errors) if encoding is not None else raw if raw else "", \
        pos + size + length


def _table_data(table: Any) -> dict[str, Any]:
    """``Table.data``, made once: the library builds it for every rows event (for its
    primary key), and a table map is never changed after it is made."""
    found = table.__dict__.get(_DATA)
    if found is None:
        found = table.__dict__[_DATA] = {k: v for k, v in table.__dict__.items()
                                         if not k.startswith("_")}
    return found  # type: ignore[no-any-return]


def install() -> None:
    RowsEvent._read_column_data = read_column_data  # type: ignore[method-assign]
    Table.data = property(_table_data)  # type: ignore[assignment]
