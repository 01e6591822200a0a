"""Watch the stored definitions (channels and sources) and channel status; wake the node
when anything changes."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from shared.catalog import Catalog, ChannelRecord
from shared.zk import ZkPaths

log = logging.getLogger("setl.node.watcher")


@dataclass(frozen=True)
class Stored:
    """What the node runs from: the channels, and each source's definition version (a
    source is stored on its own, and its pipelines' channels do not change with it)."""

    records: list[ChannelRecord]
    sources: dict[str, int]


class DefinitionWatcher:
    """Sets ``changed`` whenever a channel is added, removed, redefined or changes status,
    or a source is added, removed or redefined."""

    def __init__(self, client: KazooClient, paths: ZkPaths, catalog: Catalog) -> None:
        self.client, self.paths, self.catalog = client, paths, catalog
        self.changed = threading.Event()
        self._watched: set[str] = set()
        self._watched_sources: set[str] = set()

    def start(self) -> None:
        self.client.ensure_path(self.paths.channels)
        self.client.ensure_path(self.paths.sources)
        self.client.ChildrenWatch(self.paths.channels, self._on_children)
        self.client.ChildrenWatch(self.paths.sources, self._on_sources)
        self.changed.set()

    def _on_sources(self, names: list[str]) -> None:
        for name in names:
            if name not in self._watched_sources:
                self._watched_sources.add(name)
                self.client.DataWatch(self.paths.source(name),
                                      self._on_data(name, self._watched_sources))
        self.changed.set()

    def _on_children(self, names: list[str]) -> None:
        for name in names:
            if name not in self._watched:
                self._watched.add(name)
                self.client.DataWatch(self.paths.channel(name), self._on_data(name, self._watched))
                self.client.DataWatch(self.paths.channel_status(name),
                                      self._on_data(name, self._watched))
        self.changed.set()

    def _on_data(self, name: str, watched: set[str]):  # type: ignore[no-untyped-def]
        def callback(data: bytes | None, stat: object, event: object = None) -> bool:
            self.changed.set()
            if data is None and stat is None and event is not None:
                watched.discard(name)
                return False  # the znode is gone: stop watching it
            return True
        return callback

    def snapshot(self) -> Stored:
        """The current definitions (clears ``changed`` first, so no change is missed)."""
        self.changed.clear()
        try:
            return Stored(self.catalog.channels(), self.catalog.source_versions())
        except NoNodeError:
            return Stored([], {})
