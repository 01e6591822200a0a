"""What a manager tells Prometheus (``/metrics`` on its web port): whether it leads, the
nodes registered, channels by status and pipelines by state (as of its last poll of
ZooKeeper), alarms firing, webhook deliveries and refused API calls."""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from manager.monitor import Monitor
from shared.rpc import manager_pb2, model_pb2

disable_created_metrics()
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
STATUSES = ("START", "PAUSE", "STOP")


class ManagerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.notifications = Counter(
            "setl_manager_alarm_notifications", "Alarm notifications to webhooks by outcome "
            "(sent, or failed after retries)", ["outcome"], registry=self.registry)
        self.refused = Counter(
            "setl_manager_rpc_refused", "API calls refused for want of the right token",
            ["reason"], registry=self.registry)
        for outcome in ("sent", "failed"):
            self.notifications.labels(outcome)
        for reason in ("no_token", "wrong_token", "not_allowed"):
            self.refused.labels(reason)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)

    def watch(self, monitor: Monitor, leading: Callable[[], bool]) -> None:
        self.registry.register(_MonitorCollector(monitor, leading))

    def text(self) -> bytes:
        return generate_latest(self.registry)


class _MonitorCollector(Collector):
    def __init__(self, monitor: Monitor, leading: Callable[[], bool]) -> None:
        self.monitor, self.leading = monitor, leading

    def collect(self) -> Iterator[Metric]:
        seen = self.monitor.latest
        leader = GaugeMetricFamily("setl_manager_leader", "1 if this manager leads (serves "
                                   "changes, evaluates and sends alarms)")
        leader.add_metric([], 1.0 if self.leading() else 0.0)
        yield leader
        nodes = GaugeMetricFamily("setl_manager_nodes", "Nodes registered in ZooKeeper")
        nodes.add_metric([], len(seen.nodes))
        yield nodes
        channels = GaugeMetricFamily("setl_manager_channels", "Channels by status",
                                     labels=["status"])
        by_status = Tally(model_pb2.ChannelStatus.Name(info.status)
                          .removeprefix("CHANNEL_STATUS_") for info in seen.channels)
        for status in sorted({*STATUSES, *by_status}):
            channels.add_metric([status], by_status[status])
        yield channels
        pipelines = GaugeMetricFamily("setl_manager_pipelines", "Pipelines by state, as their "
                                      "owning nodes report it ('not running': no owner)",
                                      labels=["state"])
        by_state = Tally(state.state or "not running" for info in seen.channels
                         for state in info.pipelines)
        for state in sorted({"running", "not running", "failed", *by_state}):
            pipelines.add_metric([state], by_state[state])
        yield pipelines
        yield _alarms([rule.name for rule in self.monitor.evaluator.rules],
                      self.monitor.firing())
        polls = CounterMetricFamily("setl_manager_polls", "Times the manager read the "
                                    "pipelines' state from ZooKeeper")
        polls.add_metric([], self.monitor.polls)
        yield polls
        age = GaugeMetricFamily("setl_manager_observed_age_seconds", "Seconds since the "
                                "manager last read the pipelines' state from ZooKeeper")
        if seen.at:
            age.add_metric([], max(0.0, time.time() - seen.at))
        yield age


def _alarms(rules: list[str], firing: list[manager_pb2.Alarm]) -> GaugeMetricFamily:
    family = GaugeMetricFamily("setl_manager_alarms_firing", "Alarms firing now, by rule "
                               "(the leader's, read from ZooKeeper on a standby)",
                               labels=["rule"])
    counts = Tally(alarm.rule for alarm in firing)
    for rule in sorted({*rules, *counts}):
        family.add_metric([rule], counts[rule])
    return family
