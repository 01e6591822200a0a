"""Which pipelines this node runs: those of STARTed channels it is a candidate for, whose
``mainstem`` ephemeral znode it holds. Redefined pipelines restart with the new version, and
so do the pipelines of a redefined source (its host, port, user: it is stored on its own);
paused, stopped or deleted ones stop within a reconcile. A pipeline that failed for good
starts again once its channel's status was written since it started (its pause gave way to
the operator's ``setl channel start``), never while its pause stands. Losing the ZooKeeper
session stops every pipeline at once, also one still starting; a pipeline starts only while
ZooKeeper answers, and never beside an earlier runner of the same pipeline that has not
ended yet."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Mapping

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError

from node.pipeline import LOST_OWNERSHIP, PipelineContext, PipelineRunner
from node.spark import SparkRunner
from shared.catalog import Catalog, ChannelRecord
from shared.errors import CoordinationError
from shared.model import ChannelStatus, Pipeline
from shared.zk import ZkPaths

log = logging.getLogger("setl.node.supervisor")
# what a runner runs: its channel's version, and (name, version) of each source it uses
Definition = tuple[int, frozenset[tuple[str, int]]]
STOP_WAIT_S = 30.0  # how long a reconcile waits for the runners it stops, all together


def sources_of(pipeline: Pipeline) -> set[str]:
    """The sources a runner of ``pipeline`` is given: its source, its pairs' targets and its
    central free door's (on any server): those it connects to, and whose redefinition
    restarts it. Not :func:`shared.catalog.sources_used`, on purpose: that one is every
    name a channel's definition holds, which must stay defined while it exists — the
    pipeline's own ``target`` too, which its pairs may all leave for other data sources
    (shards), and the pairs' sources as written; a runner given those would read their
    definitions and restart when one changed, for sources it never connects to."""
    names = {pipeline.source} | {pair.target.datasource for pair in pipeline.pairs}
    return names | ({pipeline.params.free_door_source} - {""})


class Supervisor:
    def __init__(self, node_id: int, client: KazooClient, paths: ZkPaths, catalog: Catalog,
                 spark: SparkRunner, closing: threading.Event | None = None) -> None:
        self.node_id, self.client, self.paths = node_id, client, paths
        self.catalog, self.spark = catalog, spark
        self.closing = closing or threading.Event()  # the node is shutting down
        self.runners: dict[str, tuple[PipelineRunner, Definition]] = {}
        # the version of its channel's status znode each pipeline's runner started under
        self._status_at: dict[str, int] = {}
        self._leaving: list[PipelineRunner] = []  # asked to stop, maybe not ended yet
        self._lock = threading.Lock()
        client.add_listener(self._on_state)

    def running(self) -> list[str]:
        with self._lock:
            return sorted(pid for pid, (runner, _) in self.runners.items() if runner.alive)

    def reconcile(self, records: list[ChannelRecord],
                  sources: Mapping[str, int] | None = None) -> None:
        """Run the pipelines of ``records`` this node should run; ``sources``: each source's
        definition version (a runner whose source changed restarts, as a redefined one)."""
        desired = {}
        for record in records:
            if record.status is not ChannelStatus.START:
                continue
            for pipeline in record.channel.pipelines:
                if pipeline.is_candidate(self.node_id):
                    used = frozenset((name, (sources or {}).get(name, 0))
                                     for name in sources_of(pipeline))
                    desired[record.channel.pipeline_id(pipeline)] = (record, pipeline,
                                                                     (record.version, used))
        with self._lock:
            current = dict(self.runners)
        going = {pid: runner for pid, (runner, definition) in current.items()
                 if pid not in desired or desired[pid][2] != definition}
        self._stop(going)
        for pid, (runner, _) in current.items():
            if pid in going:
                continue
            if runner.state in ("fenced", LOST_OWNERSHIP) and not runner.alive:
                with self._lock:  # another owner has it; ours may take it back later
                    self.runners.pop(pid, None)
            elif runner.state == "failed" and not runner.alive and \
                    self._started_again(pid, desired[pid][0]):
                with self._lock:
                    self.runners.pop(pid, None)
                self._release(pid)  # and it starts again below, as any pipeline not running
        if not self.client.connected:
            return  # no pipeline starts without ZooKeeper: it decides who owns one
        self._release_left()
        for pid, (record, pipeline, definition) in desired.items():
            if self.closing.is_set():
                return
            with self._lock:
                if pid in self.runners or self._still_leaving(pid):
                    continue
            held = self._acquire(pid)
            if held is not None:
                self._start(pid, record, pipeline, definition, *held)

    def _started_again(self, pid: str, record: ChannelRecord) -> bool:
        """Whether the channel of ``pid``, whose runner failed for good and ended, was
        started again since that runner started: its status is START at another version
        (its pause gave way to the operator's start, or the operator started it after the
        pause). Read afresh: the runner ended after its pause, so a pause that landed shows
        here (``record`` may have been read before it did)."""
        if record.status_version == self._status_at.get(pid):
            return False
        try:
            status, version = self.catalog.status_at(record.channel.name)
        except (KazooException, CoordinationError) as exc:
            log.warning("event=status_unreadable pipeline=%s error=%r", pid, exc)
            return False  # the next reconcile asks again
        if status is not ChannelStatus.START or version == self._status_at.get(pid):
            return False
        log.info("event=pipeline_started_again pipeline=%s reason=\"failed for good; channel "
                 "%s started again since (status version %d, the runner's %d)\"", pid,
                 record.channel.name, version, self._status_at.get(pid, -1))
        return True

    def _still_leaving(self, pid: str) -> bool:
        """Whether an earlier runner of ``pid`` has not ended yet (caller holds the lock)."""
        return any(runner.pipeline_id == pid and runner.alive for runner in self._leaving)

    def _release_left(self) -> None:
        """Give up the pipelines of stopped runners that ended only after their stop."""
        with self._lock:
            ended = [runner for runner in self._leaving if not runner.alive]
            self._leaving = [runner for runner in self._leaving if runner.alive]
            pids = {runner.pipeline_id for runner in ended} - set(self.runners)
        for pid in sorted(pids):
            self._release(pid)

    def _start(self, pid: str, record: ChannelRecord, pipeline: Pipeline,
               definition: Definition, epoch: int, session: int) -> None:
        try:
            sources = {name: self.catalog.source(name) for name in sources_of(pipeline)}
            context = PipelineContext(self.node_id, record.channel, pipeline,
                                      record.version, sources, self.spark, self.client,
                                      self.paths, epoch,
                                      owns=functools.partial(self._owns, pid, epoch, session))
            runner = PipelineRunner(context)
        except Exception as exc:  # (a definition this node cannot run: the others go on)
            log.error("event=pipeline_not_started pipeline=%s error=%r", pid, str(exc))
            self._release(pid)
            return
        with self._lock:
            if pid in self.runners or self._still_leaving(pid):
                return  # one runner per pipeline in this node, whatever happened meanwhile
            self.runners[pid] = (runner, definition)
            self._status_at[pid] = record.status_version
        runner.start()
        log.info("event=pipeline_assigned pipeline=%s node=%d version=%d epoch=%d", pid,
                 self.node_id, record.version, epoch)

    def _stop(self, runners: Mapping[str, PipelineRunner]) -> None:
        """Stop these runners (their definitions changed or went), all at once, and wait for
        them against one deadline, :data:`STOP_WAIT_S` (a source many pipelines use waited
        that long once per pipeline, and no other channel was acted on meanwhile); then give up the
        pipelines of those that ended. One not ended yet is left to :meth:`_release_left`.
        A shutdown meanwhile leaves them to :meth:`stop_all`."""
        if not runners:
            return
        for runner in runners.values():
            runner.request_stop()
        deadline = time.monotonic() + STOP_WAIT_S
        for runner in runners.values():
            while not runner.join(min(0.2, deadline - time.monotonic())) and \
                    time.monotonic() < deadline:
                if self.closing.is_set():
                    return
        for pid, runner in runners.items():
            with self._lock:
                self.runners.pop(pid, None)
                if runner.alive:
                    self._leaving.append(runner)
            self.publish(runner)
            if not runner.alive:
                self._release(pid)

    def stop_all(self, wait_s: float) -> list[PipelineRunner]:
        """Stop every runner at once and wait for them, at most ``wait_s`` in all; returns
        the runners that were running (for :meth:`goodbye`). Nothing here calls ZooKeeper:
        the position that counts is on the target."""
        with self._lock:
            current = [runner for runner, _ in self.runners.values()]
            self.runners.clear()
            waiting = current + self._leaving
        for runner in waiting:
            runner.request_stop()
        deadline = time.monotonic() + wait_s
        for runner in waiting:
            if not runner.join(deadline - time.monotonic()):
                log.warning("event=pipeline_stop_timeout pipeline=%s state=%s waited_s=%g "
                            "hint=\"the node exits anyway; the target's position row makes "
                            "the restart exact\"", runner.pipeline_id, runner.state, wait_s)
        return current

    def goodbye(self, runners: list[PipelineRunner]) -> None:
        """Publish the final state of ``runners`` and give up their pipelines (ZooKeeper
        drops them anyway when the session ends; this makes it immediate)."""
        for runner in runners:
            self.publish(runner)
            if not runner.alive:
                self._release(runner.pipeline_id)

    def _acquire(self, pid: str) -> tuple[int, int] | None:
        """Hold the pipeline's mainstem; return its czxid (the owner epoch) and the session
        that holds it, or None."""
        path = self.paths.mainstem(pid)
        try:
            self.client.create(path, str(self.node_id).encode(), ephemeral=True, makepath=True)
        except NodeExistsError:
            pass
        except KazooException as exc:
            log.warning("event=mainstem_failed pipeline=%s error=%r", pid, exc)
            return None
        try:
            stat = self.client.exists(path)
        except KazooException as exc:
            log.warning("event=mainstem_failed pipeline=%s error=%r", pid, exc)
            return None
        session = _session(self.client)
        if stat is None or session is None or stat.ephemeralOwner != session:
            return None
        return int(stat.czxid), session

    def _owns(self, pid: str, epoch: int, session: int) -> bool:
        """Whether this node still holds ``pid`` as it did when it took it (same session,
        same mainstem znode); False whenever ZooKeeper cannot say."""
        if _session(self.client) != session or not self.client.connected:
            return False
        try:
            stat = self.client.exists(self.paths.mainstem(pid))
        except KazooException:
            return False
        return stat is not None and stat.ephemeralOwner == session and stat.czxid == epoch

    def _release(self, pid: str) -> None:
        """Give up the pipeline's mainstem if this session holds it (never another's)."""
        path = self.paths.mainstem(pid)
        try:
            stat = self.client.exists(path)
            if stat is not None and stat.ephemeralOwner == _session(self.client):
                self.client.delete(path, version=stat.version)
        except KazooException:  # NoNodeError included: someone else's business now
            pass

    def publish(self, runner: PipelineRunner) -> None:
        runner.publish()

    def publish_all(self) -> None:
        if not self.client.connected:
            return
        with self._lock:
            runners = [runner for runner, _ in self.runners.values()]
        for runner in runners:
            self.publish(runner)

    def _on_state(self, state: str) -> None:
        """Session lost: stop every runner at once, also one still starting (it checks, after
        each blocking step, that it may go on). Runs on kazoo's thread: nothing blocks."""
        if state == KazooState.LOST:
            with self._lock:
                runners = [runner for runner, _ in self.runners.values()]
                self.runners.clear()
                self._leaving += runners
            if runners or not self.closing.is_set():  # not the node's own goodbye
                log.error("event=zk_session_lost node=%d action=stop_all_pipelines "
                          "pipelines=%s", self.node_id,
                          ",".join(runner.pipeline_id for runner in runners) or "-")
            for runner in runners:
                runner.request_stop()


def _session(client: KazooClient) -> int | None:
    session = client.client_id
    return int(session[0]) if session else None
