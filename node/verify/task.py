"""A chunk checked where Spark runs it (or in the node, for small work): the source's rows of
the chunk in one consistent snapshot, with its binlog position; the target tables' rows of
the same key range, each target database in one snapshot with the pipeline's position
there; compared by hash. Only the keys that differ travel back, with both signatures.

A chunk compared while the target had not yet loaded past the source's snapshot
(``caught_up`` false) may differ only because its rows were still on their way; the node
decides about such keys later (:mod:`node.verify.settle`), never here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import pymysql

from node.extract.chunks import Chunk, condition
from node.extract.etl import CompiledPipeline
from node.extract.pairs import CompiledPair
from node.verify import lake
from node.verify.lake import LakeView
from node.verify.plan import TablePlan, Target
from node.verify.readers import (
    Key,
    Reader,
    Side,
    Signature,
    SqlReader,
    differing,
    loaded_past,
    reader_for,
    signatures,
    source_held,
    source_snapshot,
    target_snapshot,
)
from shared.endpoint import READ_ISOLATION, READING, connect
from shared.errors import SourceError
from shared.model import BinlogPosition, DataSource

SESSION = READING  # TIMESTAMP in UTC, CHAR unpadded: as the binlog gives them
RUN = 8  # consecutive chunks summed by one query a side first (the sql method)


@dataclass(frozen=True)
class VerifyPipeline(CompiledPipeline):
    """The pipeline's Extract/Transform without the pairs verify leaves out (those with a
    processor, unless columns to compare were chosen), so no processor runs for nothing."""

    keep_processors: bool = False

    @classmethod
    def of(cls, compiled: CompiledPipeline, keep_processors: bool) -> VerifyPipeline:
        state = compiled.__getstate__()
        made = cls.__new__(cls)
        made.__setstate__({**state, "keep_processors": keep_processors})
        return made

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "keep_processors": self.keep_processors}

    def pairs_for(self, schema: str, table: str) -> tuple[CompiledPair, ...]:
        found = super().pairs_for(schema, table)
        if self.keep_processors:
            return found
        return tuple(entry for entry in found if not entry.pair.processor)

    @property
    def broadcast_key(self) -> tuple[str, int, int]:  # never the running pipeline's
        pipeline_id, version, keys = super().broadcast_key
        return f"{pipeline_id}#verify{int(self.keep_processors)}", version, keys


@dataclass(frozen=True)
class ChunkGroup:
    """Chunks of one table checked by one task, with one connection to each database."""

    plan: TablePlan
    chunks: tuple[Chunk, ...]
    targets: dict[str, DataSource]


@dataclass
class ChunkResult:
    table: str
    chunk: int
    rows: int
    at: BinlogPosition  # the source snapshot's binlog position
    caught_up: bool  # every target had loaded past ``at`` when read
    differing: dict[Key, tuple[Signature, Signature]] = field(default_factory=dict)
    chunks: int = 1  # consecutive chunks from ``chunk`` on that this result covers


CONTENDED = {1205, 1213}  # lock wait timeout, deadlock: a writer had the keys


class Sessions:
    """One connection to the source and to each target database, opened on first use."""

    def __init__(self, source: DataSource, targets: dict[str, DataSource]) -> None:
        self.sources = {"": source, **targets}
        self._open: dict[str, Any] = {}

    def cursor(self, name: str = "") -> Any:
        conn = self._open.get(name)
        if conn is None:
            conn = self._open[name] = connect(self.sources[name], autocommit=True,
                                              init_command=SESSION,
                                              isolation=READ_ISOLATION)
        return conn.cursor()

    def close(self) -> None:
        for conn in self._open.values():
            try:
                conn.close()
            except pymysql.MySQLError:
                pass
        self._open.clear()


class Snapshots:
    """A consistent snapshot per target database, begun when first needed, with the
    pipeline's position in it; a lake's tables each at one version, with theirs
    (:class:`node.verify.lake.LakeView`); all ended by :meth:`end`."""

    def __init__(self, sessions: Sessions, pipeline_id: str) -> None:
        self.sessions, self.pipeline_id = sessions, pipeline_id
        self.cursors: dict[str, Any] = {}
        self.positions: dict[str, BinlogPosition | None] = {}
        self.lakes: dict[str, LakeView] = {}

    def cursor(self, datasource: str) -> Any:
        found = self.cursors.get(datasource)
        if found is None:
            found = self.cursors[datasource] = self.sessions.cursor(datasource)
            self.positions[datasource] = target_snapshot(found, self.pipeline_id)
        return found

    def of(self, target: Target) -> Any:
        """What reads ``target``: its database's cursor, or its lake's view."""
        if not target.lake:
            return self.cursor(target.datasource)
        found = self.lakes.get(target.datasource)
        if found is None:
            found = self.lakes[target.datasource] = LakeView(
                self.sessions.sources[target.datasource], self.pipeline_id)
        return found

    def past(self, at: BinlogPosition, targets: Sequence[Target]) -> bool:
        """Whether every target table had loaded past ``at`` in its snapshot."""
        for target in targets:
            view = self.of(target)
            position = view.position(target.schema, target.table) if target.lake else \
                self.positions.get(target.datasource)
            if not loaded_past(position, at):
                return False
        return True

    def end(self) -> None:
        for cursor in self.cursors.values():
            cursor.execute("COMMIT")
        self.cursors.clear()
        self.lakes.clear()


def check_group(compiled: CompiledPipeline, group: ChunkGroup) -> list[ChunkResult]:
    """The task: the group's chunks checked in turn, with one connection to each database."""
    if compiled.source is None:
        raise SourceError(f"pipeline {compiled.pipeline_id}: verify needs the source")
    sessions = Sessions(compiled.source, group.targets)
    try:
        reader = reader_for(group.plan, compiled)
        return [check_chunk(reader, sessions, chunk) for chunk in group.chunks]
    finally:
        sessions.close()


class Threads:
    """Chunks checked by threads of the node, each with its own connections (kept for the
    table), in chunk order."""

    def __init__(self, compiled: CompiledPipeline, plan: TablePlan,
                 targets: dict[str, DataSource], count: int) -> None:
        self.compiled, self.plan, self.targets, self.count = compiled, plan, targets, count
        self._local = threading.local()
        self._sessions: list[Sessions] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> Threads:
        return self

    def check(self, chunks: Sequence[Chunk]) -> list[ChunkResult]:
        """The chunks' results in chunk order, once every one is checked."""
        return [result for found in self._executor().map(self._one, runs(chunks))
                for result in found]

    def stream(self, chunks: Sequence[Chunk]) -> Iterator[list[ChunkResult]]:
        """Every chunk checked, each run's results as soon as it is done (in any order):
        no thread waits for another's run between waves, and the runs shrink towards the
        end (:func:`runs`), so the threads finish together."""
        pool = self._executor()
        futures = [pool.submit(self._one, run) for run in runs(chunks, threads=self.count)]
        for future in as_completed(futures):
            yield future.result()

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.count, thread_name_prefix="verify")
        return self._pool

    def _one(self, run: list[Chunk]) -> list[ChunkResult]:
        found = getattr(self._local, "reader", None)
        if found is None:
            assert self.compiled.source is not None
            sessions = Sessions(self.compiled.source, self.targets)
            with self._lock:
                self._sessions.append(sessions)
            found = self._local.reader = (reader_for(self.plan, self.compiled), sessions)
        return check_run(found[0], found[1], run)

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for sessions in self._sessions:
            sessions.close()


def check_chunk(reader: Reader, sessions: Sessions, chunk: Chunk) -> ChunkResult:
    """A chunk compared in one source snapshot and one snapshot per target database: by
    the sql method (without ``--where``) by sums first, rows only if they differ."""
    return check_run(reader, sessions, [chunk])[0]


def runs(chunks: Sequence[Chunk], most: int = RUN, threads: int = 1) -> list[list[Chunk]]:
    """Consecutive chunks in runs of at most ``most``; the NULL chunk alone. For ``threads``
    taking the runs in turn, no run is longer than the chunks left after it shared among
    them: the last runs shrink to one chunk, so no thread checks a long run while the others
    have nothing left (runs of 8 over six threads left five idle for a run's time)."""
    found: list[list[Chunk]] = []
    before = 0  # chunks in the runs before the last
    for chunk in chunks:
        last = found[-1] if found else None
        longest = min(most, -(-(len(chunks) - before) // threads))
        if last is not None and len(last) < longest and not chunk.nulls and \
                not last[-1].nulls and last[-1].index + 1 == chunk.index:
            last.append(chunk)
        else:
            before += len(last) if last is not None else 0
            found.append([chunk])
    return found


def check_run(reader: Reader, sessions: Sessions, run: list[Chunk]) -> list[ChunkResult]:
    """Consecutive chunks compared in one source snapshot and one per target database. By
    the sql method (without ``--where``) the run's sums are compared first (one query a
    side: a chunk's query costs about as much as its rows), then each chunk's where they
    differ, then rows where a chunk's differ."""
    plan = reader.plan
    source = sessions.cursor()
    at = source_snapshot(source)
    snapshots = Snapshots(sessions, plan.pipeline_id)
    try:
        summed = isinstance(reader, SqlReader) and not plan.where
        if summed and len(run) > 1:
            rows = _equal_sums(reader, source, snapshots, Chunk(-1, run[0].low, run[-1].high))
            if rows is not None:
                return [ChunkResult(plan.name, run[0].index, rows, at,
                                    snapshots.past(at, plan.targets), chunks=len(run))]
        caught_up = snapshots.past(at, plan.targets)  # the targets' snapshots begin
        results = []
        for chunk in run:
            rows = _equal_sums(reader, source, snapshots, chunk) if summed else None
            results.append(ChunkResult(plan.name, chunk.index, rows, at, caught_up)
                           if rows is not None else
                           _compared(reader, source, snapshots, chunk, at, caught_up))
        return results
    finally:
        source.execute("COMMIT")
        snapshots.end()


def _equal_sums(reader: Reader, source: Any, snapshots: Snapshots, chunk: Chunk
                ) -> int | None:
    """The chunk's rows if every target table's count and XOR of hashes are the
    source's (which hashes each target's columns apart), else None."""
    assert isinstance(reader, SqlReader)
    plan = reader.plan
    sums = reader.sums(source, *condition(plan.key, chunk))
    for number, target in enumerate(plan.targets):
        found = reader.target_sums(snapshots.cursor(target.datasource), target,
                                   *condition(plan.key, chunk, target.range_column))
        if found != (sums[0], sums[number + 1]):
            return None
    return sums[0]


def _compared(reader: Reader, source: Any, snapshots: Snapshots, chunk: Chunk,
              at: BinlogPosition, caught_up: bool) -> ChunkResult:
    """A chunk's rows compared (in the snapshots already begun)."""
    plan = reader.plan
    side = reader.source(source, *condition(plan.key, chunk))
    actual = {}
    for target in plan.targets:
        cursor = snapshots.of(target)
        if target.extras and target.lake:
            actual[target.id] = lake.chunk_rows(cursor, plan.key, chunk, target, side)
        elif target.extras:  # the key range: rows no source row gives show up too
            actual[target.id] = reader.target(
                cursor, target, *condition(plan.key, chunk, target.range_column), side)
        else:
            keys = [key for key, tables in side.expected.items() if target.id in tables]
            actual[target.id] = reader.target_keys(cursor, target, keys, side)
    return ChunkResult(plan.name, chunk.index, side.rows, at, caught_up,
                       differing(side, actual))


@dataclass
class Probe:
    """The node's reads of chosen keys, for re-checks: the source in one snapshot (with
    its position), then the targets in theirs."""

    compiled: CompiledPipeline
    plan: TablePlan
    sessions: Sessions
    reader: Reader = field(init=False)

    def __post_init__(self) -> None:
        self.reader = reader_for(self.plan, self.compiled)

    def source(self, keys: Sequence[Key]) -> tuple[BinlogPosition, Side] | None:
        """The keys' rows on the source, held still (locked) until :meth:`release`; None
        when a writer's locks kept them (a deadlock, a lock wait timeout): try again."""
        cursor = self.sessions.cursor()
        try:
            at = source_held(cursor, lambda: self.reader.hold(cursor, keys))
            return at, self.reader.source_keys(cursor, keys)
        except pymysql.MySQLError as exc:
            cursor.execute("ROLLBACK")
            if exc.args and exc.args[0] in CONTENDED:
                return None
            raise SourceError(f"verify read failed on {self.plan.name}: "
                              f"{exc.args[-1] if exc.args else exc}") from None
        except BaseException:
            cursor.execute("ROLLBACK")
            raise

    def release(self) -> None:
        self.sessions.cursor().execute("COMMIT")

    def targets(self, keys: Sequence[Key], side: Side
                ) -> dict[Key, tuple[Signature, Signature]]:
        snapshots = Snapshots(self.sessions, self.plan.pipeline_id)
        try:
            actual = {target.id: self.reader.target_keys(snapshots.of(target), target, keys,
                                                         side)
                      for target in self.plan.targets}
        finally:
            snapshots.end()
        found = signatures(side, actual, keys)
        # a row outside --where that the source still has is none of verify's business
        return {key: pair for key, pair in found.items()
                if pair[0] or key not in side.known}

