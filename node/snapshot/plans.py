"""A copy's chunks, kept in ZooKeeper apart from its progress: written once, when the copy
is planned, and never again.

``pipelines/{pid}/snapshot-plans/{copy id}`` (the id quoted as a znode name) holds a small
header (JSON: format, parts, chunks, bytes, crc32) and, as children ``0``, ``1``, ..., the
chunks' bounds as zlib-compressed JSON, cut in parts of at most :data:`PART_BYTES` (a request
past ZooKeeper's ``jute.maxbuffer``, 1 MiB by default, is refused and the connection
dropped). The header is written last: a plan without one is one whose writer stopped half
way, never named by the progress (:mod:`node.snapshot.state`), which is written after it.

So the progress document written after every window keeps per copy only what changes (the
done chunks as ranges, rows, state), whatever the table's size: the bounds of a large table
with a long key (100M rows by a UUID: ~12,000 chunks) did not fit in one znode.
"""

from __future__ import annotations

import json
import zlib
from typing import Any
from urllib.parse import quote, unquote

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, NotEmptyError

from node.extract.chunks import Chunk
from shared.errors import CoordinationError
from shared.retl import decode_key, encode_key

FORMAT = 1
PART_BYTES = 512 * 1024  # well under jute.maxbuffer (1 MiB), whatever else goes with a request
MOST_BYTES = 8 * 2**20  # a plan larger than this (compressed) is refused: ZooKeeper keeps
# everything in memory (100M rows by a UUID in chunks of 8192 rows take ~0.5 MB)


class PlanMissing(CoordinationError):
    """The plan is not there, or not whole (``str``: what was found; the caller says what
    it means for the copy)."""


def name(copy_id: str) -> str:
    """A copy id as a znode name (a table's name may hold '/')."""
    return quote(copy_id, safe="@.-_")


def copy_id(znode: str) -> str:
    return unquote(znode)


def encode(chunks: list[Chunk]) -> bytes:
    """The chunks' bounds (JSON, typed as the free door's keys are), compressed."""
    return zlib.compress(json.dumps(
        [[bound(c.low), bound(c.high), c.nulls] for c in chunks]).encode(), 6)


def decode(data: bytes) -> list[Chunk]:
    return [Chunk(index, unbound(low), unbound(high), bool(nulls))
            for index, (low, high, nulls) in enumerate(json.loads(zlib.decompress(data)))]


def write(client: KazooClient, path: str, chunks: list[Chunk],
          part_bytes: int = PART_BYTES) -> int:
    """Write the plan at ``path`` (made, never over one there: NodeExistsError); the number
    of parts."""
    data = encode(chunks)
    parts = [data[at:at + part_bytes] for at in range(0, len(data), part_bytes)] or [b""]
    client.create(path, b"", makepath=True)
    for number, part in enumerate(parts):
        client.create(f"{path}/{number}", part)
    header = {"format": FORMAT, "parts": len(parts), "chunks": len(chunks),
              "bytes": len(data), "crc32": zlib.crc32(data)}
    client.set(path, json.dumps(header).encode(), version=0)
    return len(parts)


def read(client: KazooClient, path: str) -> list[Chunk]:
    """The plan's chunks; PlanMissing when it is not there or not whole (KazooException
    when ZooKeeper does not answer)."""
    try:
        raw, _ = client.get(path)
    except NoNodeError:
        raise PlanMissing(f"no znode {path}") from None
    try:
        header: dict[str, Any] = json.loads(raw) if raw else {}
    except ValueError:
        raise PlanMissing(f"{path} holds no plan header") from None
    if header.get("format") != FORMAT:
        raise PlanMissing(f"{path}: no plan header of format {FORMAT} ({raw[:80]!r}), "
                          "written half way or by another setl release")
    data = b""
    for number in range(int(header["parts"])):
        try:
            part, _ = client.get(f"{path}/{number}")
        except NoNodeError:
            raise PlanMissing(f"{path}: part {number} of {header['parts']} is missing") \
                from None
        data += part
    if len(data) != header["bytes"] or zlib.crc32(data) != header["crc32"]:
        raise PlanMissing(f"{path}: its parts hold {len(data)} bytes, not the "
                          f"{header['bytes']} (and checksum) its header says")
    try:
        chunks = decode(data)
    except (ValueError, TypeError, zlib.error) as exc:
        raise PlanMissing(f"{path} cannot be read: {type(exc).__name__}: {exc}") from None
    if len(chunks) != header["chunks"]:
        raise PlanMissing(f"{path} holds {len(chunks)} chunks, its header says "
                          f"{header['chunks']}")
    return chunks


def names(client: KazooClient, folder: str) -> set[str]:
    """The copy ids of the plans under ``folder``."""
    try:
        return {copy_id(child) for child in client.get_children(folder)}
    except NoNodeError:
        return set()


def delete(client: KazooClient, path: str) -> None:
    """The plan and its parts gone (gone already: nothing to do)."""
    try:
        client.delete(path, recursive=True)
    except (NoNodeError, NotEmptyError):  # (NotEmpty: a part made meanwhile, next time)
        pass


def bound(value: object) -> str | None:
    """A chunk bound as JSON text (None: unbounded), typed as the free door's keys are."""
    return None if value is None else encode_key([value])


def unbound(text: str | None) -> object:
    return None if text is None else decode_key(text)[0]
