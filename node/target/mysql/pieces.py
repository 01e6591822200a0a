"""What a statement of Load leaves out, and must not let the target make of it: a value too
big for one statement (appended a piece at a time, each piece whole characters of its
charset), and a column the target stamps on update (set to itself where the row's value is
the source's)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from node.charsets import Encoded

# bytes or characters of a value written a piece at a time: 4 MiB, escaped at most twice
# that, under the 16 MiB max_allowed_packet a MariaDB target has by default
BIG_VALUE = 4 << 20


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


def piece(value: Any) -> int:
    """How much of a value one statement carries: a character takes up to 4 bytes."""
    return BIG_VALUE if isinstance(value, bytes) else BIG_VALUE // 4


def big(value: Any) -> bool:
    """Whether a value is written a piece at a time."""
    return isinstance(value, bytes | str) and len(value) > piece(value)


# a character of a multi-byte charset kept as bytes (Encoded), by its lead byte: the server
# converts each appended piece on its own, so a piece must end between characters
_CHARACTER = {
    "sjis": rb"[\x81-\x9f\xe0-\xfc].|.", "cp932": rb"[\x81-\x9f\xe0-\xfc].|.",
    "big5": rb"[\x81-\xfe].|.", "euckr": rb"[\x81-\xfe].|.",
    "ujis": rb"\x8f..|[\x8e\xa1-\xfe].|.", "eucjpms": rb"\x8f..|[\x8e\xa1-\xfe].|.",
}


def pieces(value: Any) -> Iterator[Any]:
    """A big value in pieces of at most :func:`piece` each; text kept as bytes
    (:class:`~node.charsets.Encoded`) in whole characters, each piece naming its charset."""
    step = piece(value)
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
