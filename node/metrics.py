"""What a node tells Prometheus (``/metrics``, docs/operating.md).

Two sources, and only these, so that the data path can change beneath them:

- :class:`PipelineMetrics`, one per runner, which the runner calls as batches load, retries
  and pauses happen (counters and stage-time histograms);
- the runners' ``snapshot()`` (a ``PipelineState``), read at each scrape: delay, rows/s,
  window, state, free-door requests.

Per node: Spark jobs (from Spark's own status tracker, never starting Spark) and the
resident memory of the node's process tree (Python, the Spark JVM, Spark's Python workers).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from node.changes import Batch
from node.jobs import Done
from shared.httpserver import Request, Response
from shared.rpc import manager_pb2

disable_created_metrics()  # no *_created series beside each counter and histogram
LABELS = ("channel", "pipeline")
# seconds: a caught-up batch's stages take milliseconds, a catch-up's seconds
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
STATES = ("starting", "running", "retrying", "failed", "fenced", "stopping", "stopped",
          "switching", "pausing")
FREE_DOOR_OUTCOMES = ("requested", "loaded", "missing", "rejected")
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


class NodeMetrics:
    """The node's registry and the metric families its runners count into."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.rows = Counter("setl_pipeline_rows", "Row changes loaded (source rows, before "
                            "the batch merge)", LABELS, registry=registry)
        self.batches = Counter("setl_pipeline_batches", "Batches loaded", LABELS,
                               registry=registry)
        self.extract_transform = Histogram(
            "setl_pipeline_extract_transform_seconds", "Extract/Transform time per batch",
            LABELS, buckets=STAGE_BUCKETS, registry=registry)
        self.wait = Histogram(
            "setl_pipeline_load_wait_seconds", "Time Load waited for a batch's "
            "Extract/Transform to finish (0 when it was ready)", LABELS, buckets=STAGE_BUCKETS,
            registry=registry)
        self.load = Histogram("setl_pipeline_load_seconds", "Load time per batch (the target "
                              "transaction with its position row)", LABELS,
                              buckets=STAGE_BUCKETS, registry=registry)
        self.skipped = Counter("setl_pipeline_rows_skipped", "Rows the target refused and "
                               "skip_load_exception skipped (logged as event=row_skipped)",
                               LABELS, registry=registry)
        self.retries = Counter("setl_pipeline_retries", "Failures the pipeline retried after "
                               "a backoff", LABELS, registry=registry)
        self.pauses = Counter("setl_pipeline_pauses", "Times the pipeline failed for good and "
                              "paused its channel", LABELS, registry=registry)
        ProcessCollector(registry=registry)  # process_*: the node's Python process alone
        PlatformCollector(registry=registry)

    def serve(self, states: Callable[[], list[manager_pb2.PipelineState]],
              pid: int | None = None) -> Callable[[Request], Response]:
        """Register the scrape-time collector over ``states`` (the runners' snapshots);
        return the HTTP handler of ``/metrics``."""
        self.registry.register(NodeCollector(states, os.getpid() if pid is None else pid))

        def handle(request: Request) -> Response:
            if request.path != "/metrics":
                return Response(404, b"not found; metrics are at /metrics\n")
            return Response(200, generate_latest(self.registry), PROMETHEUS_TEXT)
        return handle


NODE = NodeMetrics()


class PipelineMetrics:
    """What one pipeline's runner counts; the runner calls it, nothing else does."""

    def __init__(self, channel: str, pipeline: str, node: NodeMetrics = NODE) -> None:
        labels = {"channel": channel, "pipeline": pipeline}
        self._rows, self._batches = node.rows.labels(**labels), node.batches.labels(**labels)
        self._et = node.extract_transform.labels(**labels)
        self._wait, self._load = node.wait.labels(**labels), node.load.labels(**labels)
        self._retries, self._pauses = node.retries.labels(**labels), node.pauses.labels(**labels)
        self._skipped = node.skipped.labels(**labels)

    def batch_loaded(self, rows: int, et_s: float, wait_s: float, load_s: float,
                     skipped: int = 0) -> None:
        """A batch of ``rows`` row changes committed on its targets (``skipped`` rows
        refused and skipped besides); its stage times."""
        self._rows.inc(rows)
        self._skipped.inc(skipped)
        self._batches.inc()
        self._et.observe(et_s)
        self._wait.observe(wait_s)
        self._load.observe(load_s)

    def retried(self) -> None:
        self._retries.inc()

    def paused(self) -> None:
        self._pauses.inc()


def log_timings(pipeline_id: str, batch: Batch, done: Done, rows: int, written: int,
                wait_s: float, load_s: float) -> None:
    """Where a loaded batch's time went (the node's ``log_level: debug``): read_ms from
    Select reading its first transaction to its E/T beginning (the batch open, then queued
    for a slot), et_ms, wait_ms (Load waiting for the E/T), load_ms; age_ms all of it."""
    first_read = batch.transactions[0].read_at_ms if batch.transactions else 0
    logging.getLogger("setl.node.pipeline").debug(
        "event=batch_loaded pipeline=%s process_id=%d rows=%d written=%d position=%s "
        "read_ms=%d et_ms=%.1f wait_ms=%.1f load_ms=%.1f age_ms=%d", pipeline_id,
        batch.process_id, rows, written, batch.end,
        done.started_ms - first_read if first_read else 0, done.et_ms, wait_s * 1000,
        load_s * 1000, time.time() * 1000 - first_read if first_read else 0)


class NodeCollector(Collector):
    """Read at each scrape: the runners' snapshots, Spark's jobs, the process tree's memory."""

    def __init__(self, states: Callable[[], list[manager_pb2.PipelineState]], pid: int) -> None:
        self.states, self.pid = states, pid

    def collect(self) -> Iterator[Metric]:
        yield from pipeline_families(self.states())
        yield from spark_families()
        memory = GaugeMetricFamily(
            "setl_node_resident_memory_bytes", "Resident memory of the node's process tree by "
            "process: the node (Python), the Spark JVM, Spark's Python workers and any other "
            "child; sum() for the whole tree", labels=["process"])
        for kind, rss in sorted(tree_rss_bytes(self.pid).items()):
            memory.add_metric([kind], rss)
        yield memory


def _gauge(name: str, help_text: str, labels: Iterable[str] = LABELS) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, labels=list(labels))


def pipeline_families(states: list[manager_pb2.PipelineState]) -> Iterator[Metric]:
    delay = _gauge("setl_pipeline_delay_seconds", "Now minus the source commit time of the "
                   "last loaded change (0 when caught up; binlog times are whole seconds)")
    rate = _gauge("setl_pipeline_rows_per_second", "Row changes loaded per second, over the "
                  "last 5 s")
    used = _gauge("setl_pipeline_window_batches", "Batches between Select and the end of "
                  "Load now")
    size = _gauge("setl_pipeline_window_size_batches", "The window's size (parallelism)")
    peak = _gauge("setl_pipeline_window_peak_batches", "Most batches in the window at once "
                  "since the pipeline started")
    state = _gauge("setl_pipeline_state", "1 for the pipeline's current state on this node",
                   [*LABELS, "state"])
    door = CounterMetricFamily("setl_free_door_requests", "Free-door (retl_buffer) requests "
                               "by outcome since the pipeline started on this node",
                               labels=[*LABELS, "outcome"])
    pending = _gauge("setl_free_door_pending_requests", "Central free-door requests for "
                     "this pipeline not served yet")
    switches = CounterMetricFamily("setl_pipeline_source_switches", "Times the pipeline "
                                   "went on at another member of its source (a new primary) "
                                   "since it started on this node", labels=LABELS)
    running = GaugeMetricFamily("setl_node_pipelines_running", "Pipelines running on this "
                                "node")
    unacked = _gauge("setl_subscription_unacked_batches", "A subscription's batches sent to "
                     "its reader or waiting for it, not acknowledged")
    readers = _gauge("setl_subscription_readers", "1 while a reader reads the subscription")
    count = 0
    for found in states:
        labels = list(found.pipeline_id.partition(".")[::2])  # names hold no dots
        delay.add_metric(labels, found.delay_ms / 1000)
        rate.add_metric(labels, found.rows_per_second)
        used.add_metric(labels, found.window_used)
        size.add_metric(labels, found.window_size)
        peak.add_metric(labels, found.window_peak)
        for name in sorted({*STATES, found.state}):
            state.add_metric([*labels, name], 1.0 if name == found.state else 0.0)
        for outcome in FREE_DOOR_OUTCOMES:
            door.add_metric([*labels, outcome], getattr(found.free_door, outcome))
        pending.add_metric(labels, found.free_door.pending)
        switches.add_metric(labels, found.source_switches)
        if found.HasField("subscriber"):  # a subscription
            unacked.add_metric(labels, found.unacked)
            readers.add_metric(labels, 1.0 if found.subscriber else 0.0)
        count += found.state == "running"
    running.add_metric([], count)
    yield from (delay, rate, used, size, peak, state, door, pending, switches, running,
                unacked, readers)


def spark_families() -> Iterator[Metric]:
    """Jobs of the node's SparkContext, if Spark has started (this never starts it)."""
    jobs = CounterMetricFamily("setl_node_spark_jobs", "Spark jobs started since Spark "
                               "started (a batch small enough runs in the node, no job)")
    active = GaugeMetricFamily("setl_node_spark_jobs_active", "Spark jobs running now")
    context = None
    if "pyspark" in sys.modules:
        context = getattr(sys.modules["pyspark"].SparkContext, "_active_spark_context", None)
    total, running = 0, 0
    if context is not None:
        try:
            tracker = context.statusTracker()
            ids = tracker.getJobIdsForGroup(None)  # ids count up from 0; the newest are kept
            total, running = (max(ids) + 1 if ids else 0), len(tracker.getActiveJobsIds())
        except Exception:  # Spark stopping: no jobs to report
            total, running = 0, 0
    jobs.add_metric([], total)
    active.add_metric([], running)
    yield jobs
    yield active


def tree_rss_bytes(pid: int) -> dict[str, int]:
    """Resident memory of ``pid`` and its descendants, by kind of process."""
    page = os.sysconf("SC_PAGE_SIZE")
    found = {"node": 0, "spark_jvm": 0, "spark_python_workers": 0, "other": 0}
    for current in _descendants(pid):
        try:
            resident = int(Path(f"/proc/{current}/statm").read_text().split()[1]) * page
            name = Path(f"/proc/{current}/comm").read_text().strip()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        kind = "node" if current == pid else "spark_jvm" if name == "java" else \
            "spark_python_workers" if name.startswith("python") else "other"
        found[kind] += resident
    return found


def _descendants(pid: int) -> Iterator[int]:
    stack = [pid]
    while stack:
        current = stack.pop()
        yield current
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                stack += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
