"""One running pipeline: Select → Extract/Transform on Spark → Load, in a sliding window.

Select runs in its own thread and submits each batch's E/T job as soon as the batch is cut,
so several batches are in E/T at once; Load (this runner's thread) takes them strictly in
processId order. Any error of batch n stops Select, drops n and every later batch, and the
runner starts again, after a backoff, from where the targets' position rows stand; after
``max_retries`` failures in a row it pauses the channel and leaves the error in the
pipeline's stats. Each attempt opens (where it resumes, the source checked) in
:mod:`node.resume`; Select's thread is :mod:`node.selectloop`.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient

from node import cursor as cursors
from node.changes import Batch
from node.cursor import Cursor, CursorPublisher, CursorStore
from node.ddlset import target_reader
from node.extract import freedoor
from node.extract.etl import CompiledPipeline
from node.extract.job import Planner
from node.extract.keycheck import read_source_columns
from node.jobs import Done, Failed
from node.load import loop as load
from node.metrics import PipelineMetrics, log_timings
from node.pausing import RunnerPause
from node.primary import Primary, SwitchPending
from node.resume import RunnerStart
from node.select.binlog import BinlogReader
from node.select.selector import Selector
from node.selectloop import RunnerSelect
from node.snapshot.controller import Snapshots
from node.snapshot.door import DoorQueue, refusal
from node.snapshot.sourceof import other_writers, source_names
from node.snapshot.state import SnapshotStore
from node.spark import SparkRunner
from node.status import RunnerStatus, carry_over
from node.target import kinds
from node.target.base import TargetLoader
from node.window import Window
from shared import heap, members
from shared.catalog import Catalog
from shared.endpoint import missing_right
from shared.errors import (
    PAUSE_AT_ONCE,
    ConfigError,
    FencedError,
    OwnershipLostError,
    SetlError,
)
from shared.model import Channel, DataSource, Pipeline
from shared.retry import RetryPolicy
from shared.zk import ZkPaths

log = logging.getLogger("setl.node.pipeline")
STOP_PUBLISH_S = 1.0
SWITCH_POLL_S = 1.0  # how often a lost primary is looked at again
MISSING_RIGHT = ("; setl's database user lacks a right this needs: grant it, and the pipeline "
                 "goes on at its next retry (the README's quick start lists what each part "
                 "needs; setl check source NAME and setl check target NAME name what is "
                 "missing)")
LOST_OWNERSHIP = "lost ownership"  # the state of a runner whose start found the pipeline gone


@dataclass(frozen=True)
class PipelineContext:
    """Everything a runner needs, handed over as one object."""

    node_id: int
    channel: Channel
    pipeline: Pipeline
    version: int
    sources: dict[str, DataSource]
    spark: SparkRunner
    client: KazooClient
    paths: ZkPaths
    epoch: int = 0  # czxid of the mainstem znode this runner holds: grows with each owner
    # whether this node still holds the pipeline's mainstem (asked after each blocking step)
    owns: Callable[[], bool] = field(default=lambda: True, compare=False)
    backoff: RetryPolicy = field(
        default_factory=lambda: RetryPolicy(delay_s=1.0, max_delay_s=30.0))

    @property
    def pipeline_id(self) -> str:
        return self.channel.pipeline_id(self.pipeline)


class PipelineRunner(RunnerStatus, RunnerStart, RunnerSelect, RunnerPause):
    def __init__(self, context: PipelineContext) -> None:
        self.ctx = context
        self.pipeline_id = context.pipeline_id
        self.stop_event = threading.Event()
        self.cursors = CursorStore(context.client, context.paths, self.pipeline_id)
        self.snapshot_store = SnapshotStore(context.client, context.paths, self.pipeline_id)
        self._snapshots: Snapshots | None = None
        self.state = "starting"
        self.last_error = ""
        self.cursor: Cursor | None = None
        self.last_commit_ts_ms = 0
        # (processId, its first transaction's commit time) of each batch selected, not loaded:
        # the delay counts from the oldest (popped as batches load; per batch, not per row)
        self._in_flight: deque[tuple[int, int]] = deque()
        self._window: Window | None = None
        self._selector: Selector | None = None
        self._loaded: deque[tuple[float, int]] = deque(maxlen=200)
        self.batches_loaded = 0
        self.batches_selected = 0
        self._attempt_loader: TargetLoader | None = None  # the loader of the attempt running
        self.rows_skipped = 0  # refused by a target and skipped (skip_load_exception)
        self.window_peak = 0
        self.door_stats = freedoor.DoorStats()
        self.metrics = PipelineMetrics(context.channel.name, context.pipeline.name)
        params = context.pipeline.params
        self._central = freedoor.CentralDoor(
            context.sources[params.free_door_source], context.channel.name,
            context.pipeline.name, params.free_door_slice,
            siblings=tuple(p.name for p in context.channel.pipelines)
            if context.channel.pipelines[0] is context.pipeline else ()) \
            if params.free_door_source else None
        self._select_stop = threading.Event()
        self._progress = threading.Event()  # set when a batch is loaded
        # the member of the source read now, and switching when it is lost or moved
        self.primary = Primary(Catalog(context.client, context.paths), context.pipeline.source,
                               self.pipeline_id)
        self._switch = threading.Event()  # the source's primary was moved: start again there
        self.source: DataSource | None = None  # the source as the member read now
        self._thread = threading.Thread(target=self.run, name=f"pipeline-{self.pipeline_id}",
                                        daemon=True)

    @property
    def two_way(self) -> bool:
        return self.ctx.channel.two_way

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self, wait_s: float = 30.0) -> None:
        """Stop selecting, load what was selected, then return (at most ``wait_s``)."""
        self.request_stop()
        self.join(wait_s)

    def request_stop(self) -> None:
        """Stop selecting and load what was selected; a start under way goes no further.
        Status says ``stopping`` until the runner ends (a stop that waits on a slow load
        showed ``running``, frozen, while the pipeline's new definition waited for it)."""
        self.stop_event.set()
        if self.state in ("starting", "running", "retrying", "switching", "pausing"):
            self.state = "stopping"
        self._select_stop.set()
        if self._snapshots is not None:  # a request now may be for the runner replacing it
            self._snapshots.halt()

    def join(self, wait_s: float) -> bool:
        """Wait at most ``wait_s`` for the runner to end; True if it ended."""
        if self._thread.ident is not None:
            self._thread.join(max(wait_s, 0.0))
        return not self.alive

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def run(self) -> None:
        self._failures = 0
        delays = iter(())
        try:
            targets = {pair.target.datasource: self.ctx.sources[pair.target.datasource]
                       for pair in self.ctx.pipeline.pairs}
            kind = kinds.kind_of(self.pipeline_id, targets)
            compiled = CompiledPipeline.compile(
                self.pipeline_id, self.ctx.version, self.ctx.pipeline, two_way=self.two_way,
                source=self.ctx.sources[self.ctx.pipeline.source],
                before_images=kind == "subscription", follows_columns=kind == "delta")
        except ConfigError as exc:
            self._fail_for_good(str(exc))
            return
        while not self.stop_event.is_set():
            self._loaded_before = self.batches_loaded
            self._attempt_loader, self._pauses, self._pause_note = None, False, ""
            self.unacked_left = 0
            try:
                self._run_once(compiled)
                if self._switch.is_set() and not self.stop_event.is_set():
                    self._switch.clear()  # stopped at a batch boundary: go on at the new one
                    continue
                break
            except SwitchPending as exc:  # waits that are no failure: not counted
                if self.state != "switching" or exc.args[0] != self.last_error:
                    log.warning("event=source_switch_pending pipeline=%s reason=%s",
                                self.pipeline_id, exc)
                self.state, self.last_error = "switching", str(exc)
                self.stop_event.wait(SWITCH_POLL_S)
                continue
            except PAUSE_AT_ONCE as exc:  # a definition, user code, a lost position, rows a
                # copy would displace for good or forever: no retry
                self._fail_for_good(str(exc) + self._pause_note)
                return
            except FencedError as exc:
                self.state, self.last_error = "fenced", str(exc)
                log.error("event=pipeline_fenced pipeline=%s error=%s", self.pipeline_id, exc)
                return
            except OwnershipLostError as exc:  # nothing ran yet: nothing to stop or report
                self.state = "stopped" if self.stop_event.is_set() else LOST_OWNERSHIP
                log.warning("event=pipeline_start_abandoned pipeline=%s reason=%s",
                            self.pipeline_id, exc)
                return
            except Exception as exc:  # every failure is retried, then paused
                message = str(exc) if isinstance(exc, SetlError) else f"{type(exc).__name__}: {exc}"
                if missing_right(exc):
                    message += MISSING_RIGHT
                self.last_error, self.state = message, "retrying"
                pauses = self._pauses  # (told before a drain: its acks are no progress)
                failures = self._failures = self._count(exc)
                log.error("event=pipeline_failed pipeline=%s failures=%d error=%s",
                          self.pipeline_id, failures, message.replace("\n", " "),
                          exc_info=not isinstance(exc, SetlError))
                if pauses or failures > self.ctx.pipeline.params.max_retries:
                    self._fail_for_good(message + self._pause_note)
                    return
                self.metrics.retried()
                if failures == 1:
                    delays = iter(self.ctx.backoff.delays() + [self.ctx.backoff.max_delay_s] * 100)
                self.stop_event.wait(next(delays, self.ctx.backoff.max_delay_s))
        if self._central is not None:
            self._central.close()
        self.state = "stopped"
        log.info("event=pipeline_stopped pipeline=%s cursor=%s", self.pipeline_id,
                 self.cursor.position if self.cursor else "-")

    def _feeders(self, target: tuple[str, str, str]) -> list[str]:
        """The other pipelines ZooKeeper's definitions have writing ``target`` (read where a
        window's row displaced a row there: :mod:`node.snapshot.displacing`)."""
        channels = Catalog(self.ctx.client, self.ctx.paths).channels()
        return other_writers([record.channel for record in channels], self.pipeline_id, target)

    # -- one attempt ------------------------------------------------------------------------
    def _run_once(self, compiled: CompiledPipeline) -> None:
        source, hint = self._open(compiled)
        loader = self._attempt_loader = self._loader(hint)
        try:
            self._run_from(compiled, self._resume(loader, source, hint), loader, source)
        except Exception as exc:
            self._pauses = self._pausing(exc)
            if self._pauses:
                self._before_pause(loader, exc)
            raise
        finally:
            outbox = getattr(loader, "outbox", None)  # a subscription's: its last ack stays
            if outbox is not None:  # its status position once the outbox is gone
                self.subscribed, self.acked_end = True, outbox.acked_end
            loader.close()

    def _run_from(self, compiled: CompiledPipeline, resume: cursors.Resume,
                  loader: TargetLoader, source: DataSource) -> None:
        pipeline, params = self.ctx.pipeline, self.ctx.pipeline.params
        self.source = source
        self.cursor = resume.start
        self.batches_selected = self.batches_loaded  # batches dropped by a failure are gone
        carry_over(self._in_flight, self.cursor.process_id + 1)
        if self._central is not None:
            self._central.rewind()  # requests of windows not loaded are taken again
            if params.free_door_source == pipeline.source:  # its buffer: on the primary read
                self._central.use(source)
        compiled, server_id = self._check_source(compiled, resume, loader, source)
        targets = loader.targets
        window = self._window = load.window(params.parallelism, loader)
        facts = kinds.tables(self.target_kind, targets, compiled)
        reader = BinlogReader(source, server_id, self.cursor.position, compiled.wants,
                              compiled.wants_schema, ddl=compiled.ddl_sync,
                              loop_channel=self.ctx.channel.name if self.two_way else None,
                              pipeline_id=self.pipeline_id,
                              layout_problem=compiled.layout_problem,
                              altered=compiled.altered,
                              target_types=target_reader(compiled, facts)
                              if self.target_kind == "mysql" else None)
        planner = Planner(compiled, reader.layouts, facts,
                          lambda: reader.checksum, params, reader.learn,
                          target=self.target_kind,  # the source in use: a switched one's
                          source_columns=lambda schema, table: read_source_columns(
                              source, schema, table))
        door = DoorQueue(self.pipeline_id, source, compiled, self._central, self.door_stats,
                         refusal(self.pipeline_id, self.target_kind, self.two_way),
                         feeders=self._feeders)
        if hasattr(loader, "displaced") and not params.dry_run:  # (a MySQL target's Load)
            loader.displaced = door.displaced  # rows a window's row displaced: asked again
        if hasattr(loader, "sources"):  # (a 1062 pause names the source table to copy)
            loader.sources = functools.partial(source_names, compiled)
        # (a store of this attempt's own: a stopped attempt's thread still planning saves,
        # when it wakes, over the version it loaded, and is fenced once this one loaded)
        attempt_store = SnapshotStore(self.ctx.client, self.ctx.paths, self.pipeline_id)
        snapshots = self._snapshots = Snapshots(self.pipeline_id, source, compiled, params,
                                                self.ctx.spark, attempt_store, door,
                                                lines=planner.lines_plan)
        selector = self._selector = Selector(
            self.pipeline_id, reader, self.cursor.position, self.cursor.process_id + 1,
            params, window, watermarks=snapshots, cuts=resume.cuts)
        handoff: queue.Queue[tuple[Batch, Future[Any]] | Failed | None] = queue.Queue()
        select_stop = self._select_stop = threading.Event()
        if self.stop_event.is_set():
            select_stop.set()
        threading.Thread(target=self._await_spark, args=(handoff, select_stop),
                         name=f"spark-wait-{self.pipeline_id}", daemon=True).start()
        executor = ThreadPoolExecutor(params.parallelism, thread_name_prefix="et")
        select_thread = threading.Thread(
            target=self._select_loop, args=(selector, compiled, planner, executor, handoff,
                                            select_stop, window, snapshots),
            name=f"select-{self.pipeline_id}", daemon=True)
        log.info("event=pipeline_started pipeline=%s position=%s process_id=%d server_id=%d "
                 "source=%s", self.pipeline_id, self.cursor.position,
                 self.cursor.process_id + 1, server_id, members.address(source))
        if not params.dry_run:  # the copies known before Select reads a DDL that fails one
            # (the load writes the state back, fencing whoever loaded before: not by a runner
            # that lost the pipeline during the start's blocking work)
            self._still_owner("the start")
            snapshots.load()
        selector.begin()
        select_thread.start()
        if params.dry_run:  # nothing a later run relies on moves: no copy, no request served
            log.info("event=dry_run_leaves_copies_and_requests pipeline=%s", self.pipeline_id)
        else:
            snapshots.start()
        self.state = "stopping" if self.stop_event.is_set() else "running"
        heap.settle()  # what the start made lives as long as the pipeline runs
        publisher = CursorPublisher(self.cursors, on_error=self._publish_failed,
                                    owns=self.ctx.owns)
        # watched from here, where the finally below ends the watch (a stored switch made
        # since the start is seen at once: the watch reads the record first)
        if source.hosts:  # a switch stored (an operator, another node), or a demoted member
            def moved() -> None:  # what was selected is loaded, then the runner starts again
                self._switch.set()
                select_stop.set()
            self.primary.watch(self.ctx.client, self.ctx.paths.primary(pipeline.source), source,
                               select_stop, moved)
        try:
            load.run(loader, handoff, lambda batch, done, written, wait_s, load_s:
                     self._loaded_one(loader, window, publisher, batch, done, written, wait_s,
                                      load_s))
        finally:
            # the last cursor is only a hint: a stop does not wait long on ZooKeeper for it
            publisher.close(STOP_PUBLISH_S if self.stop_event.is_set() else 5.0)
            select_stop.set()
            snapshots.stop()
            selector.stop()
            select_thread.join(10)
            load.cancel_pending(handoff)
            planner.facts.close()  # a worker reading a silent target's facts ends at once
            executor.shutdown(wait=True, cancel_futures=True)
            planner.facts.close()

    def _await_spark(self, handoff: queue.Queue[Any], stop: threading.Event) -> None:
        """Spark starts beside the stream, not before it: meanwhile every batch but one
        large transaction's runs in the node (:meth:`SparkRunner.local`). A Spark that
        cannot start fails the pipeline (after what was loaded before), as a start that
        waited for it did. ``spark.start: on_demand``: Spark starts when a job first needs
        it, and that job says so when it cannot."""
        if self.ctx.spark.on_demand:
            return
        try:
            self.ctx.spark.context  # noqa: B018 - starts Spark, or waits for its start
        except SetlError as exc:
            if not stop.is_set() and not self.stop_event.is_set():
                handoff.put(Failed(exc))

    def _publish_failed(self, exc: Exception) -> None:
        log.warning("event=cursor_publish_failed pipeline=%s cursor=%s error=%r",
                    self.pipeline_id, self.cursor.position if self.cursor else "-", exc)

    def _loaded_one(self, loader: TargetLoader, window: Window, publisher: CursorPublisher,
                    batch: Batch, done: Done, written: int, wait_s: float,
                    load_s: float) -> None:
        """A batch is on the targets: its windows' reads done, the cursor past it, its window
        slot free, its figures counted."""
        if batch.windows and self._snapshots is not None:
            self._snapshots.loaded(batch)  # its windows' reads are on the target
        self.cursor = Cursor(batch.end, batch.process_id, run=loader.run,
                             targets=dict(loader.written))
        self._progress.set()
        # no hint goes ahead of the targets: a subscription's position is its reader's
        # acknowledgement, and a dry run wrote nothing (the run after it starts where they are)
        if getattr(loader, "durable", True) and not self.ctx.pipeline.params.dry_run:
            publisher.publish(self.cursor)
        window.release(batch.size)
        self.window_peak = max(self.window_peak, window.peak)
        rows = self.counted(loader, batch, done, wait_s, load_s)
        if log.isEnabledFor(logging.DEBUG):
            log_timings(self.pipeline_id, batch, done, rows, written, wait_s, load_s)
