"""Alarm evaluation: the configured rules (:mod:`shared.alarmrules`) over what the manager
observes, turned into firings and resolutions.

Pure logic with an injected clock: :class:`AlarmEvaluator` is fed :class:`Facts` (one
observation of channels, pipelines and nodes) and returns the alarms that started or
stopped firing. A firing alarm is reported once, and again only when it has resolved and
fires anew, so a condition that lasts makes no storm.
"""

from __future__ import annotations

import fnmatch
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from shared.alarmrules import (
    DELAY,
    FAILED,
    FREE_DOOR_REJECTS,
    NODE_LOST,
    NOT_RUNNING,
    PAUSED,
    ROWS_SKIPPED,
    SOURCE_SWITCH,
    AlarmRule,
)
from shared.rpc import manager_pb2, model_pb2

FIRING, RESOLVED = "firing", "resolved"
# states of a pipeline a node holds and means to move: its delay is judged in each (a
# pipeline that fails and retries, loading a little each time, never runs for long)
MOVING = ("running", "retrying", "starting", "switching")
# states of a pipeline stopped by an error: failed, or a subscription's pausing (it waits
# for its reader to acknowledge what it was sent before the error, then pauses)
STOPPING_ON_ERROR = ("failed", "pausing")
RESOLVED_KEPT = 20  # resolutions shown by 'setl status' and the page


@dataclass(frozen=True)
class PipelineFact:
    pipeline_id: str
    channel: str
    channel_status: str  # START | PAUSE | STOP
    state: str  # as the manager shows it: running, failed, not running, ...
    delay_ms: int = 0
    rejected: int = 0  # free-door requests rejected since the pipeline started on its node
    last_error: str = ""
    switched: str = ""  # its source's last switch ('' none), and when
    switched_ms: int = 0
    skipped: int = 0  # rows skip_load_exception skipped since it started on its node


@dataclass(frozen=True)
class Facts:
    pipelines: tuple[PipelineFact, ...]
    nodes: frozenset[int]


@dataclass(frozen=True)
class Alarm:
    rule: str
    when: str
    subject: str
    since_ms: int
    message: str
    state: str = FIRING
    resolved_ms: int = 0

    @property
    def key(self) -> tuple[str, str]:
        return self.rule, self.subject

    def to_proto(self) -> manager_pb2.Alarm:
        return manager_pb2.Alarm(rule=self.rule, when=self.when, subject=self.subject,
                                 state=self.state, since_ms=self.since_ms,
                                 resolved_ms=self.resolved_ms, message=self.message)

    @classmethod
    def from_proto(cls, found: manager_pb2.Alarm) -> Alarm:
        return cls(found.rule, found.when, found.subject, found.since_ms, found.message,
                   found.state or FIRING, found.resolved_ms)


def facts_from(channels: Iterable[manager_pb2.ChannelInfo],
               nodes: Iterable[manager_pb2.NodeInfo]) -> Facts:
    """The facts of one observation (what ``setl status`` shows)."""
    pipelines = []
    for info in channels:
        status = model_pb2.ChannelStatus.Name(info.status).removeprefix("CHANNEL_STATUS_")
        for state in info.pipelines:
            pipelines.append(PipelineFact(
                state.pipeline_id, info.channel.name, status, state.state or "not running",
                state.delay_ms, state.free_door.rejected, state.last_error, state.switched,
                state.switched_ms, state.rows_skipped))
    return Facts(tuple(pipelines), frozenset(node.id for node in nodes))


class AlarmEvaluator:
    """Keeps which alarms fire; ``evaluate`` returns what changed since the last call."""

    def __init__(self, rules: Iterable[AlarmRule],
                 clock: Callable[[], float] = time.time) -> None:
        self.rules, self.clock = tuple(rules), clock
        self.firing: dict[tuple[str, str], Alarm] = {}
        self.resolved: deque[Alarm] = deque(maxlen=RESOLVED_KEPT)
        self._pending: dict[tuple[str, str], float] = {}  # condition holds since (for_s)
        self._seen_nodes: set[int] = set()
        self._counts: dict[str, deque[tuple[float, int]]] = {}  # counters' samples

    def restore(self, firing: Iterable[Alarm], resolved: Iterable[Alarm] = ()) -> None:
        """Take over what an earlier leader reported: these fire already (not sent again)."""
        self.firing = {alarm.key: alarm for alarm in firing
                       if any(rule.name == alarm.rule for rule in self.rules)}
        self.resolved = deque(resolved, maxlen=RESOLVED_KEPT)
        self._seen_nodes |= {int(alarm.subject) for alarm in self.firing.values()
                             if alarm.when == NODE_LOST and alarm.subject.isdigit()}

    def evaluate(self, facts: Facts) -> list[Alarm]:
        """Alarms that began firing or resolved with these facts, in rule order."""
        now = self.clock()
        self._seen_nodes |= facts.nodes
        changes: list[Alarm] = []
        for rule in self.rules:
            holding = self._conditions(rule, facts, now)
            unknown = self._unknown(rule, facts)  # neither holds nor ends: kept as it is
            for subject, message in holding.items():
                key = (rule.name, subject)
                if key in self.firing:
                    continue
                since = self._pending.setdefault(key, now)
                if now - since >= rule.for_s:
                    alarm = Alarm(rule.name, rule.when, subject, int(since * 1000), message)
                    self.firing[key] = alarm
                    self._pending.pop(key, None)
                    changes.append(alarm)
            for key in [key for key in self._pending if key[0] == rule.name
                        and key[1] not in holding and key[1] not in unknown]:
                del self._pending[key]
            for key in [key for key in self.firing if key[0] == rule.name
                        and key[1] not in holding and key[1] not in unknown]:
                ended = replace(self.firing.pop(key), state=RESOLVED,
                                resolved_ms=int(now * 1000))
                self.resolved.appendleft(ended)
                changes.append(ended)
        return changes

    # -- what each kind of rule watches ------------------------------------------------------
    def _conditions(self, rule: AlarmRule, facts: Facts, now: float) -> dict[str, str]:
        """Subject → message for every subject whose condition holds now."""
        if rule.when == NODE_LOST:
            expected = set(rule.nodes) if rule.nodes else self._seen_nodes
            return {str(node): f"node {node} is not registered (stopped, or its ZooKeeper "
                    "session ended); its pipelines move to other candidates, if any"
                    for node in sorted(expected - facts.nodes)}
        chosen = [fact for fact in facts.pipelines if _matches(rule, fact.pipeline_id)]
        if rule.when == PAUSED:
            paused = {}
            for fact in chosen:
                if fact.channel_status == "PAUSE" and fact.channel not in paused:
                    errors = [f.last_error.splitlines()[0] for f in chosen
                              if f.channel == fact.channel and f.last_error]
                    paused[fact.channel] = (f"channel {fact.channel} is paused: {errors[0]}"
                                            if errors else f"channel {fact.channel} is paused "
                                            "(by an operator: no pipeline reports an error)")
            return paused
        if rule.when == FAILED:
            return {fact.pipeline_id: f"pipeline {fact.pipeline_id} failed: "
                    f"{(fact.last_error or 'no error text').splitlines()[0]}"
                    for fact in chosen if fact.state in STOPPING_ON_ERROR}
        if rule.when == DELAY:
            return {fact.pipeline_id: f"pipeline {fact.pipeline_id} is {fact.delay_ms / 1000:g} "
                    f"s behind the source (above {rule.above / 1000:g} s"
                    + (f" for {rule.for_s:g} s)" if rule.for_s else ")")
                    for fact in chosen
                    if fact.state in MOVING and fact.delay_ms > rule.above}
        if rule.when == NOT_RUNNING:
            return {fact.pipeline_id: _not_running(fact) for fact in chosen
                    if fact.channel_status == "START" and fact.state != "running"}
        if rule.when == FREE_DOOR_REJECTS:
            return {pid: f"pipeline {pid} rejected {grown} free-door request(s) in the last "
                    f"{rule.within_s:g} s (above {rule.above:g}); see "
                    "event=free_door_rejected in its node's log"
                    for pid, grown in self._grown(rule, chosen, now, "rejected").items()}
        if rule.when == ROWS_SKIPPED:
            return {pid: f"pipeline {pid} skipped {grown} row(s) its target refused "
                    f"(skip_load_exception) in the last {rule.within_s:g} s (above "
                    f"{rule.above:g}); see event=row_skipped in its node's log, and repair "
                    "those rows on the target (setl verify)"
                    for pid, grown in self._grown(rule, chosen, now, "skipped").items()}
        if rule.when == SOURCE_SWITCH:
            switching = {fact.pipeline_id: f"pipeline {fact.pipeline_id}: "
                         f"{fact.last_error.splitlines()[0]}" for fact in chosen
                         if fact.state == "switching" and fact.last_error}
            return switching | {
                fact.pipeline_id: f"pipeline {fact.pipeline_id}: its source {fact.switched}"
                for fact in chosen if fact.switched_ms and fact.pipeline_id not in switching
                and now - fact.switched_ms / 1000 <= rule.within_s}
        return {}

    def _unknown(self, rule: AlarmRule, facts: Facts) -> set[str]:
        """Subjects whose condition cannot be told now: a delay rule's pipelines of a
        started channel that report no delay this moment (no owner during a failover, a
        runner stopping to take a new definition). A firing delay alarm stays firing through
        such a blip, and one on its way keeps its ``for_s`` count; the channel paused or
        stopped, it ends. So do those starting with no delay to tell yet (the new owner after
        a failover, before its first batch: an hour behind, it reads 0)."""
        if rule.when != DELAY:
            return set()
        return {fact.pipeline_id for fact in facts.pipelines if _matches(rule, fact.pipeline_id)
                and fact.channel_status == "START" and fact.state not in STOPPING_ON_ERROR and (
                    fact.state not in MOVING or (fact.state == "starting" and
                                                 not fact.delay_ms))}

    def _grown(self, rule: AlarmRule, chosen: list[PipelineFact], now: float,
               counter: str) -> dict[str, int]:
        """Pipelines whose ``counter`` grew by more than ``above`` within ``within_s``. The
        counter restarts with the pipeline on a node: a drop counts from zero."""
        holding = {}
        keys = {f"{rule.name}/{fact.pipeline_id}" for fact in chosen}
        for gone in [key for key in self._counts if key.startswith(f"{rule.name}/")
                     and key not in keys]:
            del self._counts[gone]
        for fact in chosen:
            samples = self._counts.setdefault(f"{rule.name}/{fact.pipeline_id}", deque())
            samples.append((now, getattr(fact, counter)))
            while samples and now - samples[0][0] > rule.within_s:
                samples.popleft()
            grown, previous = 0, samples[0][1]
            for _, value in list(samples)[1:]:
                grown += value - previous if value >= previous else value
                previous = value
            if grown > rule.above:
                holding[fact.pipeline_id] = grown
        return holding


def _not_running(fact: PipelineFact) -> str:
    why = (f": {fact.last_error.splitlines()[0]}" if fact.last_error else
           ": no node holds it" if fact.state == "not running" else "")
    return (f"pipeline {fact.pipeline_id} is {fact.state}, its channel {fact.channel} "
            f"started{why}")


def _matches(rule: AlarmRule, pipeline_id: str) -> bool:
    return not rule.pipelines or any(fnmatch.fnmatchcase(pipeline_id, pattern)
                                     for pattern in rule.pipelines)
