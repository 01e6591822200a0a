"""A batch's Extract/Transform, run in one of a pipeline's E/T threads: the batch cut into
parts and sent to Spark (or run in the node when small), or a DDL batch turned into target
changes; what Load gets back (:class:`Done`), and how to render it again row by row
(``skip_load_exception``'s second try)."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable

from node.changes import Batch, RowChange
from node.extract.etl import CompiledPipeline
from node.extract.job import Part, Planner, with_lines
from node.extract.reads import Read
from node.jobs import Done, JobSpec, PartResult
from node.spark import SparkRunner
from node.window import Window


def run(spark: SparkRunner, window: Window, compiled: CompiledPipeline, planner: Planner,
        batch: Batch, reads: list[Read], two_way: bool,
        copying: Callable[[str, str], bool] | None = None) -> Done:
    """Cut the batch into parts and run its Extract/Transform (``copying``: the source
    tables whose copy is unfinished, :meth:`node.extract.job.Planner.spec`)."""
    started, started_ms = time.monotonic(), int(time.time() * 1000)
    try:
        local = spark.local(batch.rows + sum(r.count for r in reads if r.lines is None))
        parts = planner.parts(batch, 1 if local else spark.partitions, reads)
        spec = planner.spec(batch, parts, copying, changes_only=two_way)
        results = with_lines(spark.run_job(compiled, spec, parts, local), reads)
        for result in results:
            planner.learn(result.sizes)  # Select's estimate of a batch's rows
    finally:
        window.extracted()
    changes = [c for result in results for c in result.changes] if two_way else None
    return Done(results, changes, (time.monotonic() - started) * 1000, started_ms,
                functools.partial(_row_by_row, spark, compiled, spec, parts, reads))


def _row_by_row(spark: SparkRunner, compiled: CompiledPipeline, spec: JobSpec,
                parts: list[Part], reads: list[Read]) -> list[PartResult]:
    return with_lines(spark.run_job(compiled, dataclasses.replace(spec, one_by_one=True),
                                    parts, local=True), reads)


def run_ddl(spark: SparkRunner, window: Window, compiled: CompiledPipeline,
            changes: list[RowChange]) -> Done:
    """A DDL batch's target changes (run in the node)."""
    started, started_ms = time.monotonic(), int(time.time() * 1000)
    try:
        targets = spark.changes(compiled, changes)
    finally:
        window.extracted()
    return Done([], targets, (time.monotonic() - started) * 1000, started_ms)
