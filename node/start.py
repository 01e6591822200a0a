"""How a pipeline's runner begins: its cursor (the hint), the claim of its targets (fenced
before they are read), and the checks that refuse a start that would skip or repeat rows
or that the source's tables cannot take. Where it resumes is :func:`node.cursor.resume`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pymysql

from node.cursor import Cursor, CursorStore, Resume
from node.extract.etl import CompiledPipeline
from node.load.loader import Loader
from node.load.owners import FencedError
from node.snapshot.controller import paired_tables
from node.snapshot.state import SnapshotStore
from shared import gtid, positions, tablekeys
from shared.errors import ConfigError, PositionConflictError, SourceError
from shared.model import BinlogPosition, DataSource, Pipeline, StartupMode


def first_or_stored(cursors: CursorStore, snapshots: SnapshotStore, pipeline: Pipeline,
                    source: DataSource, compiled: CompiledPipeline) -> Cursor:
    """The stored cursor. The manager fixes a pipeline's first one when the user starts
    the channel (``start: latest`` is that moment, not when a runner gets going); a
    pipeline started otherwise takes its start now, stored at once so that a failure of
    the first batches rewinds to it instead of to a later 'latest'. On a first start a
    snapshot's tables are asked for."""
    stored = cursors.load()
    if stored is not None and not stored.first:
        return stored
    first = stored or positions.first_cursor(pipeline, source)
    if pipeline.params.startup is StartupMode.SNAPSHOT:  # every paired table copied
        for schema, table in paired_tables(source, compiled):  # in the stream
            snapshots.ask(schema, table)
    first = dataclasses.replace(first, first=False)
    cursors.save(first)
    return first


def claim(loader: Loader, owns: Callable[[], bool], epoch: int,
          pipeline_id: str) -> dict[str, Cursor | None]:
    """Fence the targets and read where they are. A newer epoch on a target while this
    node still holds the pipeline's mainstem is no newer owner: ZooKeeper's history went
    back (restored from a backup, or rebuilt), and every load would be refused for ever."""
    try:
        return loader.claim()
    except FencedError as exc:
        if not owns():
            raise
        raise PositionConflictError(
            f"{exc.args[0].split(';')[0]}, yet this node holds the pipeline in ZooKeeper "
            f"(epoch {epoch}): ZooKeeper's history went back (restored from a backup, or "
            "rebuilt?). Once no other setl node runs this pipeline, reset the row's epoch on "
            "that target (UPDATE retl.retl_position SET owner_epoch = 0 WHERE pipeline_id = "
            f"'{pipeline_id}') and start the channel again") from None


def within_binlog(pipeline_id: str, resume: Resume, end: BinlogPosition) -> None:
    """Refuse a start past the source's binlog end: the targets' rows (or the cursor) were
    written from another server's binlog, or before the source's was reset (RESET MASTER),
    so what they hold cannot be told from this binlog's positions."""
    start = resume.start.position
    if gtid.same_server(start, end) and start.order() > end.order():
        raise PositionConflictError(
            f"pipeline {pipeline_id}: it would start at {start}, past source's binlog end "
            f"{end}: the targets' position rows were written from another server's binlog, "
            "or before the source's binlog was reset (RESET MASTER). Copy the paired tables "
            "again, then set where it starts (setl position set … --latest --replay)")


def with_table_keys(compiled: CompiledPipeline, source: DataSource,
                    pipeline: Pipeline) -> CompiledPipeline:
    """The compiled pipeline with the unique keys of its tables that have no primary key;
    a table nothing keys refuses the start."""
    try:
        keys = tablekeys.read_keys(source)
    except pymysql.MySQLError as exc:
        raise SourceError(f"pipeline {compiled.pipeline_id}: cannot read the tables of "
                          f"{source.name}: {exc.args[-1] if exc.args else exc}") from None
    unique, problems = tablekeys.pipeline_keys(pipeline, keys)
    if problems:
        raise ConfigError("; ".join(problems))
    return dataclasses.replace(compiled, table_keys=unique)
