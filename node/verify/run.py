"""One ``setl verify`` of one pipeline, on the node that runs it.

For each table (:mod:`node.verify.plan`): split into chunks (:mod:`node.extract.chunks`),
check the chunks: by the rows method as Spark jobs in waves (one task per core with a run of
the wave's chunks), by the sql method in threads of the node (the databases do that work),
throttled to ``rate`` rows a second; then re-check the keys found different until each is
confirmed or shown equal (:mod:`node.verify.settle`, waiting on the pipeline's loaded
position); with ``repair``, send the confirmed keys through the free door
(:mod:`node.verify.repair`), wait until they are served and re-check them, at most
``repair_rounds`` times.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import pymysql

from node import sqllex
from node.extract.chunks import ChunkPlan, escaped, split
from node.extract.etl import CompiledPipeline
from node.spark import SparkRunner
from node.verify import repair as mend
from node.verify.lake import LakePlanner
from node.verify.plan import Absent, Request, TablePlan, plan
from node.verify.readers import EMPTY, Key, loaded_past
from node.verify.report import Report, TableReport, fill
from node.verify.settle import Outcome, Seen, settle
from node.verify.task import (
    ChunkGroup,
    ChunkResult,
    Probe,
    Sessions,
    Threads,
    VerifyPipeline,
    check_group,
)
from shared import tablekeys
from shared.errors import SetlError, SourceError, VerifyError
from shared.model import TWO_WAY_COPY, BinlogPosition, Channel, DataSource, MediaPair, Pipeline

log = logging.getLogger("setl.node.verify")
WAVE_S = 2.0  # a wave of chunks (one Spark job) takes about this long: progress, and a job's
# fixed cost (0.2-0.3 s measured with two local workers) spread over enough work
SQL_THREADS_PER_CORE = 3  # the sql method: each thread waits on the source, then on the
# targets, so both servers have queries to run (2M rows, 2 cores: 2.4 s with one thread a
# core, 1.6-1.9 s with three)


@dataclass(frozen=True)
class Options:
    table: str = ""
    where: str = ""
    chunk_size: int = 10_000
    rate: int = 0  # source rows a second, 0: as fast as it goes
    repair: bool = False
    columns: tuple[str, ...] = ()
    compare: str = "auto"  # auto | rows
    settle_timeout_s: float = 120.0
    shared_targets: frozenset[str] = frozenset()  # datasource:schema.table others write too
    other_pairs: tuple[MediaPair, ...] = ()  # other pipelines' pairs into the same targets
    rounds: int = 6
    repair_rounds: int = 3


@dataclass(frozen=True)
class Context:
    """What the node gives a verify run."""

    channel: Channel
    pipeline: Pipeline
    version: int
    sources: dict[str, DataSource]
    spark: SparkRunner
    # the pipeline's loaded position on this node; raises VerifyError once it stops here
    applied: Callable[[], BinlogPosition | None]

    @property
    def pipeline_id(self) -> str:
        return self.channel.pipeline_id(self.pipeline)


@dataclass
class Progress:
    pipeline_id: str
    table: str
    phase: str  # splitting | checking | rechecking | repairing
    chunks_done: int = 0
    chunks_total: int = 0
    rows_done: int = 0
    rows_total: int = 0


class Verification:
    def __init__(self, ctx: Context, options: Options, progress: Callable[[Progress], None],
                 cancelled: Callable[[], bool] = lambda: False) -> None:
        self.ctx, self.options, self.progress, self.cancelled = ctx, options, progress, cancelled
        self.source = ctx.sources[ctx.pipeline.source]
        self.targets = {pair.target.datasource: ctx.sources[pair.target.datasource]
                        for pair in ctx.pipeline.pairs}

    def run(self) -> Report:
        started = time.monotonic()
        if self.options.repair and self.ctx.channel.two_way:
            raise VerifyError(f"pipeline {self.ctx.pipeline_id}: a two-way channel takes no "
                              f"repair: {TWO_WAY_COPY}; verify without --repair says what "
                              "differs")
        base = self._compiled()  # every pair: the plan says which are left out, and why
        compiled = VerifyPipeline.of(base, keep_processors=bool(self.options.columns))
        report = Report(self.ctx.pipeline_id)
        sessions = Sessions(self.source, self.targets)
        try:
            request = Request(self.options.table, self.options.where, self.options.columns,
                              self.options.compare, self.options.shared_targets,
                              self.options.other_pairs)
            plans, report.skipped = plan(base, sessions.cursor(), sessions.cursor, request,
                                         LakePlanner(base, self.targets))
            for table in plans:
                report.tables.append(self._absent(table, sessions) if isinstance(table, Absent)
                                     else self._table(compiled, table, sessions, report))
        except pymysql.MySQLError as exc:
            raise VerifyError(f"pipeline {self.ctx.pipeline_id}: verify failed: "
                              f"{exc.args[-1] if exc.args else exc}") from None
        finally:
            sessions.close()
        report.seconds = round(time.monotonic() - started, 3)
        return report

    def _compiled(self) -> CompiledPipeline:
        ctx = self.ctx
        compiled = CompiledPipeline.compile(ctx.pipeline_id, ctx.version, ctx.pipeline,
                                            source=self.source)
        try:
            keys = tablekeys.read_keys(self.source)
        except pymysql.MySQLError as exc:
            raise SourceError(f"pipeline {ctx.pipeline_id}: cannot read the tables of "
                              f"{self.source.name}: {exc.args[-1] if exc.args else exc}"
                              ) from None
        unique, _ = tablekeys.pipeline_keys(ctx.pipeline, keys, lake=any(
            target.type == "delta" for target in self.targets.values()))  # keyed as loaded
        return CompiledPipeline(**{**compiled.__getstate__(), "table_keys": unique})

    # -- one table --------------------------------------------------------------------------
    def _absent(self, table: Absent, sessions: Sessions) -> TableReport:
        """A table whose target table does not exist: every row of it is missing there (a
        difference, counted; the keys are not listed, nor other targets compared)."""
        out = TableReport(table.name, "none", [table.target])
        cursor = sessions.cursor()
        cursor.execute("START TRANSACTION READ ONLY")  # --where is the user's: it reads only
        try:
            where = f" WHERE {escaped(table.where)}" if table.where else ""
            cursor.execute(f"SELECT COUNT(*) FROM {table.key.name}{where}", ())
            out.rows = int(cursor.fetchone()[0])
        finally:
            cursor.execute("COMMIT")
        out.keys = out.rows
        out.counts = {"missing": out.rows, "extra": 0, "different": 0}
        out.notes.append(f"target table {table.target} does not exist: every row of "
                         f"{table.name} ({out.rows:,}) is missing there, and its other target "
                         "tables were not compared; create it (with the pipeline's DDL or by "
                         "hand) and verify again")
        if self.options.repair:
            out.remaining = out.keys
            if out.keys:
                out.notes.append(f"not repaired: target table {table.target} does not exist "
                                 "(the free door writes rows into a table, it does not create "
                                 "one)")
        log.info("event=verify_table pipeline=%s table=%s target_missing=%s rows=%d",
                 self.ctx.pipeline_id, table.name, table.target, out.rows)
        return out

    def _table(self, compiled: CompiledPipeline, table: TablePlan, sessions: Sessions,
               report: Report) -> TableReport:
        started = time.monotonic()
        out = TableReport(table.name, table.method, [t.id for t in table.targets],
                          notes=list(table.notes))
        self._say(table.name, "splitting")
        cursor = sessions.cursor()
        cursor.execute("START TRANSACTION READ ONLY")  # --where is the user's: it reads only
        try:
            chunks = split(cursor, table.key, self.options.chunk_size, table.where)
        finally:
            cursor.execute("COMMIT")
        out.chunks = len(chunks.chunks)
        results = self._check(compiled, table, chunks)
        out.rows = sum(result.rows for result in results)
        pending = {key: Seen(expected, actual, result.caught_up) for result in results
                   for key, (expected, actual) in result.differing.items()}
        out.rechecked = len(pending)
        self._say(table.name, "rechecking", out.chunks, out.chunks, out.rows, chunks.rows)
        probe = Probe(compiled, table, sessions)
        outcome = self._settle(pending, probe)
        if self.options.repair:
            out.remaining = 0  # nothing confirmed, nothing remains (-1: no repair asked)
            if outcome.confirmed:
                outcome = self._repair(table, probe, outcome, out, report)
        fill(out, outcome, table)
        out.seconds = round(time.monotonic() - started, 3)
        log.info("event=verify_table pipeline=%s table=%s method=%s rows=%d chunks=%d "
                 "rechecked=%d differing=%d unsettled=%d repaired=%d seconds=%.2f",
                 self.ctx.pipeline_id, table.name, table.method, out.rows, out.chunks,
                 out.rechecked, out.keys, out.unsettled, out.repaired, out.seconds)
        return out

    def _check(self, compiled: CompiledPipeline, table: TablePlan, chunks: ChunkPlan
               ) -> list[ChunkResult]:
        """The chunks checked: by the rows method (Python's work) in waves of Spark jobs,
        one task per core; by the sql method (the databases' work) or a table of one or two
        chunks in threads of the node (no job's fixed cost, 0.2-0.3 s a wave, paid for
        milliseconds of Python), each thread taking the next run as it ends one (a wave's
        end left threads idle), in waves only under ``--rate``."""
        spark, options = self.ctx.spark, self.options
        in_node = table.method == "sql" or len(chunks.chunks) <= 2
        slots = SQL_THREADS_PER_CORE * max(2, spark.partitions) if table.method == "sql" \
            else 1 if in_node else spark.partitions
        # a wave grows until it takes about WAVE_S (progress; a Spark job's fixed cost
        # spread), and --rate caps it at about a second of rows
        ceiling = slots * 64 if not options.rate else \
            max(1, min(slots * 64, options.rate // options.chunk_size))
        per_wave = min(slots * 8, ceiling)  # then sized by how long a wave took
        results: list[ChunkResult] = []
        started, rows = time.monotonic(), 0
        todo = list(chunks.chunks)
        self._say(table.name, "checking", 0, len(todo), 0, chunks.rows)
        with Threads(compiled, table, self.targets, slots) as threads:
            if in_node and not options.rate:  # no wave to wait for: every thread kept busy
                checked = 0
                for done in threads.stream(todo):
                    if self.cancelled():
                        raise VerifyError("verify cancelled")
                    results += done
                    rows += sum(result.rows for result in done)
                    checked += sum(result.chunks for result in done)
                    self._say(table.name, "checking", checked, len(todo), rows, chunks.rows)
                todo = []
            while todo:
                if self.cancelled():
                    raise VerifyError("verify cancelled")
                wave, todo = todo[:per_wave], todo[per_wave:]
                began = time.monotonic()
                if in_node:
                    done = threads.check(wave)
                else:
                    share = -(-len(wave) // slots)  # each task a run of consecutive chunks
                    done = spark.map_tasks(compiled, check_group, [
                        ChunkGroup(table, tuple(wave[i:i + share]), self.targets)
                        for i in range(0, len(wave), share)], local=False)
                took = time.monotonic() - began
                log.debug("event=verify_wave pipeline=%s table=%s chunks=%d rows=%d "
                          "in_node=%s took_ms=%.0f", self.ctx.pipeline_id, table.name,
                          len(wave), sum(r.rows for r in done), in_node, took * 1000)
                results += done
                rows += sum(result.rows for result in done)
                self._say(table.name, "checking", sum(r.chunks for r in results),
                          len(chunks.chunks), rows, chunks.rows)
                per_wave = max(slots, min(ceiling, int(len(wave) * WAVE_S / max(took, 0.01))))
                if options.rate:
                    time.sleep(max(0.0, rows / options.rate - (time.monotonic() - started)))
        return results

    def _settle(self, pending: dict[Key, Seen], probe: Probe) -> Outcome:
        if not pending:
            return Outcome()
        return settle(pending, probe, self._wait_loaded, self.options.rounds)

    def _wait_loaded(self, at: BinlogPosition, limit_s: float | None = None) -> bool:
        """Whether the pipeline loaded past the source position ``at`` within ``limit_s``
        (None: within the settle timeout, else VerifyError)."""
        deadline = time.monotonic() + self.options.settle_timeout_s
        limit = time.monotonic() + limit_s if limit_s is not None else None
        while True:
            applied = self.ctx.applied()
            if loaded_past(applied, at):
                return True
            if self.cancelled():
                raise VerifyError("verify cancelled")
            if limit is not None and time.monotonic() > limit:
                return False
            if time.monotonic() > deadline:
                raise VerifyError(
                    f"pipeline {self.ctx.pipeline_id} has not loaded past the source's "
                    f"position {at} within {self.options.settle_timeout_s:.0f} s "
                    f"(it is at {applied or 'no position'}); verify re-checks a key only "
                    "once the pipeline has loaded what the source had when it read the key. "
                    "Check setl status for its delay, or give --settle-timeout more time")
            time.sleep(0.05)

    def _repair(self, table: TablePlan, probe: Probe, outcome: Outcome, out: TableReport,
                report: Report) -> Outcome:
        params, ctx = self.ctx.pipeline.params, self.ctx
        central = params.free_door_source
        buffer = mend.Buffer(ctx.sources[central], ctx.channel.name, ctx.pipeline.name) \
            if central else mend.Buffer(self.source, None, None)
        report.buffer = buffer.name
        refused = mend.refusal(self.source, ctx.pipeline.key_columns(table.key.schema,
                                                                     table.key.table), table.key)
        if refused:  # nothing written: the keys stay as found
            out.notes.append(f"not repaired: {refused}")
            out.remaining = len(outcome.confirmed)
            return outcome
        found = outcome
        for _ in range(self.options.repair_rounds):
            requests = mend.requests_for(found.confirmed)
            self._say(table.name, "repairing", rows_done=len(requests))
            ranges = mend.write(buffer, table.name, requests)
            out.repaired += len(requests)
            mend.wait_served(buffer, ranges, self.options.settle_timeout_s, self.cancelled)
            again = {key: Seen(EMPTY, frozenset({("", ())}), False) for key in found.confirmed}
            after = self._settle(again, probe)
            after.unsettled |= found.unsettled
            found = after
            if not found.confirmed:
                break
        out.remaining = len(found.confirmed)  # what was found stays in the report
        return Outcome(outcome.confirmed, found.unsettled, outcome.rounds)

    def _say(self, table: str, phase: str, chunks_done: int = 0, chunks_total: int = 0,
             rows_done: int = 0, rows_total: int = 0) -> None:
        self.progress(Progress(self.ctx.pipeline_id, table, phase, chunks_done, chunks_total,
                               rows_done, rows_total))


def options_problem(options: Options) -> str | None:
    """What is wrong with the options, or None."""
    if options.chunk_size < 1:
        return f"--chunk-size must be a positive number of rows, got {options.chunk_size}"
    if options.rate < 0:
        return f"--rate must be rows a second (0: unthrottled), got {options.rate}"
    if options.compare not in ("auto", "rows"):
        return f"--compare must be auto or rows, got {options.compare!r}"
    return sqllex.condition_problem(options.where)


def failed(exc: Exception) -> SetlError:
    """Any error of a run as one SetlError saying what to do."""
    if isinstance(exc, SetlError):
        return exc
    return VerifyError(f"verify failed: {type(exc).__name__}: {exc}")

