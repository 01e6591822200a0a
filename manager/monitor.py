"""What the manager watches: every ``poll_s`` it reads channels, pipeline stats and nodes
from ZooKeeper (as ``setl status`` does), keeps a short delay history per pipeline for the
status page, and evaluates the alarm rules.

Only the leader reports alarms (log, webhooks, ``manager/alarms`` in ZooKeeper); a standby
evaluates silently, so its timers and the nodes it has seen are warm when it takes over,
and shows the leader's alarms read from ZooKeeper. A new leader starts from the alarms its
predecessor stored, so none is sent twice or left unresolved. A poll that cannot read
ZooKeeper changes no alarm: missing facts are not good news.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from manager.alarms import FIRING, Alarm, AlarmEvaluator, facts_from
from manager.election import LeaderElection
from manager.views import Views
from manager.webhooks import Notifier
from shared.catalog import call
from shared.errors import SetlError
from shared.rpc import manager_pb2
from shared.settings import WebSettings
from shared.zk import ZkPaths

log = logging.getLogger("setl.manager.monitor")


@dataclass(frozen=True)
class Observation:
    at: float = 0.0  # time.time() of the read; 0: nothing read yet
    channels: tuple[manager_pb2.ChannelInfo, ...] = ()
    nodes: tuple[manager_pb2.NodeInfo, ...] = ()
    error: str = ""  # why the last poll failed ("" when it worked)


@dataclass(frozen=True)
class Sample:
    at: float
    delay_ms: int
    rows_per_second: float


@dataclass
class History:
    """Per pipeline, the samples of the last ``span_s`` seconds."""

    span_s: float
    samples: dict[str, deque[Sample]] = field(default_factory=dict)

    def add(self, at: float, states: list[manager_pb2.PipelineState]) -> None:
        current = {state.pipeline_id for state in states}
        for gone in set(self.samples) - current:
            del self.samples[gone]
        for state in states:
            kept = self.samples.setdefault(state.pipeline_id, deque())
            kept.append(Sample(at, state.delay_ms if state.owner_node else 0,
                               state.rows_per_second if state.owner_node else 0.0))
            while kept and at - kept[0].at > self.span_s:
                kept.popleft()

    def of(self, pipeline_id: str) -> list[Sample]:
        return list(self.samples.get(pipeline_id, ()))


class Monitor:
    def __init__(self, client: KazooClient, paths: ZkPaths, views: Views,
                 election: LeaderElection, evaluator: AlarmEvaluator, notifier: Notifier,
                 settings: WebSettings, clock: Callable[[], float] = time.time) -> None:
        self.client, self.paths, self.views, self.election = client, paths, views, election
        self.evaluator, self.notifier, self.settings = evaluator, notifier, settings
        self.clock = clock
        self.history = History(settings.history_s)
        self.latest = Observation()
        self.polls = 0  # successful reads of ZooKeeper so far
        self._board = manager_pb2.AlarmBoard()  # what is shown: ours, or the leader's
        self._leading = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="monitor", daemon=True)

    # -- what the page, the metrics and 'setl status' read ---------------------------------
    def alarms(self) -> list[manager_pb2.Alarm]:
        with self._lock:
            return [*self._board.firing, *self._board.resolved]

    def firing(self) -> list[manager_pb2.Alarm]:
        with self._lock:
            return list(self._board.firing)

    # -- the loop ---------------------------------------------------------------------------
    def start(self) -> None:
        self.notifier.start()
        self._thread.start()

    def stop(self) -> None:
        """Stop polling without waiting on ZooKeeper (a poll under way is left to end on its
        own); notifications still queued get a moment."""
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(1.0)
        self.notifier.stop(2.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.poll()
            except Exception:  # the page and alarms go on with the next poll
                log.exception("event=monitor_failed")
            self._stop.wait(max(0.0, self.settings.poll_s - (time.monotonic() - started)))

    def poll(self) -> None:
        """One round: read, remember, evaluate (and report, when leading)."""
        now = self.clock()
        try:
            nodes = self.views.nodes()
            channels = self.views.channels(nodes)
        except SetlError as exc:
            self.latest = Observation(now, self.latest.channels, self.latest.nodes, str(exc))
            log.warning("event=monitor_unavailable error=%s", str(exc).splitlines()[0])
            return
        self.latest = Observation(now, tuple(channels), tuple(nodes))
        self.polls += 1
        self.history.add(now, [state for info in channels for state in info.pipelines])
        leading = self.election.is_leader
        if leading and not self._leading:
            self._take_over()
        self._leading = leading
        changes = self.evaluator.evaluate(facts_from(channels, nodes))
        if not leading:
            self._show_leaders()
            return
        for alarm in changes:
            self._report(alarm)
        if changes:
            self._store()

    def _take_over(self) -> None:
        board = self._read_board()
        self.evaluator.restore([Alarm.from_proto(a) for a in board.firing],
                               [Alarm.from_proto(a) for a in board.resolved])
        log.info("event=alarms_taken_over firing=%d", len(board.firing))
        self._publish()

    def _report(self, alarm: Alarm) -> None:
        if alarm.state == FIRING:
            log.warning("event=alarm_firing rule=%s when=%s subject=%s since_ms=%d "
                        "message=\"%s\"", alarm.rule, alarm.when, alarm.subject,
                        alarm.since_ms, alarm.message)
        else:
            log.info("event=alarm_resolved rule=%s when=%s subject=%s lasted_s=%.1f",
                     alarm.rule, alarm.when, alarm.subject,
                     (alarm.resolved_ms - alarm.since_ms) / 1000)
        self.notifier.notify(alarm)

    def _publish(self) -> None:
        board = manager_pb2.AlarmBoard(
            firing=[alarm.to_proto() for alarm in self.evaluator.firing.values()],
            resolved=[alarm.to_proto() for alarm in self.evaluator.resolved])
        with self._lock:
            self._board = board

    def _store(self) -> None:
        """Publish our alarms and keep them in ZooKeeper for a successor."""
        self._publish()
        with self._lock:
            data = self._board.SerializeToString()
        try:
            try:
                call("store the alarms", self.client.set, self.paths.alarms, data)
            except NoNodeError:
                call("store the alarms", self.client.create, self.paths.alarms, data,
                     makepath=True)
        except (SetlError, KazooException) as exc:
            log.warning("event=alarms_not_stored error=%s", exc)

    def _read_board(self) -> manager_pb2.AlarmBoard:
        board = manager_pb2.AlarmBoard()
        try:
            data, _ = call("read the alarms", self.client.get, self.paths.alarms)
            board.ParseFromString(data)
        except NoNodeError:
            pass
        except (SetlError, KazooException) as exc:
            log.warning("event=alarms_not_read error=%s", exc)
        return board

    def _show_leaders(self) -> None:
        board = self._read_board()
        with self._lock:
            self._board = board
