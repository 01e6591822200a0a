"""How a table asked for is planned for its copy (:meth:`node.snapshot.controller.Snapshots`
takes the requests): its key, and its chunks split once, when the copy starts; and the key
a free-door request's table is read by (:func:`request_key`)."""

from __future__ import annotations

import time
from typing import Any

from node import sqllex
from node.extract import chunks
from node.extract.etl import CompiledPipeline
from node.extract.freedoor import Request
from node.snapshot import plans
from node.snapshot.state import TableCopy
from shared.endpoint import READ_ISOLATION, READING, connect
from shared.errors import ConfigError, FreeDoorRequestError
from shared.model import DataSource
from shared.positions import end_if_known
from shared.tablekeys import door_key


def plan(pipeline_id: str, source: DataSource, compiled: CompiledPipeline, chunk_size: int,
         schema: str, table: str, where: str) -> TableCopy:
    """The copy of ``schema.table`` (the rows ``where`` keeps), split in chunks of about
    ``chunk_size`` rows by its key; ConfigError when the table cannot be copied."""
    problem = sqllex.condition_problem(where) if where else None
    if problem is not None:
        raise ConfigError(f"pipeline {pipeline_id}: {problem}")
    if not compiled.wants(schema, table):
        raise ConfigError(f"pipeline {pipeline_id}: table {schema}.{table} is not "
                          "replicated by this pipeline, so it cannot be copied by it")
    configured = compiled.configured_keys(schema, table)
    with connect(source, init_command=READING, isolation=READ_ISOLATION) as conn, \
            conn.cursor() as cursor:
        # read before the key and chunks (None: not known): a DDL logged at or before it
        # ran before the copy read anything, so the copy reads the table that has the
        # name after it (Snapshots.ddl does not fail it). Read after the split, a DDL
        # logged between the two would pass for one that ran before it.
        planned_at = end_if_known(source, cursor)
        primary = chunks.table_key(cursor, schema, table)
        if primary is None:
            raise ConfigError(
                f"pipeline {pipeline_id}: table {schema}.{table} has no primary key "
                "and no unique key over NOT NULL columns, so it cannot be copied in "
                "chunks by key (its rows are written by their whole image, and a row copied "
                "twice would be there twice); give it a primary key, or copy it by hand"
                + (f" (key_columns {configured} do not make it keyed)" if configured else ""))
        key = chunks.table_key(cursor, schema, table, configured) if configured else primary
        assert key is not None
        split = chunks.split(cursor, key, chunk_size, where)
    fits(pipeline_id, schema, table, list(split.chunks), chunk_size)
    copy_id = f"{schema}.{table}@{int(time.time() * 1000)}"
    return TableCopy(copy_id, schema, table, where, split.key, list(split.chunks), split.rows,
                     planned_at=planned_at, apart=True)


def fits(pipeline_id: str, schema: str, table: str, found: list[chunks.Chunk],
         chunk_size: int) -> None:
    """ConfigError when the chunks' plan is too large for ZooKeeper to keep."""
    size = len(plans.encode(found))
    if size > plans.MOST_BYTES:
        raise ConfigError(
            f"pipeline {pipeline_id}: table {schema}.{table} splits into {len(found)} "
            f"chunks whose bounds take {size / 2**20:.1f} MB in ZooKeeper (compressed), more "
            f"than the {plans.MOST_BYTES / 2**20:g} MB a copy's plan may take; copy it in "
            f"larger chunks (snapshot_chunk_size, now {chunk_size}), or in parts "
            "(setl snapshot --where)")


def request_key(cursor: Any, schema: str, table: str, key_columns: tuple[str, ...]
         ) -> chunks.SplitKey | str:
    """The key a table's requests are read by, or why it has none to serve them by."""
    try:
        columns = door_key(cursor, schema, table, key_columns)
    except FreeDoorRequestError as exc:
        return str(exc)
    return chunks.table_key(cursor, schema, table, columns) or \
        f"table {schema}.{table} does not exist on the source"


def misfit(request: Request, key: chunks.SplitKey) -> str:
    """Why a request's key does not fit its table's ("" where it does)."""
    if len(key.columns) == len(request.key):
        return ""
    return (f"PK_DATA has {len(request.key)} value(s); the key of {request.schema}."
            f"{request.table} ({', '.join(key.columns)}) has {len(key.columns)}")
