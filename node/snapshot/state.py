"""What a pipeline's snapshots are and how far they got, kept in ZooKeeper.

``pipelines/{pid}/snapshot`` holds one JSON document: the tables being (or that were)
copied, each with its chunks (split once, when the copy starts) and the chunks whose rows
are on the target. A chunk counts as done only once the batch that carried its rows is
loaded, so after a crash, a kill -9 or a move to another node the copy goes on with the
chunks not done — done ones are not read again. ``snapshot-requests/`` holds the tables
asked for (``setl snapshot``, ``start: snapshot``, a table added to a running channel), and
``snapshot-control`` whether copying is paused. The cursor and the target's position row
decide the stream as ever; this is only the copy's progress.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from node.extract.chunks import Chunk, SplitKey
from shared import zk
from shared.retl import decode_key, encode_key
from shared.snapshotctl import SnapshotControl
from shared.zk import ZkPaths

STORED_EVERY_S = 2.0  # how stale the progress of copies not running may be


@dataclass
class TableCopy:
    """One table's copy: its chunks and which of them are on the target."""

    id: str  # unique per copy: the same table copied again is another copy
    schema: str
    table: str
    where: str
    key: SplitKey
    chunks: list[Chunk]
    rows: int  # as counted (or estimated) when split
    done: set[int] = field(default_factory=set)
    read_rows: int = 0  # rows put on the target (read and not overtaken by the stream)
    state: str = "copying"  # copying | done | cancelled | failed
    error: str = ""
    started: float = field(default_factory=time.time)
    finished: float = 0.0

    @property
    def total(self) -> int:
        return len(self.chunks)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "schema": self.schema, "table": self.table, "where": self.where,
                "key": asdict(self.key), "rows": self.rows, "read_rows": self.read_rows,
                "state": self.state, "error": self.error, "started": self.started,
                "finished": self.finished, "done": _ranges(self.done),
                "chunks": [[_bound(c.low), _bound(c.high), c.nulls] for c in self.chunks]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TableCopy:
        key = SplitKey(**{**data["key"], "columns": tuple(data["key"]["columns"])})
        chunks = [Chunk(index, _unbound(low), _unbound(high), bool(nulls))
                  for index, (low, high, nulls) in enumerate(data["chunks"])]
        return cls(data["id"], data["schema"], data["table"], data["where"], key, chunks,
                   int(data["rows"]), _unranged(data["done"]), int(data["read_rows"]),
                   data["state"], data.get("error", ""), float(data["started"]),
                   float(data["finished"]))


def _bound(value: object) -> str | None:
    """A chunk bound as JSON text (None: unbounded), typed as the free door's keys are."""
    return None if value is None else encode_key([value])


def _unbound(text: str | None) -> object:
    return None if text is None else decode_key(text)[0]


def _ranges(done: set[int]) -> str:
    """Chunk indexes as ``0-120,125``: a copy of a large table keeps its state small."""
    parts, ordered = [], sorted(done)
    start = previous = None
    for index in ordered:
        if start is None:
            start = previous = index
        elif index == previous + 1:  # type: ignore[operator]
            previous = index
        else:
            parts.append(f"{start}-{previous}" if start != previous else f"{start}")
            start = previous = index
    if start is not None:
        parts.append(f"{start}-{previous}" if start != previous else f"{start}")
    return ",".join(parts)


def _unranged(text: str) -> set[int]:
    found: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return found


class SnapshotStore(SnapshotControl):
    """The snapshot znodes of one pipeline: the copies' state, the tables asked for."""

    def __init__(self, client: KazooClient, paths: ZkPaths, pipeline_id: str) -> None:
        super().__init__(client, paths, pipeline_id)
        self.path = paths.snapshot(pipeline_id)
        self._stored: tuple[float, list[dict[str, object]]] = (-STORED_EVERY_S, [])

    def stored_progress(self) -> list[dict[str, object]]:
        """The copies' progress as last saved, for a runner whose copies are not running
        (it is starting, or starting again): read at most every :data:`STORED_EVERY_S`, the
        last reading kept while ZooKeeper does not answer."""
        at, found = self._stored
        now = time.monotonic()
        if now - at >= STORED_EVERY_S:
            try:
                found = progress(self.load())
            except KazooException:
                pass
            self._stored = (now, found)
        return found

    def load(self) -> list[TableCopy]:
        try:
            data, _ = self.client.get(self.path)
        except NoNodeError:
            return []
        return [TableCopy.from_json(item) for item in json.loads(data or b"[]")]

    def save(self, copies: list[TableCopy]) -> None:
        zk.put(self.client, self.path, json.dumps([copy.to_json() for copy in copies]).encode())


def progress(copies: list[TableCopy], rate: float = 0.0) -> list[dict[str, object]]:
    """Per table of ``copies``: chunks done of all, rows, rows/s (``rate``), and an ETA."""
    found: list[dict[str, object]] = []
    for copy in copies:
        left = max(copy.rows - copy.read_rows, 0)
        found.append({"table": f"{copy.schema}.{copy.table}", "state": copy.state,
                      "chunks_done": len(copy.done), "chunks": copy.total,
                      "rows": copy.read_rows, "rows_estimated": copy.rows,
                      "rows_per_s": rate if copy.state == "copying" else 0.0,
                      "eta_s": left / rate if rate and copy.state == "copying" else 0.0,
                      "where": copy.where, "error": copy.error})
    return found
