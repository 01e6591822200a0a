"""The pipeline's cursor in ZooKeeper: the position and processId of the last loaded batch.

Published only after Load committed, so a restart resumes at or before the first change
that is not on the target yet (the target-side position row makes the replay harmless).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from shared.model import BinlogPosition
from shared.zk import ZkPaths


@dataclass(frozen=True)
class Cursor:
    position: BinlogPosition
    process_id: int = 0

    def to_json(self) -> bytes:
        return json.dumps({"file": self.position.file, "pos": self.position.pos,
                           "gtid": self.position.gtid, "process_id": self.process_id}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Cursor:
        raw = json.loads(data)
        return cls(BinlogPosition(raw["file"], int(raw["pos"]), raw.get("gtid", "")),
                   int(raw.get("process_id", 0)))


class CursorStore:
    def __init__(self, client: KazooClient, paths: ZkPaths, pipeline_id: str) -> None:
        self.client, self.path = client, paths.cursor(pipeline_id)

    def load(self) -> Cursor | None:
        try:
            data, _ = self.client.get(self.path)
        except NoNodeError:
            return None
        return Cursor.from_json(data) if data else None

    def save(self, cursor: Cursor) -> None:
        data = cursor.to_json()
        try:
            self.client.set(self.path, data)
        except NoNodeError:
            self.client.create(self.path, data, makepath=True)


class CursorPublisher:
    """Publishes the newest cursor off the load path: at most every ``interval_s``, from a
    thread of its own. The cursor is a restart hint (the target's position row decides), so
    a cursor that lags by a few batches costs a replay that Load skips, never a row."""

    def __init__(self, store: CursorStore, interval_s: float = 0.2,
                 on_error: Callable[[Exception], None] = lambda exc: None) -> None:
        self.store, self.interval_s, self.on_error = store, interval_s, on_error
        self._newest: Cursor | None = None
        self._published: Cursor | None = None
        self._changed = threading.Condition()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cursor-publisher", daemon=True)
        self._thread.start()

    def publish(self, cursor: Cursor) -> None:
        with self._changed:
            self._newest = cursor
            self._changed.notify()

    def close(self, timeout_s: float = 5.0) -> None:
        """Publish the newest cursor (waiting at most ``timeout_s``) and stop."""
        with self._changed:
            self._closed.set()
            self._changed.notify()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            with self._changed:
                while self._newest is self._published and not self._closed.is_set():
                    self._changed.wait()
                cursor, closing = self._newest, self._closed.is_set()
            if cursor is not None and cursor is not self._published:
                try:
                    self.store.save(cursor)
                    self._published = cursor
                except Exception as exc:  # kazoo errors: the next publish tries again
                    self.on_error(exc)
            if closing:
                return
            self._closed.wait(self.interval_s)  # coalesce: what comes meanwhile goes next
