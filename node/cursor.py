"""The pipeline's cursor in ZooKeeper: the position and processId of the last loaded batch.

Published only after Load committed, so a restart resumes at or before the first change
that is not on the target yet (the target-side position row makes the replay harmless).
"""

from __future__ import annotations

import json
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
