"""A subscription's position: what its reader acknowledged (``pipelines/{pid}/acked`` in
ZooKeeper, JSON), the subscription's counterpart of a database target's position row.

It is read by the node that claims the pipeline (where Select resumes), written by that
node on each acknowledgement, and shown and moved by ``setl position``. Its owner epoch
fences older owners as a position row's does: a write is conditional on the version its
writer last saw, and a writer that finds a newer epoch stops.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from shared import zk
from shared.errors import FencedError
from shared.model import BinlogPosition


@dataclass(frozen=True)
class Acked:
    position: BinlogPosition  # no file: nothing acknowledged yet
    process_id: int = 0  # the acknowledged batch
    epoch: int = 0  # the owner that wrote it
    run: str = ""  # the pipeline's life (as a position row's)

    def to_json(self) -> bytes:
        p = self.position
        return json.dumps({"file": p.file, "pos": p.pos, "gtid": p.gtid, "server": p.server,
                           "process_id": self.process_id, "epoch": self.epoch,
                           "run": self.run}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Acked:
        raw = json.loads(data or b"{}")
        return cls(BinlogPosition(str(raw.get("file", "")), int(raw.get("pos", 0)),
                                  str(raw.get("gtid", "")), str(raw.get("server", ""))),
                   int(raw.get("process_id", 0)), int(raw.get("epoch", 0)),
                   str(raw.get("run", "")))


class AckStore:
    """The acknowledged position of one pipeline, written by its owner of ``epoch``."""

    def __init__(self, client: KazooClient, path: str, target: str, epoch: int) -> None:
        self.client, self.path, self.target, self.epoch = client, path, target, epoch
        self._version = -1  # the znode's version this owner last wrote or read
        self._lost: bytes | None = None  # a write whose answer never came

    def claim(self, run: str) -> Acked | None:
        """Fence older owners (the epoch written) and read where the subscription stands."""
        while True:
            found = read(self.client, self.path)
            if found is None:
                try:
                    self.client.create(self.path, Acked(BinlogPosition(), 0, self.epoch,
                                                        run).to_json(), makepath=True)
                except NodeExistsError:
                    continue
                self._version = 0
                return None
            acked, version = found
            if acked.epoch > self.epoch:
                raise FencedError(f"target {self.target}: subscription {self.path} is "
                                  f"owned by epoch {acked.epoch}, newer than this owner's "
                                  f"{self.epoch}", self.target, acked.epoch)
            try:
                stat = self.client.set(self.path, _with(acked, self.epoch).to_json(),
                                       version=version)
            except BadVersionError:
                continue
            self._version = stat.version
            return acked if acked.position.file else None

    def take_over(self, found: int) -> None:
        """Adopt the epoch above ``found`` (ZooKeeper's history went back)."""
        self.epoch = found + 1

    def write(self, acked: Acked) -> None:
        """Move the position; FencedError when a newer owner (or ``setl position``) wrote
        in between. A write whose answer was lost (the connection dropped after ZooKeeper
        applied it) left the znode one version on, holding what this owner wrote: that
        version is adopted (:meth:`_adopt_lost`), not taken for another owner's."""
        data = _with(acked, self.epoch).to_json()
        try:
            try:
                stat = self.client.set(self.path, data, version=self._version)
            except (BadVersionError, NoNodeError):
                if not self._adopt_lost():
                    raise
                stat = self.client.set(self.path, data, version=self._version)
        except (BadVersionError, NoNodeError):
            raise FencedError(f"target {self.target}: subscription {self.path} was written "
                              "by another owner: this node no longer runs it",
                              self.target) from None
        except KazooException:  # no answer: written or not, the next write finds out
            self._lost = data
            raise
        self._lost = None
        self._version = stat.version

    def _adopt_lost(self) -> bool:
        """Whether the znode is at the version after this owner's and holds the write of
        this owner's whose answer was lost (then that version is this owner's)."""
        if not zk.landed(self.client, self.path, self._lost, self._version + 1):
            return False
        self._version, self._lost = self._version + 1, None
        return True


def _with(acked: Acked, epoch: int) -> Acked:
    return Acked(acked.position, acked.process_id, epoch, acked.run)


def read(client: KazooClient, path: str) -> tuple[Acked, int] | None:
    """The acknowledged position and the znode's version (None: never claimed)."""
    try:
        data, stat = client.get(path)
    except NoNodeError:
        return None
    return Acked.from_json(data), stat.version


def move(client: KazooClient, path: str, run: str, to: BinlogPosition | None) -> None:
    """``setl position set``: the position becomes this run's; with ``to``, it moves there
    (a file-less ``to``: nothing acknowledged)."""
    found = read(client, path)
    if found is None:
        return
    acked, version = found
    if to is not None:
        acked = Acked(to if to.file else BinlogPosition(), acked.process_id, acked.epoch, run)
    else:
        acked = Acked(acked.position, acked.process_id, acked.epoch, run)
    client.set(path, acked.to_json(), version=version)


# -- what a pause left unacknowledged -------------------------------------------------------
# ``pipelines/{pid}/unacked``: written when a subscription's pipeline is about to pause with
# batches its reader has not acknowledged (before the wait for them: a crash during it leaves
# it too). It outlives the pause's published state (a start and a stop publish another) and
# holds while the acknowledged position is before ``until``: ``setl position set`` refuses a
# move past them, with --replay too. The acknowledged position reaching ``until`` retires it;
# the drain that wrote it deletes it once they are acknowledged, and ``setl position reset``
# deletes it (a set never does: a move back sends nothing until the reader acknowledges).
@dataclass(frozen=True)
class Unacked:
    start: BinlogPosition  # where the first of them begins (the acknowledged position)
    until: BinlogPosition  # where the last of them ends
    batches: int

    def to_json(self) -> bytes:
        return json.dumps({"start": _raw(self.start), "until": _raw(self.until),
                           "batches": self.batches}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Unacked:
        raw = json.loads(data or b"{}")
        return cls(_position(raw.get("start") or {}), _position(raw.get("until") or {}),
                   int(raw.get("batches", 0)))


def _raw(p: BinlogPosition) -> dict[str, object]:
    return {"file": p.file, "pos": p.pos, "gtid": p.gtid, "server": p.server}


def _position(raw: dict[str, object]) -> BinlogPosition:
    return BinlogPosition(str(raw.get("file", "")), int(str(raw.get("pos", 0))),
                          str(raw.get("gtid", "")), str(raw.get("server", "")))


def read_unacked(client: KazooClient, path: str) -> Unacked | None:
    try:
        data, _ = client.get(path)
    except NoNodeError:
        return None
    return Unacked.from_json(data)


def write_unacked(client: KazooClient, path: str, unacked: Unacked) -> None:
    zk.put(client, path, unacked.to_json())


def clear_unacked(client: KazooClient, path: str, only: Unacked | None = None) -> None:
    """Delete the record (``only``: when it is that one, not another writer's since)."""
    try:
        if only is None:
            client.delete(path)
            return
        data, stat = client.get(path)
        if Unacked.from_json(data) == only:
            client.delete(path, version=stat.version)
    except (NoNodeError, BadVersionError):  # (gone, or written again meanwhile: it stays)
        pass
