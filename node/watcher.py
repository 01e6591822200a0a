"""Watch the stored definitions and channel status; wake the node when anything changes."""

from __future__ import annotations

import logging
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from shared.catalog import Catalog, ChannelRecord
from shared.zk import ZkPaths

log = logging.getLogger("setl.node.watcher")


class DefinitionWatcher:
    """Sets ``changed`` whenever a channel is added, removed, redefined or changes status."""

    def __init__(self, client: KazooClient, paths: ZkPaths, catalog: Catalog) -> None:
        self.client, self.paths, self.catalog = client, paths, catalog
        self.changed = threading.Event()
        self._watched: set[str] = set()

    def start(self) -> None:
        self.client.ensure_path(self.paths.channels)
        self.client.ChildrenWatch(self.paths.channels, self._on_children)
        self.changed.set()

    def _on_children(self, names: list[str]) -> None:
        for name in names:
            if name not in self._watched:
                self._watched.add(name)
                self.client.DataWatch(self.paths.channel(name), self._on_data(name))
                self.client.DataWatch(self.paths.channel_status(name), self._on_data(name))
        self.changed.set()

    def _on_data(self, name: str):  # type: ignore[no-untyped-def]
        def callback(data: bytes | None, stat: object, event: object = None) -> bool:
            self.changed.set()
            if data is None and stat is None and event is not None:
                self._watched.discard(name)
                return False  # the znode is gone: stop watching it
            return True
        return callback

    def snapshot(self) -> list[ChannelRecord]:
        """The current definitions (clears ``changed`` first, so no change is missed)."""
        self.changed.clear()
        try:
            return self.catalog.channels()
        except NoNodeError:
            return []
