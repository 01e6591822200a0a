"""A run of inserts read from the rows events' bytes straight into ``LOAD DATA`` lines.

:mod:`node.extract.inserts` takes a part's insert-only tables out of the general path: their
rows are decoded into dicts, then rendered column by column into tab-separated lines. For the
common columns that is two conversions that cancel out — an integer's bytes to a Python int
to its digits, an ASCII string's bytes to ``str`` and back to the same bytes. Here the rows
go from the event to the line in one pass: integers as their digits, text as its bytes with
LOAD DATA's escapes, NULL as ``\\N``, each row's fields in the target's column order —
written byte by byte into a buffer the caller keeps, as the scan reads them, so no field
becomes an object of its own (a bytes object a field, two list appends and a join of them
all were half of a bulk row's cost here).

Only what gives the bytes the decoded path gives is taken: events whose every column is
present, integer columns (TINYINT to BIGINT, signed or not) and text columns (CHAR, VARCHAR,
TEXT) whose bytes decode and encode back to themselves (:func:`way`): ASCII in
utf8mb4/utf8mb3, latin1 or ascii; well-formed UTF-8 from a UTF-8 column into a UTF-8 one;
any byte from latin1 into latin1. Anything else — another type, a value of another charset,
a malformed one, an event that does not end where its rows do — makes :func:`lines` say
-1, and the caller takes the decoded path, which gives the same lines or says what is
wrong with the event.

Compiled (``node.compiled``, with ``insertlines.pxd``'s C types) it is the fast path; as
plain Python it is slower than the decoded path, so :mod:`node.extract.inserts` uses it only
compiled (:data:`COMPILED`). The tests run both against the decoded path, byte for byte.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node import charsets
from node.extract import decode
from node.extract import decodetypes as types
from node.target.mysql import loaddata

if TYPE_CHECKING:
    from node.extract.decode import TableSchema

COMPILED = not __file__.endswith(".py")  # an extension module (node.compiled picks it)
# a column's kind: integers by width (negative: unsigned), text by how its bytes are checked
# plus the bytes of its length (1 to 4)
_INTEGERS = {types.TINY: 1, types.SHORT: 2, types.INT24: 3, types.LONG: 4, types.LONGLONG: 8}
ASCII, UTF8, ANY = 16, 32, 48  # text: ASCII only; well-formed UTF-8; any byte
_TEXTS = (types.VARCHAR, types.STRING, types.BLOB)  # CHAR, VARCHAR, TEXT (and binary ones)
_READERS = ("utf-8", charsets.LATIN1, "ascii")  # the source's codecs that read ASCII as itself
_WRITERS = (None, "utf-8", charsets.LATIN1, "ascii")  # the target's (loaddata.plan) likewise
_INSERTS = (23, 30)  # WRITE_ROWS_EVENT V1 and V2 (not the compressed ones)


def way(schema: TableSchema, plan: list[tuple[str, str | None]]
        ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Each source column's kind, and the source column of each planned target column (the
    same names, every one); None when a column is of another type, the names differ, or a
    charset does not keep ASCII as itself.

    A text value's bytes are the target's when they decode and encode back to themselves:
    ASCII in any of these charsets, well-formed UTF-8 from a UTF-8 column into a UTF-8 (or
    binary) one, any byte from latin1 into latin1 (MariaDB's latin1 reads every byte)."""
    names = [column.name for column in schema.columns]
    codecs = dict(plan)
    if sorted(names) != sorted(codecs) or len(codecs) != len(plan):
        return None
    kinds = []
    for column in schema.columns:
        width = _INTEGERS.get(column.type)
        if width is not None and codecs[column.name] != loaddata.YEAR:  # (0 is '0000' there)
            kinds.append(-width if column.unsigned else width)
            continue
        source, target = types.encoding(column), codecs[column.name]
        length = types.prefix_size(column)
        if column.type not in _TEXTS or source not in _READERS or target not in _WRITERS \
                or not 1 <= length <= 4:
            return None
        if source == "utf-8" and target in (None, "utf-8"):
            kinds.append(UTF8 + length)
        elif source == charsets.LATIN1 == target:
            kinds.append(ANY + length)
        else:
            kinds.append(ASCII + length)
    return tuple(kinds), tuple(names.index(name) for name, _ in plan)


def lines(event: bytes, checksum: bool, kinds_: tuple[int, ...], order_: tuple[int, ...],
          out: bytearray, at: int) -> tuple[int, int]:
    """Writes the lines of one WRITE_ROWS event's rows (fields, tabs and newlines) into
    ``out`` from ``at``, growing it as it needs (what lies past the lines' end is room, not
    data); the rows it held and where their lines end, or ``(-1, at)`` when it cannot go this
    way (then ``out`` past ``at`` may hold part of it: the caller drops it)."""
    if len(event) < 30 or event[5] not in _INSERTS or \
            int.from_bytes(event[10:14], "little") != len(event) - 1:
        return -1, at
    pos = decode.rows_start(event)
    if pos < 0:
        return -1, at
    count = len(kinds_)
    size = (count + 7) >> 3
    if count >= 251 or pos + 1 + size > len(event) or event[pos] != count:
        return -1, at
    present = int.from_bytes(event[pos + 1:pos + 1 + size], "little")
    if present & ((1 << count) - 1) != (1 << count) - 1:
        return -1, at  # a column left out of the image: the decoded path gives it as NULL
    end = len(event) - 4 if checksum else len(event)
    return rows(event, pos + 1 + size, end, kinds_, order_, out, at)


def rows(d: bytes, p: int, end: int, kinds_: tuple[int, ...], order_: tuple[int, ...],
         out: bytearray, o: int) -> tuple[int, int]:
    """The rows from ``d[p]`` to ``d[end]`` (each a NULL bitmap, then its values) written
    as lines into ``out`` from ``o``, byte by byte as they are read: integers as their
    digits, text as its bytes with LOAD DATA's escapes (no field is made an object of its
    own). A row's fields go in the source's order, then, where the target's differs, are
    moved into its order."""
    start = o
    count = len(kinds_)
    size = (count + 7) >> 3
    found = 0
    ones = 0xFFFFFFFFFFFFFFFF
    view = d  # compiled: the bytes' own buffer, read without a check (positions are checked)
    w = out  # compiled: the buffer written, without a check (room is made before each field)
    room = len(out)
    moved = False  # the target's columns in another order than the source's
    for i in range(count):
        if order_[i] != i:
            moved = True
    starts: list[int] = [0] * count  # where each field of the row begins (when moved)
    while p < end:
        if p + size > end:
            return -1, start
        nulls = p  # the row's NULL bitmap
        p += size
        line = o  # where the row's line begins
        for i in range(count):
            if o + 22 > room:  # a sign, 20 digits and a tab at most; a NULL takes 3
                out.extend(bytes(room + 4096))
                room = len(out)
                w = out
            if moved:
                starts[i] = o - line
            byte = view[nulls + (i >> 3)]
            if byte >> (i & 7) & 1:
                w[o] = 92  # \N
                w[o + 1] = 78
                w[o + 2] = 9
                o += 3
                continue
            kind = kinds_[i]
            check = 0 if kind < 0 else kind & ~15  # text: ASCII, UTF8 or ANY; integers: 0
            width = -kind if kind < 0 else kind - check
            if p + width > end:
                return -1, start
            number = 0  # the little-endian number at p: a length, or an integer's bits
            for k in range(width):
                byte = view[p + k]
                number |= byte << (8 * k)
            p += width
            if check:
                length = number
                if length > end - p:
                    return -1, start
                if o + 2 * length + 1 > room:  # every byte escaped, and a tab
                    out.extend(bytes(room + 2 * length + 1))
                    room = len(out)
                    w = out
                k = p
                stop = p + length
                while k < stop:
                    byte = view[k]
                    if byte < 0x80:
                        if byte == 92 or byte == 9 or byte == 10 or byte == 13 or byte == 0:
                            w[o] = 92
                            o += 1
                            byte = 116 if byte == 9 else 110 if byte == 10 else \
                                114 if byte == 13 else 48 if byte == 0 else 92
                        w[o] = byte
                        o += 1
                        k += 1
                    elif check == ANY:
                        w[o] = byte
                        o += 1
                        k += 1
                    elif check == ASCII:
                        return -1, start
                    else:
                        j = _utf8(view, k, stop)
                        if j < 0:
                            return -1, start
                        while k < j:
                            w[o] = view[k]
                            o += 1
                            k += 1
                p = stop
            else:
                if kind > 0 and number >> (8 * width - 1):  # negative: its magnitude
                    number = (ones >> (64 - 8 * width)) - number + 1
                    w[o] = 45  # -
                    o += 1
                digits = number
                k = o
                while True:  # the digits' end
                    k += 1
                    digits //= 10
                    if digits == 0:
                        break
                o = k
                while True:
                    k -= 1
                    w[k] = 48 + number % 10
                    number //= 10
                    if number == 0:
                        break
            w[o] = 9
            o += 1
        w[o - 1] = 10  # the line's end
        if moved:
            _reorder(out, line, o, starts, order_)
        found += 1
    if p != end:
        return -1, start
    return found, o


def _reorder(out: bytearray, line: int, o: int, starts: list[int], order_: tuple[int, ...]
             ) -> None:
    """The line from ``out[line]`` to ``out[o]`` (fields in the source's order, each
    beginning at ``starts``) with its fields in ``order_``: the same bytes, moved."""
    fields = out[line:o]
    count = len(starts)
    whole = o - line  # the line's length (``line`` moves on as the fields are put back)
    for i in order_:
        begin = starts[i]
        stop = starts[i + 1] if i + 1 < count else whole  # (with its tab)
        out[line:line + stop - begin] = fields[begin:stop]
        out[line + stop - begin - 1] = 9
        line += stop - begin
    out[o - 1] = 10


def _utf8(view: bytes, k: int, stop: int) -> int:
    """The position after the UTF-8 sequence whose lead byte (over 0x7f) is at ``k``, or -1
    when it is not one Python's strict decoder takes (overlong, a surrogate, over U+10FFFF,
    cut short)."""
    lead = view[k]
    if 0xC2 <= lead <= 0xDF:
        size, low, high = 2, 0x80, 0xBF
    elif 0xE0 <= lead <= 0xEF:
        size = 3
        low = 0xA0 if lead == 0xE0 else 0x80
        high = 0x9F if lead == 0xED else 0xBF
    elif 0xF0 <= lead <= 0xF4:
        size = 4
        low = 0x90 if lead == 0xF0 else 0x80
        high = 0x8F if lead == 0xF4 else 0xBF
    else:
        return -1
    if k + size > stop:
        return -1
    second = view[k + 1]
    if second < low or second > high:
        return -1
    for j in range(k + 2, k + size):
        follow = view[j]
        if follow < 0x80 or follow > 0xBF:
            return -1
    return k + size

