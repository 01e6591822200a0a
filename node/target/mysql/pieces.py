"""What a statement of Load leaves out, and must not let the target make of it: a value too
big for one statement (appended a piece at a time, each piece whole characters of its
charset), and a column the target stamps on update (set to itself where the row's value is
the source's)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from node.charsets import Encoded
from shared.errors import RowTooLargeError

# bytes or characters of a value written a piece at a time: 4 MiB, escaped at most twice
# that, under the 16 MiB max_allowed_packet a MariaDB target has by default
BIG_VALUE = 4 << 20
# the target column types (information_schema's DATA_TYPE) whose values may be written a piece
# at a time: an empty start and every part are values of theirs (not BINARY(n), which pads
# them, nor JSON, ENUM, SET or geometry, which refuse them; nor a column of these that a
# CHECK constraint names, MariaDB's JSON among them: Column.checked)
PIECEABLE = frozenset({"varchar", "varbinary", "tinytext", "text", "mediumtext", "longtext",
                       "tinyblob", "blob", "mediumblob", "longblob"})
PACKET = 16 << 20  # a target's max_allowed_packet where it is not known (MariaDB's default)
HEAD = 64 << 10  # of a packet, what a statement's text besides its row's values may take
_ESCAPED = "\0\\\n\r\x1a'\""  # what a string literal escapes (a byte more each)


class Stamps(NamedTuple):
    """A target table's ``ON UPDATE CURRENT_TIMESTAMP`` columns, and whether its rows are
    written a part at a time (a wide row's table: a ``merge_part`` or ``joins`` pair)."""

    names: tuple[str, ...] = ()
    parted: bool = False

    def kept(self, assigned: Iterable[str], present: Iterable[str] = ()) -> tuple[str, ...]:
        """The stamped columns a statement that changes a row and assigns ``assigned`` must
        set to themselves (else the target's clock replaces the source's value): those the
        row holds (``present``), and on a wide row's table every one (another part wrote
        it; one the pairs never write is stamped no more there)."""
        if not self.names:
            return ()
        done = {name.lower() for name in assigned}
        held = {name.lower() for name in present}
        return tuple(name for name in self.names if name.lower() not in done and (
            self.parted or name.lower() in held))


def room(packet: int) -> int:
    """The bytes of values one statement may carry to a target whose max_allowed_packet is
    ``packet`` (0: not known, taken as :data:`PACKET`)."""
    packet = packet or PACKET
    return max(packet - HEAD, packet // 2)


def piece(value: Any, space: int = 0) -> int:
    """How much of a value one statement carries: a byte is written as two hex digits, a
    character takes up to 4 bytes (escaped or not); ``space``: :func:`room` of the target
    (0: not known)."""
    if isinstance(value, bytes):
        return min(BIG_VALUE, space // 2) if space else BIG_VALUE
    return min(BIG_VALUE // 4, space // 4) if space else BIG_VALUE // 4


def big(value: Any) -> bool:
    """Whether a value is written a piece at a time whatever its row (over BIG_VALUE)."""
    return isinstance(value, bytes | str) and len(value) > piece(value)


def size(value: Any) -> int:
    """The bytes of ``value``'s literal in a statement's text (as
    :func:`~node.target.mysql.sqltext.literal` writes it), give or take a few."""
    kind = type(value)
    if kind is str:
        if len(value) < 4096:  # (most values: no need to count)
            return 4 * len(value) + 2
        return len(value.encode("utf-8", "surrogatepass")) + \
            sum(map(value.count, _ESCAPED)) + 2
    if isinstance(value, bytes | bytearray):
        return 2 * len(value) + 3 + (len(value.charset) + 2 if kind is Encoded else 0)
    if isinstance(value, set | frozenset):
        return sum(size(member) for member in value) + len(value) + 2
    if isinstance(value, dict | list):  # its text, as keys.sql_value writes it
        return size(json.dumps(value, ensure_ascii=False))
    return 64  # a number, a date, NULL


def rendered(values: Iterable[Any]) -> int:
    """The bytes of a row's values in a statement's text (see :func:`size`)."""
    return sum(map(size, values)) + 2


def apart(values: dict[str, Any], space: int, others: Iterable[Any] = (),
          keys: Iterable[str] = ()) -> list[str]:
    """The columns of a row (``values``; ``others``: values its statement also carries) to
    write a piece at a time so that the rest of it fits a statement of ``space`` bytes of
    values: those over BIG_VALUE, then the largest until the rest fits (none for a row
    that fits); never one of ``keys``: the key columns, which find the row, and those of a
    type not :data:`PIECEABLE`."""
    return fitting(values, space, others, keys)[0]


def fitting(values: dict[str, Any], space: int, others: Iterable[Any] = (),
            keys: Iterable[str] = ()) -> tuple[list[str], int]:
    """:func:`apart`'s columns, and the bytes the row's statement takes without them (over
    ``space`` where what is left cannot be cut: see :func:`whole_values`)."""
    keys = frozenset(key.lower() for key in keys)  # (a row may spell a column otherwise)
    taken = [name for name, value in values.items() if big(value) and name.lower() not in keys]
    if not taken:
        left = rendered([*values.values(), *others])
        if left <= space:
            return [], left
    sizes = {name: size(value) for name, value in values.items()}
    left = sum(sizes.values()) + rendered(others) - sum(sizes[name] for name in taken)
    for name in sorted(sizes, key=sizes.__getitem__, reverse=True):
        if left <= space:
            break
        if name not in taken and name.lower() not in keys and \
                isinstance(values[name], bytes | str) and values[name]:
            taken.append(name)
            left -= sizes[name]
    return taken, left


def whole(writes: Any, change: Any, space: int, packet: int) -> None:
    """Raise :class:`RowTooLargeError` for a keyless row whose statement (an UPDATE carries
    its before and after images) would not fit the target's max_allowed_packet: a keyless
    row has no key to append a value to, it goes in one statement or not at all."""
    images = [image for image in (change.before, change.after) if image]
    if change.type.name == "DELETE":
        images = images[:1]
    values = [value for image in images for value in image.values()]
    size = rendered(values) + len(values) * 40  # (the WHERE clause's casts)
    if size <= space:
        return
    raise refused(writes, f"a row's {change.type.name} takes {size:,} bytes", size, packet,
                  "; a keyless row goes in one statement, it cannot be cut (no key to append "
                  "a value to)", " (keyless)")


def whole_values(writes: Any, row: dict[str, Any], taken: list[str], left: int, space: int,
                 packet: int, columns: Mapping[str, Any] | None = None) -> None:
    """Raise :class:`RowTooLargeError` for a keyed row whose statement, without the values
    written a piece at a time (``taken``; ``left``: the bytes of the rest, see
    :func:`fitting`), would still not fit ``space`` (:func:`room` of the target's
    ``packet``): what is left goes whole — its key, and values no piece can hold (BINARY(n),
    JSON, ENUM, SET, geometry, a column a CHECK constraint names: ``columns``'
    :class:`~node.target.mysql.render.Column` say which). Sent, such a statement is refused
    and the connection dropped at every retry: the pipeline pauses at once instead, before
    anything of the batch is sent. So for a value written a piece at a time that is itself
    longer than the packet: the server builds it there, and ``CONCAT`` refuses to pass it."""
    for name in taken if packet else ():  # (a packet not known may be larger)
        value = row[name]
        if len(value) * 4 <= packet:  # (a character four bytes at most: it fits)
            continue
        length = _stored(value, name, columns or {})
        if length > packet:
            raise refused(
                writes, f"a row's value of `{name}` takes {length:,} bytes", length, packet,
                ": the target builds a value whole, whatever the pieces it is sent in")
    if left <= space:
        return
    whole = {name: size(value) for name, value in row.items() if name not in taken}
    largest = max(whole, key=whole.__getitem__, default=None)
    if largest is None:  # (the values a column-group update carries besides its own)
        what = f"a row's statement takes {left:,} bytes"
    else:
        what = (f"a row's value of `{largest}` ("
                f"{_unpieceable(largest, writes.keys, columns or {})}) takes "
                f"{whole[largest]:,} bytes, its statement {left:,}")
    raise refused(writes, what, left, packet,
                  "; such a value goes in one statement, it cannot be cut")


def refused(writes: Any, what: str, needed: int, packet: int, why: str, kind: str = ""
            ) -> RowTooLargeError:
    """The error for a statement of ``needed`` bytes no statement under the target's
    ``packet`` (0: not known) can carry: ``what`` takes them, ``why`` it cannot be cut; what
    to raise the packet to."""
    wanted = -(-(needed + HEAD) // (1 << 20)) << 20  # whole MiB
    return RowTooLargeError(
        f"target {writes.datasource}: table {writes.schema}.{writes.table}{kind}: {what}, "
        f"over the target's max_allowed_packet ({packet or PACKET:,} bytes"
        f"{'' if packet else ': not known, taken as the default'}){why}. Raise the target's "
        f"max_allowed_packet to at least {wanted} (SET GLOBAL max_allowed_packet = {wanted}; "
        "and in my.cnf), then resume the channel: nothing of the batch was written")


def _stored(value: Any, name: str, columns: Mapping[str, Any]) -> int:
    """The bytes a value takes in its target column, at least: text in a utf8 column as its
    UTF-8 (a character one to four bytes), else a character a byte at least."""
    if not isinstance(value, str):
        return len(value)
    column = _column(name, columns)
    charset = (column.charset or "") if column is not None else "utf8"
    return len(value.encode("utf-8", "surrogatepass")) if charset.startswith("utf8") \
        else len(value)


def _column(name: str, columns: Mapping[str, Any]) -> Any:
    """A target column by a row's name for it (names ignore case); None: not known."""
    return columns.get(name) or next(
        (found for spelt, found in columns.items() if spelt.lower() == name.lower()), None)


def _unpieceable(name: str, keys: Iterable[str], columns: Mapping[str, Any]) -> str:
    """Why a column's value is not written a piece at a time."""
    column = _column(name, columns)
    if name.lower() in {key.lower() for key in keys}:
        return "a key column: it finds the row a piece is appended to"
    if column is None:
        return "not text or binary"
    if column.json:
        return "a JSON document: its CHECK (json_valid) refuses a part of one"
    if column.checked:
        return "named in a CHECK constraint, which may refuse a part of a value"
    if column.unique:
        return "in a unique index, where a part of a value may meet another row's"
    return f"{column.column_type or column.data_type}: a part of a value is no value of its type"


# a character of a multi-byte charset kept as bytes (Encoded), by its lead byte: the server
# converts each appended piece on its own, so a piece must end between characters
_CHARACTER = {
    "sjis": rb"[\x81-\x9f\xe0-\xfc].|.", "cp932": rb"[\x81-\x9f\xe0-\xfc].|.",
    "big5": rb"[\x81-\xfe].|.", "euckr": rb"[\x81-\xfe].|.",
    "ujis": rb"\x8f..|[\x8e\xa1-\xfe].|.", "eucjpms": rb"\x8f..|[\x8e\xa1-\xfe].|.",
}


def pieces(value: Any, space: int = 0) -> Iterator[Any]:
    """A big value in pieces of at most :func:`piece` each; text kept as bytes
    (:class:`~node.charsets.Encoded`) in whole characters, each piece naming its charset."""
    step = piece(value, space)
    if type(value) is not Encoded:
        for start in range(0, len(value), step):
            yield value[start:start + step]
        return
    character = _CHARACTER.get(value.charset)
    pattern = re.compile(b"(?:" + character + b"){1,%d}" % (step // 3), re.S) \
        if character else None
    start = 0
    while start < len(value):
        end = pattern.match(value, start).end() if pattern else start + step  # type: ignore
        yield Encoded(value[start:end], value.charset)
        start = end
