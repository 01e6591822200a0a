"""The node's one long-lived SparkSession and the per-batch Extract/Transform job.

A batch's parts (:mod:`node.extract.job`: rows events as bytes) become
``parallelize(parts, one slice each) → map(run_part) → collect``; what comes back is SQL
text per target table. On a local master the parts' events and the results go as files
(:class:`Handoff`), not through the JVM. The compiled pipeline is broadcast once per
definition version. A batch of at most ``spark.local_max_rows`` row changes (a caught-up
pipeline's) runs the same function in the node instead: a Spark job's fixed cost (tens of
ms of CPU across driver, JVM and worker) is more than such a batch's rows cost. While Spark
starts, every batch but one large transaction's runs in the node. The stage logic lives in
:mod:`node.extract` and runs the same without Spark in unit tests; the functions Spark's
workers call are in :mod:`node.sparktasks`, and a failed job's errors become setl's in
:mod:`node.sparkerrors`.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from node import sparktasks
from node.changes import RowChange, TargetChange
from node.extract.etl import CompiledPipeline, extract_transform
from node.extract.job import Part, run_part
from node.handoff import Handoff
from node.jobqueue import JobQueue
from node.jobs import JobSpec, PartResult
from node.sparkerrors import in_process, translate, translate_for
from shared import heap
from shared.errors import SetlError, SparkStartError
from shared.settings import SparkSettings

log = logging.getLogger("setl.node.spark")
# Settings for micro-batches, applied unless the node's config sets them. Measured with
# `python -m bench.sparkjob` (local[2], 2 cores, bench/results/sparkjob-20261124-014330.json):
MICRO_BATCH_DEFAULTS = (
    # the Python worker talks to the JVM over a Unix socket instead of TCP:
    # near-empty job p50 143 -> 65 ms
    ("spark.python.unix.domain.socket.enabled", "true"),
    # no waiting for a "local" executor slot (every slot is local on one node):
    # near-empty job p50 143 -> 93 ms; both together 59 ms
    ("spark.locality.wait", "0s"),
)
# The driver JVM only schedules small jobs and moves bytes: its C2 compiler and parallel
# GC threads cost more than they give on a node's few cores. C1 only and the serial GC
# (`python -m bench.sparkjob --only "defaults,jvm as it comes"`, each twice,
# bench/results/sparkjob-20261125-021945.json): Spark's start 14.5-16.3 -> 7.9-8.4 CPU-s, an
# empty job while the JVM is cold 376-482 -> 194-240 ms of CPU, warm 101-113 -> 54 ms
# (p50 54-62 -> 41-44 ms), a warm 20k-row job 406-505 -> 294-396 ms of CPU.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# pyspark stops a Python worker idle for a minute; the next job then waits for a new one to
# start and import setl (1.1 s instead of 0.23 s for a 10k-row job, 4 s under load): while
# Spark runs, workers idle this long get a tiny job
KEEP_WARM_S = 40.0
# the most bytes of rows events a part carries inside its Spark task (the rest of a task is
# a few KiB): Spark warns of tasks over 1000 KiB
TASK_EVENTS_MAX = 768 * 1024
WARM_TRIES = 2  # starts in the background before a pipeline needs Spark
WARM_RETRY_S = 2.0
# a gateway JVM that exits before it says its port (pyspark's JAVA_GATEWAY_EXITED; seen with
# no output of its own on busy 2-core machines, while another node's JVM starts or dies) is
# launched up to twice more (a CI run saw two in a row), so that a passing launch failure
# does not fail a pipeline. A launch that always fails (no Java, a master spark-submit
# refuses) fails the same way: each try more adds a JVM's start (~1 s) to every report of it
LAUNCH_TRIES = 3
LAUNCH_RETRY_S = 0.5
# while Spark starts, a batch of up to this many row changes runs in the node; a larger one
# (one large transaction's) waits for Spark, as before: its rows would all be Python objects
# in the node at once, where Spark's workers take them a part each
STARTING_MAX_ROWS = 100_000


class SparkRunner:
    """Starts Spark on first use; runs one Extract/Transform job per batch."""

    def __init__(self, settings: SparkSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._session: Any = None
        self._broadcasts: dict[tuple[str, int, int], Any] = {}
        self._warming: threading.Thread | None = None
        self._stopped = False
        self._stopping = threading.Event()
        self._last_job = 0.0  # when a job last ran on the workers (0: never)
        self._ready = threading.Event()  # Spark started and its first job (the workers) run
        self._in_node_told = False  # the log says once that large batches run in the node
        self._handoff: Handoff | None = None  # a local master's files (started with Spark)
        self._queue = JobQueue(self._run_jobs)  # batches' jobs, gathered while others run

    def warm(self) -> None:
        """Start Spark in the background, once: a standby node that may take a pipeline over
        has it ready then (starting it took 5-12 s of a takeover on 2 busy cores). A failure
        is logged; the pipeline's own start tries again and reports it."""
        with self._lock:
            if self._session is not None or self._warming is not None:
                return
            self._warming = threading.Thread(target=self._warm, name="spark-warm", daemon=True)
        self._warming.start()

    def _warm(self) -> None:
        for attempt in range(1, WARM_TRIES + 1):
            try:
                self.context  # noqa: B018 - starts the session
                return
            except SetlError as exc:  # again, a little later
                log.warning("event=spark_warm_failed attempt=%d error=%s", attempt, exc)
            if self._stopping.wait(WARM_RETRY_S):
                return

    def _start(self) -> Any:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        from pyspark.sql import SparkSession  # imported late: a node without pipelines needs none

        log.info("event=spark_starting master=%s", self.settings.master)
        log4j = Path(__file__).with_name("log4j2.properties")
        builder = (SparkSession.builder.master(self.settings.master).appName("setl-node")
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.memory", self.settings.driver_memory)
                   .config("spark.python.worker.reuse", "true")
                   .config("spark.driver.extraJavaOptions",
                           f"{JVM_OPTIONS} -Dlog4j2.configurationFile=file:{log4j}"))
        for key, value in (*MICRO_BATCH_DEFAULTS, *self.settings.options):
            builder = builder.config(key, value)  # the node's config comes last and wins
        for attempt in range(1, LAUNCH_TRIES + 1):
            try:
                session = builder.getOrCreate()
                break
            except Exception as exc:  # py4j/JVM start errors: translate once, here
                if "JAVA_GATEWAY_EXITED" in str(exc) and attempt < LAUNCH_TRIES and \
                        not self._stopping.wait(LAUNCH_RETRY_S):
                    log.warning("event=spark_launch_retry master=%s attempt=%d error=%s",
                                self.settings.master, attempt, exc)
                    continue
                raise SparkStartError(f"Spark did not start (master {self.settings.master}): "
                                      f"{exc}; check Java 17 and the 'spark' section of the "
                                      "node config") from None
        session.sparkContext.setLogLevel("WARN")
        log.info("event=spark_started master=%s version=%s", self.settings.master,
                 session.version)
        if self.settings.master.startswith("local"):
            self._handoff = Handoff()
            for left in self._handoff.left:
                log.info("event=spark_handoff_swept folder=%s", left)
        heap.settle()  # pyspark's modules and the py4j gateway live as long as the node
        threading.Thread(target=self._keep_warm, args=(session.sparkContext,),
                         name="spark-keep-warm", daemon=True).start()
        return session

    def _keep_warm(self, context: Any) -> None:
        """Start the Python workers now, and keep them from being stopped while idle."""
        while not self._stopping.is_set():
            if time.monotonic() - self._last_job >= KEEP_WARM_S:
                self._last_job = time.monotonic()
                try:
                    slices = max(1, int(context.defaultParallelism))
                    context.parallelize(range(slices), slices).map(sparktasks.touch).collect()
                except Exception as exc:  # stopping, or Spark broke: the next job says so
                    log.debug("event=spark_keep_warm_failed error=%r", exc)
                if not self._ready.is_set():
                    log.info("event=spark_ready master=%s slots=%s", self.settings.master,
                             context.defaultParallelism)
                    self._ready.set()
            self._stopping.wait(KEEP_WARM_S / 4)

    @property
    def context(self) -> Any:
        with self._lock:
            if self._session is None:
                if self._stopped:
                    raise SetlError("Spark was stopped: the node is shutting down")
                self._session = self._start()
            return self._session.sparkContext

    def _broadcast(self, compiled: CompiledPipeline) -> Any:
        key = compiled.broadcast_key
        with self._lock:
            found = self._broadcasts.get(key)
        if found is None:
            found = self.context.broadcast(compiled)
            with self._lock:
                stale = [k for k in self._broadcasts if k[0] == compiled.pipeline_id]
                for old in stale:
                    self._broadcasts.pop(old).unpersist()
                self._broadcasts[key] = found
        return found

    @property
    def on_demand(self) -> bool:
        """Whether Spark starts only when a job needs it (``spark.start: on_demand``)."""
        return self.settings.start == "on_demand"

    def local(self, rows: int) -> bool:
        """Whether a batch of ``rows`` row changes runs in the node instead of on Spark: one
        of at most ``local_max_rows``, and while Spark starts in the background (``start:
        boot``) one of at most ``STARTING_MAX_ROWS``. Waiting for the start (6-12 s on 2
        busy cores, its first job's workers included) would stall the stream behind the
        batch: a bulk insert streamed right after a node's start reached the target at
        0.58x the replicas' rate, all of the gap that wait. ``local_max_rows: 0`` sends
        every batch to Spark, waiting."""
        if rows <= self.settings.local_max_rows:
            return True
        if self.settings.local_max_rows == 0 or self.on_demand or self._ready.is_set() or \
                rows > STARTING_MAX_ROWS:
            return False
        if not self._in_node_told:  # once: until Spark is ready (a cluster without
            self._in_node_told = True  # workers never is) large batches run here
            log.info("event=spark_not_ready_batches_in_node master=%s rows=%d local_max_rows=%d",
                     self.settings.master, rows, self.settings.local_max_rows)
        return True

    @property
    def partitions(self) -> int:
        """How many parts a batch on Spark is cut into (the cores Spark has)."""
        return max(1, int(self.context.defaultParallelism))

    def run_job(self, compiled: CompiledPipeline, spec: JobSpec, parts: list[Part],
                local: bool) -> list[PartResult]:
        """A batch's Extract/Transform: its parts in the node (``local``) or on Spark."""
        if local:
            return in_process(compiled, lambda: [run_part(compiled, spec, part)
                                                 for part in parts])
        # while other batches are on Spark, this one waits to go with those of its pipeline
        # that wait too (node.jobqueue): one job for them all
        return self._queue.submit(compiled.broadcast_key, (compiled, spec, parts))

    def _run_jobs(self, batches: list[tuple[CompiledPipeline, JobSpec, list[Part]]]
                  ) -> list[list[PartResult]]:
        """One Spark job for batches of one pipeline (one definition version): each part its
        own task, with its batch's spec; each batch's results."""
        compiled = batches[0][0]
        if len(batches) > 1:
            log.debug("event=spark_job_gathered pipeline=%s processIds=%s", compiled.pipeline_id,
                     ",".join(str(spec.process_id) for _, spec, _ in batches))
        parts = [part for _, _, batch_parts in batches for part in batch_parts]
        specs = [spec for _, spec, batch_parts in batches for _ in batch_parts]
        context = self.context
        broadcast = self._broadcast(compiled)
        self._last_job = time.monotonic()
        handoff = self._handoff
        if handoff is not None:  # a local master: the bytes go as files (Handoff)
            found = self._handed_off(handoff, context, broadcast, compiled, specs, parts)
        else:
            found = self._through_spark(context, broadcast, compiled, specs, parts)
        results, at = [], 0
        for _, _, batch_parts in batches:
            results.append(found[at:at + len(batch_parts)])
            at += len(batch_parts)
        return results

    @staticmethod
    def _through_spark(context: Any, broadcast: Any, compiled: CompiledPipeline,
                       specs: list[JobSpec], parts: list[Part]) -> list[PartResult]:
        # a part's events go in its task, unless they are many: Spark serialises a task into
        # each launch and warns of one over 1000 KiB; those go beside it as a broadcast (the
        # block manager's torrent on a cluster)
        shipped = {index: context.broadcast(part.events) for index, part in enumerate(parts)
                   if len(part.events) > TASK_EVENTS_MAX}
        try:
            return _collect(context, broadcast, compiled, specs, parts, shipped, "")
        finally:
            for events in shipped.values():
                events.destroy()

    @staticmethod
    def _handed_off(handoff: Handoff, context: Any, broadcast: Any,
                    compiled: CompiledPipeline, specs: list[JobSpec],
                    parts: list[Part]) -> list[PartResult]:
        job = handoff.job()
        shipped: dict[int, Any] = {}
        try:
            for index, part in enumerate(parts):
                if part.events:
                    path = shipped[index] = f"{job}-{index}.events"
                    with open(path, "wb") as file:
                        file.write(part.events)
        except OSError as exc:  # no room: this job's events go in its tasks
            log.warning("event=spark_handoff_full pipeline=%s processId=%d folder=%s "
                        "error=%r", compiled.pipeline_id, specs[0].process_id, handoff.root,
                        exc)
            handoff.drop(job)
            shipped = {}
        try:
            found = _collect(context, broadcast, compiled, specs, parts, shipped, job)
            # a file's name, or (no room for the file) the part's result itself
            return [result for item in found
                    for result in (Handoff.take(item) if isinstance(item, str) else [item])]
        finally:
            handoff.drop(job)  # its events, and whatever a failed job's tasks left

    def map_tasks(self, compiled: CompiledPipeline,
                  task: Callable[[CompiledPipeline, Any], list[Any]], items: list[Any],
                  local: bool, what: str = "verify") -> list[Any]:
        """Independent tasks beside the batches' jobs (verify's chunks): ``task(compiled,
        item)`` for each item, one Spark task each (``local``: in the node), their results
        in item order. ``task`` is a module-level function (a worker imports it)."""
        if local:
            return in_process(compiled, lambda: [found for item in items
                                                 for found in task(compiled, item)], what)
        context = self.context
        broadcast = self._broadcast(compiled)
        self._last_job = time.monotonic()
        try:
            return context.parallelize(items, len(items)).mapPartitions(
                functools.partial(sparktasks.run_tasks, broadcast, task)).collect()
        except Exception as exc:
            raise translate(exc, compiled, what) from None

    def map(self, function: Callable[[Any], Any], items: list[Any], local: bool,
            where: str) -> list[Any]:
        """``function`` of each item, one Spark task each (in the node when ``local``); the
        items carry what the tasks need (``where`` names the work in errors)."""
        if local or not items:
            try:
                return [function(item) for item in items]
            except SetlError:
                raise
            except Exception as exc:
                raise SetlError(f"{where}: {type(exc).__name__}: {exc}") from exc
        self._last_job = time.monotonic()
        try:
            return self.context.parallelize(items, len(items)).map(function).collect()
        except Exception as exc:
            raise translate_for(exc, where) from None

    @staticmethod
    def changes(compiled: CompiledPipeline, changes: list[RowChange]) -> list[TargetChange]:
        """Extract/Transform of decoded changes (a DDL batch's) in the node."""
        return in_process(compiled, lambda: list(extract_transform(
            compiled, enumerate(changes))))

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            self._stopped = True  # a warm-up that has not begun yet must not start it now
            if self._session is not None:
                self._session.stop()
                self._session = None
            if self._handoff is not None:
                self._handoff.close()
                self._handoff = None


def _collect(context: Any, broadcast: Any, compiled: CompiledPipeline, specs: list[JobSpec],
             parts: list[Part], shipped: dict[int, Any], out: str) -> list[Any]:
    """The job itself: a task per part, the parts ``shipped`` beside their tasks (a
    broadcast, or a handoff file) sent without their events; ``out``: the handoff prefix
    the tasks write their results under ("": they return them)."""
    sent = [part._replace(events=b"") if index in shipped else part
            for index, part in enumerate(parts)]
    try:
        return context.parallelize(sent, len(sent)).mapPartitionsWithIndex(
            functools.partial(sparktasks.run_partition, broadcast, specs, shipped,
                              out)).collect()
    except Exception as exc:
        raise translate(exc, compiled) from None
