"""How a snapshot window's work is read (:mod:`node.snapshot.controller`): a read task per
chunk of a copy or per table's free-door requests, with the table's columns checked against
the pairs as a table map's are; chunks that go as LOAD DATA lines are read in the node's
threads while the others run as Spark tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from node.extract import chunks
from node.extract.copylines import LinesPlan
from node.extract.etl import CompiledPipeline
from node.extract.reads import Read, ReadColumn, columns_of
from node.snapshot.door import Asked
from node.snapshot.state import TableCopy
from node.snapshot.tasks import ReadTask, run, run_lines
from node.spark import SparkRunner
from shared import confinement
from shared.endpoint import connect
from shared.errors import ConfigError
from shared.model import DataSource

# (schema, table, its columns, the key a copy reads by) → how chunks go as lines, or None
LinesPlanner = Callable[[str, str, tuple[ReadColumn, ...], tuple[str, ...]], LinesPlan | None]


@dataclass
class Work:
    """A read of a window: a chunk of a copy, or free-door requests of one table."""

    copy: TableCopy | None = None
    chunk: chunks.Chunk | None = None
    asked: Asked | None = None

class WindowReads:
    """The reads of one pipeline's windows: its source, its pairs, Spark and a pool of
    threads for the lines."""

    def __init__(self, pipeline_id: str, source: DataSource, compiled: CompiledPipeline,
                 spark: SparkRunner, parallelism: int, lines: LinesPlanner | None = None
                 ) -> None:
        self.pipeline_id, self.source, self.compiled = pipeline_id, source, compiled
        self.spark = spark
        self.lines = lines  # how chunks of a table are read as LOAD DATA lines, if they can
        self.columns: dict[tuple[str, str], tuple[ReadColumn, ...]] = {}
        self._pool = ThreadPoolExecutor(max(1, parallelism),
                                        thread_name_prefix=f"snapshot-read-{pipeline_id}")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def read(self, tasks: list[ReadTask], work: list[Work]) -> list[Read]:
        """The window's reads in task order: chunks that go as lines in the node's threads
        while the others run as Spark tasks (as do lines that must go as rows after all)."""
        found: list[Read | None] = [None] * len(tasks)
        threads = {index: self._pool.submit(run_lines, task)
                   for index, task in enumerate(tasks) if task.lines is not None}
        self._as_rows(found, [i for i in range(len(tasks)) if i not in threads], tasks, work)
        for index, future in threads.items():
            found[index] = future.result()
        self._as_rows(found, [i for i in threads if found[i] is None], tasks, work)
        return found  # type: ignore[return-value]

    def _as_rows(self, found: list[Read | None], indexes: list[int], tasks: list[ReadTask],
                 work: list[Work]) -> None:
        if not indexes:
            return
        local = self.spark.local(sum(
            one.copy.rows // max(one.copy.total, 1) if one.copy is not None else
            len(one.asked.requests) if one.asked else 0 for one in map(work.__getitem__, indexes)))
        reads = self.spark.map(run, [tasks[i]._replace(lines=None) for i in indexes], local,
                               f"pipeline {self.pipeline_id}: snapshot read")
        for index, read in zip(indexes, reads, strict=True):
            found[index] = read

    def task(self, window_id: int, work: Work) -> ReadTask:
        key = work.copy.key if work.copy is not None else work.asked.key  # type: ignore[union-attr]
        assert key is not None  # (a request's: keyed after the low watermark)
        columns = self.columns.get((key.schema, key.table))
        if columns is None:
            with connect(self.source) as conn, conn.cursor() as cursor:
                columns = columns_of(cursor, key.schema, key.table)
            problem = self.compiled.layout_problem(  # as a table map's are (once a table)
                key.schema, key.table, tuple(column.name for column in columns), key.columns)
            if problem:
                raise ConfigError(problem)
            self.columns[(key.schema, key.table)] = columns
        if work.asked is not None:
            return ReadTask(window_id, self.source, confinement.current(), key, columns, "",
                            keys=work.asked.keys, deletes=work.asked.deletes,
                            label=label(work))
        assert work.copy is not None
        lines = self.lines(key.schema, key.table, columns, key.columns) \
            if self.lines is not None else None
        return ReadTask(window_id, self.source, confinement.current(), key, columns,
                        work.copy.where, work.chunk, label=label(work), lines=lines)


def label(work: Work) -> str:
    if work.asked is not None:
        return f"free door {work.asked.schema}.{work.asked.table} " \
               f"({len(work.asked.requests)} request(s))"
    assert work.copy is not None and work.chunk is not None
    return f"{work.copy.id}#{work.chunk.index}"
