"""Text in the charsets a MariaDB/MySQL server stores, decoded exactly.

Shared by Select (statements, ENUM/SET members), Extract's row decoder and Load's DDL
replay; it needs nothing of the binlog library:

- MariaDB's ``latin1`` is cp1252 that keeps 0x81, 0x8D, 0x8F, 0x90 and 0x9D (as U+0081 …)
  where Python's cp1252 fails: registered here as the codec ``setl_mariadb_latin1``;
- ``utf16``, ``utf32`` and ``ucs2`` are big-endian without a byte-order mark, where
  Python's ``utf16``/``utf32`` guess little-endian.
"""

from __future__ import annotations

import codecs

from pymysql.charset import charset_by_name

LATIN1 = _LATIN1 = "setl_mariadb_latin1"  # MariaDB's latin1, registered below
# A column's charset as the binlog library names it (pymysql's Charset.encoding: 'cp1252'
# for latin1, 'utf8' for utf8mb3/utf8mb4, else the server's name) → the Python codec that
# decodes it as the server stores it, where the name alone would pick another one
CODECS = {"cp1252": _LATIN1, "utf16": "utf-16-be", "utf16le": "utf-16-le",
          "utf32": "utf-32-be", "ucs2": "utf-16-be", "utf8": "utf-8"}


def _latin1_decode(data: bytes, errors: str = "strict") -> tuple[str, int]:
    """MariaDB latin1: cp1252, with the five bytes cp1252 leaves undefined kept as is."""
    return codecs.charmap_decode(data, errors, _LATIN1_TABLE)


def _latin1_encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
    return codecs.charmap_encode(text, errors, _LATIN1_ENCODING)


_LATIN1_TABLE = "".join(
    bytes([byte]).decode("cp1252", errors="ignore") or chr(byte) for byte in range(256))
_LATIN1_ENCODING = codecs.charmap_build(_LATIN1_TABLE)


def _search(name: str) -> codecs.CodecInfo | None:
    if name != _LATIN1:
        return None
    return codecs.CodecInfo(_latin1_encode, _latin1_decode, name=_LATIN1)


codecs.register(_search)  # MariaDB's latin1, for rows and for statements


# charsets (by the server's and the library's names) whose Python codec reads some of the
# server's characters otherwise, measured on MariaDB 10.11 with every one- and two-byte
# character of each (tests/integration/test_types.py): sjis 0x815F is '\\' on the server
# and '＼' in Python, greek, hebrew, koi8u and cp866 map characters to other code points,
# big5, euckr and ujis hold characters Python's lack, tis620 bytes it maps to none. Their
# values stay bytes, written back byte for byte (a character the target encoded again could
# change, or become '?')
INEXACT = frozenset({"big5", "ujis", "sjis", "hebrew", "euckr", "euc_kr", "koi8u", "koi8_u",
                     "greek", "cp866", "tis620", "cp932"})


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
    try:
        codecs.lookup(charset_to_encoding(name))  # type: ignore[arg-type]
    except LookupError:
        return False
    return True


def member(value: bytes, charset: str | None) -> str | bytes:
    """An ENUM or SET member in its column's charset (bytes for a charset Python lacks)."""
    try:
        return value.decode(charset_to_encoding(charset or "utf8"))
    except LookupError:
        return value
