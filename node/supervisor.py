"""Which pipelines this node runs: those of STARTed channels it is a candidate for, whose
``mainstem`` ephemeral znode it holds. Redefined pipelines restart with the new version;
paused, stopped or deleted ones stop within a reconcile. Losing the ZooKeeper session stops
every pipeline at once."""

from __future__ import annotations

import logging
import threading

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from node.pipeline import PipelineContext, PipelineRunner
from node.spark import SparkRunner
from shared.catalog import Catalog, ChannelRecord
from shared.errors import SetlError
from shared.model import ChannelStatus
from shared.zk import ZkPaths

log = logging.getLogger("setl.node.supervisor")


class Supervisor:
    def __init__(self, node_id: int, client: KazooClient, paths: ZkPaths, catalog: Catalog,
                 spark: SparkRunner) -> None:
        self.node_id, self.client, self.paths = node_id, client, paths
        self.catalog, self.spark = catalog, spark
        self.runners: dict[str, tuple[PipelineRunner, int]] = {}
        self._lock = threading.Lock()
        client.add_listener(self._on_state)

    def running(self) -> list[str]:
        with self._lock:
            return sorted(pid for pid, (runner, _) in self.runners.items() if runner.alive)

    def reconcile(self, records: list[ChannelRecord]) -> None:
        desired = {}
        for record in records:
            if record.status is not ChannelStatus.START:
                continue
            for pipeline in record.channel.pipelines:
                if pipeline.is_candidate(self.node_id):
                    desired[record.channel.pipeline_id(pipeline)] = (record, pipeline)
        with self._lock:
            current = dict(self.runners)
        for pid, (runner, version) in current.items():
            record = desired.get(pid, (None,))[0]
            if record is None or record.version != version:
                self._stop(pid, runner)
            elif runner.state == "fenced" and not runner.alive:
                with self._lock:  # a newer owner took it; ours may take it back later
                    self.runners.pop(pid, None)
        for pid, (record, pipeline) in desired.items():
            with self._lock:
                if pid in self.runners:
                    continue
            epoch = self._acquire(pid)
            if epoch is not None:
                self._start(pid, record, pipeline, epoch)

    def _start(self, pid: str, record: ChannelRecord, pipeline: object, epoch: int) -> None:
        try:
            names = {pipeline.source} | {pair.target.datasource  # type: ignore[attr-defined]
                                         for pair in pipeline.pairs}  # type: ignore[attr-defined]
            sources = {name: self.catalog.source(name) for name in names}
        except SetlError as exc:
            log.error("event=pipeline_not_started pipeline=%s error=%s", pid, exc)
            self._release(pid)
            return
        context = PipelineContext(self.node_id, record.channel, pipeline, record.version,  # type: ignore[arg-type]
                                  sources, self.spark, self.client, self.paths, epoch)
        runner = PipelineRunner(context)
        with self._lock:
            self.runners[pid] = (runner, record.version)
        runner.start()
        log.info("event=pipeline_assigned pipeline=%s node=%d version=%d", pid, self.node_id,
                 record.version)

    def _stop(self, pid: str, runner: PipelineRunner, wait_s: float = 30.0) -> None:
        runner.stop(wait_s)
        self.publish(runner)
        with self._lock:
            self.runners.pop(pid, None)
        self._release(pid)

    def stop_all(self, wait_s: float = 30.0) -> None:
        with self._lock:
            current = dict(self.runners)
        for runner, _ in current.values():
            runner.stop_event.set()  # all at once, then wait for each
        for pid, (runner, _) in current.items():
            self._stop(pid, runner, wait_s)

    def _acquire(self, pid: str) -> int | None:
        """Hold the pipeline's mainstem; return its czxid (the owner epoch), or None."""
        path = self.paths.mainstem(pid)
        try:
            self.client.create(path, str(self.node_id).encode(), ephemeral=True, makepath=True)
        except NodeExistsError:
            pass
        except KazooException as exc:
            log.warning("event=mainstem_failed pipeline=%s error=%r", pid, exc)
            return None
        stat = self.client.exists(path)
        if stat is None or stat.ephemeralOwner != self.client.client_id[0]:
            return None
        return int(stat.czxid)

    def _release(self, pid: str) -> None:
        try:
            self.client.delete(self.paths.mainstem(pid))
        except (NoNodeError, KazooException):
            pass

    def publish(self, runner: PipelineRunner) -> None:
        data = runner.snapshot().SerializeToString()
        path = self.paths.stats(runner.pipeline_id)
        try:
            self.client.set(path, data)
        except NoNodeError:
            try:
                self.client.create(path, data, makepath=True)
            except KazooException:
                pass
        except KazooException as exc:
            log.debug("event=stats_failed pipeline=%s error=%r", runner.pipeline_id, exc)

    def publish_all(self) -> None:
        with self._lock:
            runners = [runner for runner, _ in self.runners.values()]
        for runner in runners:
            self.publish(runner)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            log.error("event=zk_session_lost node=%d action=stop_all_pipelines", self.node_id)
            with self._lock:
                runners = [runner for runner, _ in self.runners.values()]
                self.runners.clear()
            for runner in runners:
                runner.stop_event.set()
                threading.Thread(target=runner.stop, daemon=True).start()
