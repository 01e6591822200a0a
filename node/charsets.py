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

from shared.textcodecs import (  # noqa: F401  (node code names them here)
    CODECS,
    INEXACT,
    LATIN1,
    Encoded,
    charset_to_encoding,
    decodable,
    python_codec,
)

_LATIN1 = LATIN1  # MariaDB's latin1, registered below


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


def member(value: bytes, charset: str | None) -> str | bytes:
    """An ENUM or SET member in its column's charset (:class:`Encoded` for a charset Python
    lacks or reads otherwise: the target converts it, as it does such text)."""
    try:
        return value.decode(charset_to_encoding(charset or "utf8"))
    except LookupError:
        return Encoded(value, charset) if charset and charset != "binary" else value
