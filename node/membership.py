"""A node's ephemeral entry under ``nodes/{id}``: who it is and what it may run.

The entry disappears when the node's ZooKeeper session ends (clean exit, crash or network
loss), which is how the manager and other nodes learn that it is gone.
"""

from __future__ import annotations

import logging
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from shared.errors import CoordinationError
from shared.rpc import manager_pb2
from shared.zk import ZkPaths

log = logging.getLogger("setl.node.membership")


class Membership:
    def __init__(self, client: KazooClient, paths: ZkPaths, info: manager_pb2.NodeInfo) -> None:
        self.client, self.paths, self.info = client, paths, info
        self.path = paths.node(info.id)

    def register(self, wait_s: float) -> None:
        """Create the entry; a stale entry of a crashed run is waited out for ``wait_s``."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.client.create(self.path, self._data(), ephemeral=True, makepath=True)
                break
            except NodeExistsError:
                if self._owned():
                    break
                if time.monotonic() > deadline:
                    other = self._current()
                    raise CoordinationError(
                        f"node id {self.info.id} is already registered by pid {other.pid} on "
                        f"{other.host or '?'} ({other.address}); stop it or choose another --id"
                    ) from None
                time.sleep(0.5)
        self.client.add_listener(self._on_state)
        log.info("event=node_registered node=%d address=%s", self.info.id, self.info.address)

    def _owned(self) -> bool:
        stat = self.client.exists(self.path)
        return stat is not None and stat.ephemeralOwner == self.client.client_id[0]

    def _current(self) -> manager_pb2.NodeInfo:
        other = manager_pb2.NodeInfo()
        try:
            other.ParseFromString(self.client.get(self.path)[0])
        except NoNodeError:
            pass
        return other

    def _data(self) -> bytes:
        return self.info.SerializeToString(deterministic=True)

    def update(self, candidates: list[str], running: list[str]) -> None:
        self.info.candidate_pipelines[:] = candidates
        self.info.running_pipelines[:] = running
        try:
            self.client.set(self.path, self._data())
        except NoNodeError:
            self.client.handler.spawn(self._recreate)
        except KazooException as exc:
            log.warning("event=node_update_failed node=%d error=%r", self.info.id, exc)

    def _recreate(self) -> None:
        try:
            self.client.create(self.path, self._data(), ephemeral=True, makepath=True)
            log.info("event=node_reregistered node=%d", self.info.id)
        except NodeExistsError:
            pass
        except KazooException as exc:
            log.warning("event=node_register_failed node=%d error=%r", self.info.id, exc)

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self.client.handler.spawn(self._recreate)

    def leave(self) -> None:
        self.client.remove_listener(self._on_state)
        try:
            self.client.delete(self.path)
        except (NoNodeError, KazooException):
            pass
