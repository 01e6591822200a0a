"""Which Python codec reads text of a MariaDB/MySQL charset, and which charsets it cannot
read exactly (their values stay bytes). Pure names, shared by the node's decoders and reads
(:mod:`node.charsets`) and by the manager's ``setl backfill``, which must select a key as
the node reads it."""

from __future__ import annotations

import codecs

from pymysql.charset import charset_by_name

LATIN1 = "setl_mariadb_latin1"  # MariaDB's latin1, a codec node.charsets registers

# A column's charset as the binlog library names it (pymysql's Charset.encoding: 'cp1252'
# for latin1, 'utf8' for utf8mb3/utf8mb4, else the server's name) → the Python codec that
# decodes it as the server stores it, where the name alone would pick another one
CODECS = {"cp1252": LATIN1, "utf16": "utf-16-be", "utf16le": "utf-16-le",
          "utf32": "utf-32-be", "ucs2": "utf-16-be", "utf8": "utf-8"}

# charsets (by the server's and the library's names) whose Python codec reads some of the
# server's characters otherwise, measured on MariaDB 10.11 with every one- and two-byte
# character of each (tests/integration/test_types.py): sjis 0x815F is '\\' on the server
# and '＼' in Python, greek, hebrew, koi8u and cp866 map characters to other code points,
# big5, euckr and ujis hold characters Python's lack, tis620 bytes it maps to none. Their
# values stay bytes, written back byte for byte (a character the target encoded again could
# change, or become '?')
INEXACT = frozenset({"big5", "ujis", "sjis", "hebrew", "euckr", "euc_kr", "koi8u", "koi8_u",
                     "greek", "cp866", "tis620", "cp932"})


# the library's names of charsets that differ from the server's (pymysql's Charset.encoding)
_SERVER_NAMES = {"koi8_u": "koi8u", "koi8_r": "koi8r", "euc_kr": "euckr", "cp1252": "latin1",
                 "utf8": "utf8mb4"}


class Encoded(bytes):
    """Text of a charset setl keeps as its bytes (:data:`INEXACT`, or one Python has no
    codec for), with the charset's name as the server spells it. Load writes it with that
    charset as an introducer (``_sjis X'…'``): a target column of the same charset stores
    the bytes, one of another charset the same characters as the server converts them (a
    character it lacks is an error in Load's strict session, never other bytes)."""

    charset: str

    def __new__(cls, value: bytes, charset: str) -> Encoded:
        made = super().__new__(cls, value)
        made.charset = _SERVER_NAMES.get(charset, charset)
        return made

    def __reduce__(self) -> tuple[object, ...]:
        return Encoded, (bytes(self), self.charset)

    def __repr__(self) -> str:
        return f"Encoded({bytes(self)!r}, {self.charset!r})"


def charset_to_encoding(name: str) -> str:
    """The Python codec for a charset name (pymysql's choice where it is right; a name
    Python does not know, or one of :data:`INEXACT`, leaves the value as bytes, written
    back byte for byte)."""
    if name in INEXACT:
        return f"setl-inexact-{name}"  # (no codec has this name)
    return python_codec(name)


def python_codec(name: str) -> str:
    """Python's codec for a charset name, exact or not (:data:`INEXACT`): for a statement's
    text, whose names and keywords are ASCII."""
    if name in CODECS:
        return CODECS[name]
    charset = charset_by_name(name)
    return charset.encoding if charset else name


def decodable(name: str | None) -> bool:
    """Whether text of a charset (a server's name or the library's) is decoded: not for
    the few Python has no codec for (swe7, dec8, hp8, keybcs2, macce, armscii8, geostd8,
    eucjpms) nor those whose codec reads some characters otherwise (:data:`INEXACT`),
    whose values stay bytes. None and binary: bytes, nothing to decode."""
    if name in (None, "binary"):
        return True
    encoding = charset_to_encoding(name)
    if encoding == LATIN1:  # known wherever node.charsets registered it, or not
        return True
    try:
        codecs.lookup(encoding)  # type: ignore[arg-type]
    except LookupError:
        return False
    return True
