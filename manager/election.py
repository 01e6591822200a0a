"""Leader election among managers: the leader holds the ephemeral ``manager/leader`` znode.

A standby watches the znode and tries to take it when it disappears (the leader stopped or
its ZooKeeper session expired), so a standby takes over within the session timeout.
"""

from __future__ import annotations

import logging
import threading
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

log = logging.getLogger("setl.manager.election")


class LeaderElection:
    def __init__(self, client: KazooClient, path: str, address: str) -> None:
        self.client, self.path, self.address = client, path, address
        self._leader = threading.Event()
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def is_leader(self) -> bool:
        return self._leader.is_set()

    def leader_address(self) -> str | None:
        try:
            data, _ = self.client.get(self.path)
        except (NoNodeError, KazooException):
            return None
        return data.decode() or None

    def start(self) -> None:
        self.client.add_listener(self._on_state)
        self._try()

    def stop(self) -> None:
        self._stopped = True
        self.client.remove_listener(self._on_state)
        if self.is_leader:
            try:
                self.client.delete(self.path)
            except (NoNodeError, KazooException):
                pass
        self._leader.clear()

    def _try(self) -> None:
        with self._lock:
            for _ in range(3):  # an entry gone meanwhile, or a stale one removed: again
                if self._stopped:
                    return
                try:
                    self.client.create(self.path, self.address.encode(), ephemeral=True,
                                       makepath=True)
                    self._become(True)
                    return
                except NodeExistsError:
                    pass
                except KazooException as exc:
                    self._failed(exc)
                    return
                try:
                    stat = self.client.exists(self.path, watch=self._on_event)
                except KazooException as exc:
                    self._failed(exc)
                    return
                if stat is None:
                    continue
                ours = stat.ephemeralOwner == self.client.client_id[0]
                if ours or not self._stale(stat):
                    self._become(ours)
                    return
            self.client.handler.spawn(self._try_later)

    def _stale(self, stat: object) -> bool:
        """A leader entry naming this manager's own address but another session is an
        earlier life of this manager (it died, with ZooKeeper away, before its session
        ended): no other manager can listen there, so the entry is deleted, not obeyed —
        else this manager would name itself as the leader to follow until the old session
        expires."""
        try:
            data, now = self.client.get(self.path)
        except (NoNodeError, KazooException):
            return False
        if data.decode() != self.address or now.ephemeralOwner != getattr(
                stat, "ephemeralOwner", None):
            return False
        try:
            self.client.delete(self.path, version=now.version)
        except (NoNodeError, KazooException):
            return False
        log.warning("event=stale_leader_entry_removed address=%s session=%#x", self.address,
                    now.ephemeralOwner)
        return True

    def _failed(self, exc: Exception) -> None:
        """ZooKeeper did not answer: stand by, and try again in a second."""
        log.warning("event=election_error error=%r", exc)
        self._become(False)
        self.client.handler.spawn(self._try_later)

    def _try_later(self, delay_s: float = 1.0) -> None:
        time.sleep(delay_s)
        self._try()

    def _become(self, leader: bool) -> None:
        if leader != self.is_leader:
            log.info("event=%s address=%s", "became_leader" if leader else "became_standby",
                     self.address)
        (self._leader.set if leader else self._leader.clear)()

    def _on_event(self, event: WatchedEvent) -> None:
        if event.type == EventType.DELETED and not self._stopped:
            self.client.handler.spawn(self._try)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._become(False)
        elif state == KazooState.CONNECTED and not self._stopped:
            self.client.handler.spawn(self._try)
