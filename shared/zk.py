"""ZooKeeper: every path setl uses, and the one way to connect (errors translated).

Layout under the configurable root (default ``/setl``)::

    config/sources/{name}        StoredSource (protobuf)
    config/channels/{name}       StoredChannel (protobuf)
    channels/{name}/status       START | PAUSE | STOP
    nodes/{id}                   NodeInfo (protobuf), ephemeral
    manager/leader               leader's gRPC address, ephemeral
    manager/alarms               AlarmBoard (protobuf): firing and recently resolved alarms
    pipelines/{pid}/mainstem     id of the node running Select, ephemeral
    pipelines/{pid}/cursor       last loaded position
    pipelines/{pid}/stats        PipelineState (protobuf)
    pipelines/{pid}/acked        a subscription's acknowledged position, owner epoch (JSON)
    pipelines/{pid}/unacked      batches its reader had not acknowledged at a pause (JSON)
    pipelines/{pid}/held         where each target was when a position reset blanked its row
    pipelines/{pid}/snapshot     the pipeline's snapshots: tables, chunks done, progress (JSON)
    pipelines/{pid}/snapshot-plans/{copy}   a copy's chunks, written once (zlib JSON in parts)
    pipelines/{pid}/snapshot-requests/{n}   tables asked to be copied (JSON), sequential
    pipelines/{pid}/snapshot-control        {"paused": bool} (JSON)
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, OperationTimeoutError
from kazoo.handlers.threading import AsyncResult, KazooTimeoutError, SequentialThreadingHandler
from kazoo.protocol.states import ZnodeStat
from kazoo.retry import KazooRetry

from shared.errors import CoordinationError
from shared.lifecycle import run_bounded
from shared.settings import ZkSettings

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

    def primary(self, source: str) -> str:
        """Which member of a replica-set source is its primary now (JSON: member, from,
        at_ms, gtid, by): written when it switched, read by the manager and every node."""
        return self._join("primaries", source)

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

    @property
    def alarms(self) -> str:
        return self._join("manager", "alarms")

    def pipeline(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id)

    def mainstem(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id, "mainstem")

    def cursor(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id, "cursor")

    def acked(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id, "acked")

    def unacked(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id, "unacked")

    def held(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id, "held")

    def stats(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id, "stats")

    def snapshot(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id, "snapshot")

    def snapshot_plans(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id, "snapshot-plans")

    def snapshot_requests(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id, "snapshot-requests")

    def snapshot_control(self, pipeline_id: str) -> str:
        return self._join("pipelines", pipeline_id, "snapshot-control")


class _BoundedResult(AsyncResult):
    """A kazoo result whose blocking ``get()`` gives up after the client's call timeout."""

    def __init__(self, handler: SequentialThreadingHandler, timeout_s: float) -> None:
        super().__init__(handler)
        self.timeout_s = timeout_s

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if not block or timeout is not None:
            return super().get(block, timeout)
        try:
            return super().get(True, self.timeout_s)
        except KazooTimeoutError:  # a KazooException: callers and kazoo's retry handle it
            raise OperationTimeoutError(
                f"ZooKeeper did not answer within {self.timeout_s:g}s") from None


class BoundedHandler(SequentialThreadingHandler):
    """kazoo's threading handler, but every blocking call (``get``, ``set``, ``create``,
    ``commit``, and those the watch recipes make) waits at most ``call_timeout_s``: kazoo
    itself waits for ever while the connection is down."""

    def __init__(self, call_timeout_s: float) -> None:
        super().__init__()
        self.call_timeout_s = call_timeout_s

    def async_result(self) -> _BoundedResult:
        return _BoundedResult(self, self.call_timeout_s)


def put(zk: KazooClient, path: str, data: bytes) -> None:
    """``data`` at ``path``, the node made (with its parents) where missing."""
    try:
        zk.set(path, data)
    except NoNodeError:
        try:
            zk.create(path, data, makepath=True)
        except NodeExistsError:  # made meanwhile by another writer: ours goes over it
            zk.set(path, data)


def remove(zk: KazooClient, path: str) -> None:
    """``path`` gone, with what is below it (gone already: nothing to do)."""
    try:
        zk.delete(path, recursive=True)
    except NoNodeError:
        pass


def landed(zk: KazooClient, path: str, data: bytes | None, version: int) -> bool:
    """Whether a conditional write whose answer was lost (ZooKeeper applied it, then the
    connection dropped) landed: the znode is at ``version`` holding ``data`` (None: no such
    write)."""
    if data is None:
        return False
    try:
        found, stat = zk.get(path)
    except NoNodeError:
        return False
    return stat.version == version and found == data


def write_over(zk: KazooClient, path: str, data: bytes, version: int | None,
               lost: bytes | None) -> int:
    """``data`` written over ``version`` of ``path``, the one its writer knows (made, where
    it knows none: never over one made meanwhile); the version written. A write whose answer
    was lost (``lost``: its data) that landed counts as written. BadVersionError when
    someone else's write is there."""
    return written_over(zk, path, data, version, lost).version


def written_over(zk: KazooClient, path: str, data: bytes, version: int | None,
                 lost: bytes | None) -> ZnodeStat:
    """:func:`write_over`, answering the znode's stat as written (its ``mzxid``: when)."""
    expected = 0 if version is None else version + 1
    try:
        if version is None:
            return zk.create(path, data, makepath=True, include_data=True)[1]
        return zk.set(path, data, version=version)
    except (NodeExistsError, BadVersionError, NoNodeError):
        if not landed(zk, path, lost, expected):
            raise BadVersionError() from None
    return zk.set(path, data, version=expected)


def client(settings: ZkSettings) -> KazooClient:
    """A client that is not connected yet (see :func:`start`); its calls are bounded."""
    return KazooClient(
        hosts=settings.hosts, timeout=settings.session_timeout_s,
        handler=BoundedHandler(settings.call_timeout_s),
        connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=2),
        command_retry=KazooRetry(max_tries=5, delay=0.1, max_delay=1),
    )


def start(zk: KazooClient, settings: ZkSettings, stop: threading.Event | None = None,
          clock: Callable[[], float] = time.monotonic) -> bool:
    """Connect, waiting for ZooKeeper as long as it takes and saying so every
    ``connect_timeout_s``; False if ``stop`` was set meanwhile. With ``give_up_after_s`` it
    raises CoordinationError once that much time passed without an answer."""
    stop = stop or threading.Event()
    connected, started = zk.start_async(), clock()
    say_at = started + settings.connect_timeout_s
    while not connected.wait(0.2) and not stop.is_set():
        now = clock()
        if settings.give_up_after_s and now - started >= settings.give_up_after_s:
            close(zk)
            raise CoordinationError(
                f"ZooKeeper at {settings.hosts} did not answer within "
                f"{settings.give_up_after_s:g}s (zookeeper.give_up_after_s); check that it runs "
                "and that 'zookeeper.hosts' in the config names it")
        if now >= say_at:
            say_at = now + settings.connect_timeout_s
            log.warning("event=zk_waiting hosts=%s waited_s=%.0f hint=\"start ZooKeeper or fix "
                        "zookeeper.hosts; the daemon carries on when it answers\"",
                        settings.hosts, now - started)
    if stop.is_set():
        close(zk)
        return False
    log.info("event=zk_connected hosts=%s session_timeout_s=%.1f waited_s=%.1f", settings.hosts,
             settings.session_timeout_s, clock() - started)
    return True


def connect(settings: ZkSettings, stop: threading.Event | None = None) -> KazooClient | None:
    """A connected client (waiting for ZooKeeper as :func:`start` does); None if ``stop`` was
    set while waiting."""
    zk = client(settings)
    return zk if start(zk, settings, stop) else None


def close(zk: KazooClient, budget_s: float = 3.0) -> bool:
    """End the session (its ephemeral znodes go at once) and free the client, waiting at
    most ``budget_s``: kazoo's stop joins its worker threads, which may be inside a call
    while ZooKeeper is gone. False when it did not finish in time (the process can exit
    anyway: kazoo's threads are daemons, and its exit hook is taken out)."""
    def stop_and_close() -> None:
        try:
            zk.stop()
            zk.close()
        except Exception as exc:  # kazoo raises plain Exceptions here too
            log.warning("event=zk_close_failed error=%r", exc)

    if run_bounded(stop_and_close, budget_s):
        return True
    atexit.unregister(zk.handler.stop)
    log.warning("event=zk_close_abandoned waited_s=%g hint=\"ZooKeeper did not answer; the "
                "session's ephemeral znodes go when it expires\"", budget_s)
    return False
