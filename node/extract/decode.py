"""Rows events decoded from their raw bytes, in Spark workers (docs/architecture.md, Extract).

Select only frames the binlog: it keeps each rows event's packet as bytes with the table
map it needs. A worker turns those bytes into row images here, without
python-mysql-replication and without anything of Select: the driver makes a
:class:`TableSchema` from the library's table map (:meth:`TableSchema.of`, duck-typed, so
this module never imports the library), the schema travels pickled, and
:func:`decode_rows` compiles a reader per schema, row kind and columns-present bitmap
(:mod:`node.extract.decodeplan`) the first time it meets one.

The values are the ones Select's reader gives today, value for value and type for type (see
:mod:`node.extract.decodetypes` for each type); what neither can read exactly raises a
:class:`~shared.errors.SourceError` naming the table, the column and the event's binlog
position, never a guess. MariaDB's compressed rows events (``log_bin_compress=ON``), which
Select's reader skips, are decoded too: their rows are the same after one inflate.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from node.extract import decodeplan, decodetypes
from node.extract.decodeplan import DELETE, INSERT, UPDATE, RowsReader
from node.extract.decodetypes import ENUM, SET, PastEnd, Undecodable
from shared.errors import SourceError

Row = dict[str, Any]
# a packet: the OK byte, then the event header (timestamp, type, server id, size, next
# position, flags), then a rows event's post-header: table id (6 bytes), flags (2)
_TYPE, _SIZE, _NEXT, _TABLE_ID, _V1_BODY = 5, 10, 14, 20, 28
# WRITE/UPDATE/DELETE_ROWS_EVENT V1 (23-25) and V2 (30-32), and MariaDB's compressed ones
# (log_bin_compress=ON: 166-168 after V1, 169-171 after V2), whose rows are zlib'd
_KINDS = {23: INSERT, 24: UPDATE, 25: DELETE, 30: INSERT, 31: UPDATE, 32: DELETE,
          166: INSERT, 167: UPDATE, 168: DELETE, 169: INSERT, 170: UPDATE, 171: DELETE}
ROWS_EVENT_TYPES = frozenset(_KINDS)
_V2 = frozenset((30, 31, 32, 169, 170, 171))  # a post-header with extra data
COMPRESSED = frozenset(range(166, 172))
_REFUSED = {
    39: "a MySQL partial JSON update (PARTIAL_UPDATE_ROWS_EVENT), which setl does not decode; "
        "set binlog_row_value_options='' on the source",
}
_KEPT = 256  # readers kept per schema and kind (a FULL image has one bitmap, MINIMAL a few)
# bytes of a value of each fixed-width binlog type (TableSchema.row_bytes)
_FIXED_SIZES = {1: 1, 2: 2, 3: 4, 4: 4, 5: 8, 8: 8, 9: 3, 13: 1, 10: 3, 18: 5, 17: 4, 19: 3,
                246: 8, 16: 1}


def event_type(data: bytes) -> int:
    """The event's type code (rows events: :data:`ROWS_EVENT_TYPES`)."""
    return data[_TYPE]


def event_timestamp(data: bytes) -> int:
    """The event's timestamp (seconds since the epoch) from the packet's header."""
    return int.from_bytes(data[1:5], "little")


def rows_start(data: bytes) -> int:
    """Where a rows event's column count is: after its post-header and, in a V2 event, the
    extra data whose length (two bytes) counts itself; -1 when that length is under two."""
    if data[_TYPE] not in _V2:
        return _V1_BODY
    extra = data[28] | data[29] << 8
    return _V1_BODY + extra if extra >= 2 else -1


def next_position(data: bytes) -> int:
    """The binlog position after this event (the header's next-position)."""
    return int.from_bytes(data[_NEXT:_NEXT + 4], "little")


def table_id(data: bytes) -> int:
    """The table id of a rows (or table map) event, from its post-header."""
    return int.from_bytes(data[_TABLE_ID:_TABLE_ID + 6], "little")


@dataclass(frozen=True)
class ColumnSpec:
    """What decoding one column needs: its binlog type (ENUM and SET told apart from
    STRING), signedness, charset as the library names it, and its table-map metadata."""

    name: str
    type: int
    unsigned: bool = False
    charset: str | None = None
    max_length: int = 0  # VARCHAR, CHAR: over 255 bytes, the length takes two bytes
    length_size: int = 0  # BLOB/TEXT, GEOMETRY, JSON: bytes of the length
    precision: int = 0  # DECIMAL
    decimals: int = 0
    fsp: int = 0  # TIME, DATETIME, TIMESTAMP: fractional digits
    bits: int = 0  # BIT
    size: int = 0  # ENUM, SET: bytes of the value
    enum_values: tuple[bytes, ...] | None = None  # members in definition order
    set_values: tuple[bytes, ...] | None = None

    @classmethod
    def of(cls, column: Any, where: str = "") -> ColumnSpec:
        """From the library's ``Column`` (read by attribute: the library is not imported)."""
        name = getattr(column, "name", None)
        if not name:
            raise SourceError(f"the table map of {where} has no column names; setl needs "
                              "binlog_row_metadata=FULL on the source")
        kind = int(column.type)
        enum = _members(getattr(column, "enum_values", None), where, name, enum=True)
        members = _members(getattr(column, "set_values", None), where, name)
        return cls(str(name), kind, bool(getattr(column, "unsigned", False)),
                   getattr(column, "character_set_name", None),
                   *(int(getattr(column, attr, 0) or 0) for attr in (
                       "max_length", "length_size", "precision", "decimals", "fsp", "bits",
                       "size")),
                   enum if kind == ENUM else None, members if kind == SET else None)


def _members(values: Any, where: str, name: str, enum: bool = False
             ) -> tuple[bytes, ...] | None:
    """ENUM or SET members as bytes (the library's ENUM list starts with '' for index 0)."""
    if values is None:
        return None
    found = list(values)[1:] if enum and values and values[0] == "" else list(values)
    if not all(isinstance(member, bytes) for member in found):
        raise SourceError(f"the members of {where}.{name} were decoded as text when the table "
                          "map was read; read table maps with setl's readers installed "
                          "(node.select.libevents.install), which keep them as bytes")
    return tuple(found)


@dataclass(frozen=True)
class TableSchema:
    """One table map: what a worker needs to decode the table's rows events."""

    schema: str
    table: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...] = ()
    _decoder: ClassVar[_Decoder | None] = None  # this instance's, once it has decoded

    @classmethod
    def of(cls, table: Any) -> TableSchema:
        """From the library's ``Table`` (in the driver; read by attribute)."""
        where = f"{table.schema}.{table.table}"
        key = getattr(table, "primary_key", None) or ()
        return cls(str(table.schema), str(table.table),
                   tuple(ColumnSpec.of(column, where) for column in table.columns),
                   (key,) if isinstance(key, str) else tuple(key))

    def __getstate__(self) -> dict[str, Any]:
        """The fields only: a compiled reader stays in the process that made it."""
        return {field.name: getattr(self, field.name) for field in fields(self)}

    def row_bytes(self) -> int:
        """A row change's bytes in its event as guessed from the columns (Select cuts batches
        by rows before Extract counts them): its NULL bitmap, fixed widths as they are, a
        string at a third of its maximum (at most 64 bytes), anything else 16 bytes."""
        size = (len(self.columns) + 7) // 8
        for column in self.columns:
            fixed = _FIXED_SIZES.get(column.type)
            if fixed is not None:
                size += fixed
            elif column.max_length:
                size += 1 + min(column.max_length // 3, 64)
            else:
                size += 16
        return max(size, 1)

    def event_head(self) -> int:
        """A rows event's bytes that are not its rows: the OK byte, the header, the
        post-header, the column count, one columns-present bitmap and the checksum (an
        estimate's part: a V2 event's extra data and an update's second bitmap are left to
        the rows' share). Select takes it off an event's size before it divides by
        :meth:`row_bytes` (or what Extract learned), so a one-row event's head does not make
        a bulk event's rows look larger than they are."""
        return _V1_BODY + 1 + (len(self.columns) + 7) // 8 + 4


def decode_rows(schema: TableSchema, data: bytes, checksum: bool
                ) -> list[tuple[Row | None, Row | None]]:
    """(before, after) images of every row of one rows event: INSERT (None, after), DELETE
    (before, None), UPDATE (before, after). ``data`` is the packet as read from the
    replication stream (OK byte, header, post-header, body, and a CRC32 when ``checksum``).

    One call per event: the reader compiled for the bitmaps its type had last time, which
    checks the header and bitmaps itself; anything else (other bitmaps, a damaged event, a
    value that fails) goes the checked way, which finds the reader or says what is wrong."""
    decoder = schema._decoder
    if decoder is None:
        decoder = _decoder(schema)
    try:
        return decoder.guess[data[_TYPE]](data, checksum)  # type: ignore[no-any-return]
    except Exception:  # read again, checked, to say what is wrong
        return decoder.checked(data, checksum)


_DECODERS: dict[TableSchema, _Decoder] = {}
_HEAD = struct.Struct("<BxxxxI").unpack_from  # from the type: type, (server id), event size


def _decoder(schema: TableSchema) -> _Decoder:
    """The schema's decoder: one per distinct schema in the process, kept on the instance
    too so the next event of the same instance finds it without hashing the schema."""
    found = _DECODERS.get(schema)
    if found is None:
        if len(_DECODERS) >= 4096:
            _DECODERS.clear()
        found = _DECODERS[schema] = _Decoder(schema)
    object.__setattr__(schema, "_decoder", found)  # frozen: set past the dataclass' guard
    return found


class _Decoder:
    """Reads rows events of one table: a reader compiled per kind and bitmaps when first met,
    found by the bytes from the column count to the end of the bitmaps (the count and the
    bitmaps are checked when the reader is made), and guessed per event type."""

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.where = f"{schema.schema}.{schema.table}"
        self.count = len(schema.columns)
        self.bitmap_size = (self.count + 7) // 8
        counted = 1 if self.count < 251 else 3  # MariaDB and MySQL allow 4096 columns
        self.readers: dict[str, dict[bytes, RowsReader]] = {}
        # per event type: its compiled (read, event) by count and bitmaps, and their width
        self.by_type: dict[int, tuple[dict[bytes, Any], int]] = {}
        for event_type, kind in _KINDS.items():
            self.readers.setdefault(kind, {})
            width = counted + self.bitmap_size * (2 if kind == UPDATE else 1)
            self.by_type[event_type] = ({}, width)
        # per event type: the whole-event reader of the bitmaps it had last (checked first)
        self.guess: list[Any] = [self.checked] * 256

    def checked(self, data: bytes, checksum: bool) -> list[tuple[Row | None, Row | None]]:
        """The event decoded with every check, each failure a SourceError that says what is
        wrong; the reader found becomes the guess for the next event of its type."""
        try:
            type_code, size = _HEAD(data, _TYPE)
            readers, width = self.by_type[type_code]
            pos = rows_start(data)
        except (struct.error, KeyError, IndexError):
            raise self.refused(data) from None
        if pos < 0:
            raise self.error(data, f"its extra data is {data[28] | data[29] << 8} bytes long, "
                             "fewer than the two of the length itself: the event is damaged")
        head = data[pos:pos + width]  # the column count and the columns-present bitmaps
        read, event = readers.get(head) or self.build(data, type_code, head)
        if len(data) != size + 1:
            raise self.error(data, f"the packet has {len(data) - 1} bytes of the {size} its "
                             "header says: the event is truncated")
        end = size - 3 if checksum else size + 1
        try:
            found = read(data, pos + width, end)
        except PastEnd as exc:
            raise self.error(data, f"the rows end {exc.args[0]} bytes past the end of the "
                             "event: the event is truncated or its table map does not "
                             "match it") from None
        except (Undecodable, ArithmeticError, IndexError, ValueError, struct.error,
                zlib.error) as exc:
            raise self.failed(data, type_code, head, exc) from None
        self.guess[type_code] = event
        return found  # type: ignore[no-any-return]

    def build(self, data: bytes, event_type: int, head: bytes) -> tuple[Any, Any]:
        """The reader of an event whose count and bitmaps (``head``) are new: checked
        against the table map, compiled and kept; its ``read`` and ``event``."""
        count, pos = _length(head, 0) if head else (-1, 0)
        if count != self.count:
            raise self.error(data, f"the event has {count} columns, the table map "
                             f"{self.count}: the table map does not belong to it")
        kind, size = _KINDS[event_type], self.bitmap_size
        bitmaps = head[pos:]
        images = (bitmaps[:size], bitmaps[size:]) if kind == UPDATE else (bitmaps,)
        if any(len(image) != size for image in images):
            raise self.error(data, "the event ends inside its columns-present bitmaps")
        missing = sorted({i for image in images for i in range(count)
                          if not image[i >> 3] & (1 << (i & 7))})
        if missing:  # a column not in an image would be written as NULL
            names = ", ".join(self.schema.columns[i].name for i in missing[:5])
            raise self.error(data, f"its row images lack column(s) {names}: the source logs "
                             "partial images (binlog_row_image = MINIMAL or NOBLOB, set "
                             "globally or by a session), and a column not logged cannot be "
                             "copied. Set binlog_row_image = FULL on the source (SET GLOBAL, "
                             "and in its my.cnf), copy the table again (setl snapshot), and "
                             "move the pipeline past this event (setl position set)")
        kept, functions = self.readers[kind], self.by_type[event_type][0]
        reader = kept.get(head)
        if reader is None:
            reader = decodeplan.build(self.schema, kind, images, head, self.checked)
            if len(kept) >= _KEPT:
                kept.clear()
                for found, _ in self.by_type.values():
                    found.clear()
            kept[head] = reader
        if event_type in COMPRESSED:  # never guessed: checked, then inflated
            functions[head] = (_inflating(reader.read), self.checked)
        else:
            functions[head] = (reader.read, reader.event)
        return functions[head]  # type: ignore[no-any-return]

    def failed(self, data: bytes, event_type: int, head: bytes, exc: Exception
               ) -> SourceError:
        """The error of a row that failed to decode: past the event's end (read from the
        failed reader's own positions), else naming the column whose line failed."""
        reader = self.readers[_KINDS[event_type]][head]
        column, where = None, {}
        trace = exc.__traceback__
        while trace is not None:
            if trace.tb_frame.f_code.co_filename == reader.filename:
                column = reader.columns_at.get(trace.tb_lineno, column)
                where = trace.tb_frame.f_locals
            trace = trace.tb_next
        if isinstance(exc, zlib.error):
            return self.error(data, f"the compressed rows do not inflate ({exc}): the event is "
                              "damaged")
        end = where.get("end", len(data))
        if isinstance(exc, IndexError | struct.error) or \
                max(where.get("p", 0), where.get("q", 0)) > end:
            return self.error(data, "a row runs past the end of the event: the event is "
                              "truncated or its table map does not match it")
        what = f"{type(exc).__name__}: {exc}" if not isinstance(exc, Undecodable) else str(exc)
        if column is None:
            return self.error(data, f"cannot decode a row: {what}")
        spec = self.schema.columns[column]
        detail = "" if isinstance(exc, Undecodable) else \
            "; the event is damaged or its table map does not match it"
        return self.error(data, f"cannot decode column {spec.name!r} "
                          f"({decodetypes.type_name(spec)}): {what}{detail}")

    def error(self, data: bytes, what: str) -> SourceError:
        return SourceError(f"rows event of {self.where} ending at binlog position "
                           f"{next_position(data) if len(data) >= _NEXT + 4 else '?'}: {what}")

    def refused(self, data: bytes) -> SourceError:
        if len(data) <= _V1_BODY + 2:
            return self.error(data, f"{len(data)} bytes are too short for a rows event")
        kind = data[_TYPE]
        return self.error(data, _REFUSED.get(kind, f"event type {kind} is not a rows event "
                                                    "setl decodes (WRITE/UPDATE/DELETE_ROWS "
                                                    "V1 or V2)"))


_DEFLATE_RATIO = 1032  # deflate's most: 258 bytes from a code of two bits


def _inflating(read: Any) -> Any:
    """``read`` for a MariaDB compressed rows event: its rows are one zlib stream after a
    header byte (0x80, algorithm in bits 4-6, 0 for zlib; bytes of the length in bits 0-2)
    and the length of the rows inflated (big-endian), as binlog_buf_uncompress reads them."""
    def inflate(d: bytes, p: int, end: int) -> Any:
        head = d[p]
        size = head & 0x07
        if head & 0xF0 != 0x80 or not 1 <= size <= 4:
            raise Undecodable(f"a compressed rows event whose header byte {head:#04x} is not "
                              "zlib's (MariaDB writes 0x80 + the bytes of the length)")
        length = int.from_bytes(d[p + 1:p + 1 + size], "big")
        if length > _DEFLATE_RATIO * (end - p):
            raise Undecodable(f"the compressed rows say they inflate to {length} bytes, more "
                              f"than zlib can make of {end - p - 1 - size}: the event is "
                              "damaged")
        rows = zlib.decompress(d[p + 1 + size:end], bufsize=max(length, 1))
        if len(rows) != length:
            raise Undecodable(f"the compressed rows inflate to {len(rows)} bytes, the event "
                              f"says {length}")
        return read(rows, 0, length)
    return inflate


def _length(data: bytes, pos: int) -> tuple[int, int]:
    """A length-encoded integer at ``pos`` and the position after it."""
    first = data[pos]
    if first < 251:
        return first, pos + 1
    size = {252: 2, 253: 3, 254: 8}.get(first, 0)
    return int.from_bytes(data[pos + 1:pos + 1 + size], "little"), pos + 1 + size
