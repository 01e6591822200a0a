"""ZooKeeper: every path setl uses, and the one way to connect (errors translated).

Layout under the configurable root (default ``/setl``)::

    config/sources/{name}        StoredSource (protobuf)
    config/channels/{name}       StoredChannel (protobuf)
    channels/{name}/status       START | PAUSE | STOP
    nodes/{id}                   NodeInfo (protobuf), ephemeral
    manager/leader               leader's gRPC address, ephemeral
    pipelines/{pid}/mainstem     id of the node running Select, ephemeral
    pipelines/{pid}/cursor       last loaded position
    pipelines/{pid}/stats        PipelineState (protobuf)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from shared.errors import CoordinationError

log = logging.getLogger("setl.zk")


@dataclass(frozen=True)
class ZkPaths:
    """Every ZooKeeper path, derived from one root."""

    root: str = "/setl"

    def __post_init__(self) -> None:
        if not self.root.startswith("/") or (self.root.endswith("/") and self.root != "/"):
            raise CoordinationError(f"ZooKeeper root {self.root!r} must start with '/' and not "
                                    "end with '/'")

    def _join(self, *parts: str | int) -> str:
        return "/".join([self.root.rstrip("/"), *map(str, parts)])

    @property
    def sources(self) -> str:
        return self._join("config", "sources")

    def source(self, name: str) -> str:
        return self._join("config", "sources", name)

    @property
    def channels(self) -> str:
        return self._join("config", "channels")

    def channel(self, name: str) -> str:
        return self._join("config", "channels", name)

    @property
    def channel_states(self) -> str:
        return self._join("channels")

    def channel_state(self, name: str) -> str:
        return self._join("channels", name)

    def channel_status(self, name: str) -> str:
        return self._join("channels", name, "status")

    @property
    def nodes(self) -> str:
        return self._join("nodes")

    def node(self, node_id: int) -> str:
        return self._join("nodes", node_id)

    @property
    def leader(self) -> str:
        return self._join("manager", "leader")

    def pipeline(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id)

    def mainstem(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id, "mainstem")

    def cursor(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id, "cursor")

    def stats(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id, "stats")


def connect(hosts: str, session_timeout_s: float = 10.0, connect_timeout_s: float = 10.0,
            ) -> KazooClient:
    """A started client; CoordinationError with a hint when ZooKeeper does not answer."""
    client = KazooClient(
        hosts=hosts, timeout=session_timeout_s,
        connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=2),
        command_retry=KazooRetry(max_tries=5, delay=0.1, max_delay=1),
    )
    try:
        client.start(timeout=connect_timeout_s)
    except (KazooTimeoutError, KazooException) as exc:
        client.stop()
        client.close()
        raise CoordinationError(
            f"ZooKeeper at {hosts} did not answer within {connect_timeout_s:.0f}s ({exc}); "
            "check that it runs and that 'zookeeper.hosts' in the config names it") from None
    log.info("event=zk_connected hosts=%s session_timeout_s=%.1f", hosts, session_timeout_s)
    return client


def close(client: KazooClient) -> None:
    try:
        client.stop()
        client.close()
    except KazooException:
        log.warning("event=zk_close_failed", exc_info=True)
