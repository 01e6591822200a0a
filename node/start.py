"""How a pipeline's runner begins: its cursor (the hint), the claim of its targets (fenced
before they are read), and the checks that refuse a start that would skip or repeat rows
or that the source's tables cannot take. Where it resumes is :func:`node.cursor.resume`."""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable

import pymysql

from node.cursor import Cursor, CursorStore, Resume
from node.ddlpauses import sequence_problem, versioned_problem
from node.extract.etl import CompiledPipeline
from node.snapshot.state import SnapshotStore
from node.target.base import TargetLoader
from shared import gtid, positions, tablekeys
from shared.columnclash import clash_problems, read_columns
from shared.endpoint import connect
from shared.errors import ConfigError, FencedError, PositionConflictError, SourceError
from shared.identifiers import lowered
from shared.model import BinlogPosition, DataSource, Pipeline, StartupMode
from shared.pairchecks import pairs_problems, two_way_pair_problems
from shared.patterns import SYSTEM_SCHEMAS, PatternKind

log = logging.getLogger("setl.node.start")


def first_or_stored(cursors: CursorStore, snapshots: SnapshotStore, pipeline: Pipeline,
                    source: DataSource, compiled: CompiledPipeline) -> Cursor:
    """The stored cursor. The manager fixes a pipeline's first one when the user starts
    the channel (``start: latest`` is that moment, not when a runner gets going); a
    pipeline started otherwise takes its start now, stored at once so that a failure of
    the first batches rewinds to it instead of to a later 'latest'. On a first start a
    snapshot's tables are asked for."""
    stored = cursors.load()
    if stored is None:  # the manager's fix of the start may come meanwhile: it stands
        stored = cursors.first(positions.first_cursor(pipeline, source))
    if not stored.first:
        return stored
    first = stored
    if pipeline.params.startup is StartupMode.SNAPSHOT:  # every paired table copied
        for schema, table in paired_tables(source, compiled):  # in the stream
            snapshots.ask(schema, table, version=compiled.version)
    first = dataclasses.replace(first, first=False)
    cursors.save(first)
    return first


def claim(loader: TargetLoader, owns: Callable[[], bool], epoch: int,
          pipeline_id: str) -> dict[str, Cursor | None]:
    """Fence the targets and read where they are.

    A newer epoch on a target (of this life of the pipeline) while this node still holds
    the pipeline's mainstem is no newer owner: ZooKeeper's history went back (restored from
    a backup, or rebuilt), its czxids count again from lower numbers. When no connection
    registered under that epoch is still there, nobody writes with it: this owner takes the
    next epoch above it and goes on (a writer of the old epoch that comes back is fenced).
    When one is there, another setl — one on another ZooKeeper — writes the pipeline: that
    pauses with what to do, never two writers."""
    for _ in range(len(loader.targets) + 2):
        try:
            return loader.claim()
        except FencedError as exc:
            if not owns():
                raise
            live = loader.take_over(exc.target, exc.found)
            if live is None:
                log.warning("event=epoch_adopted pipeline=%s target=%s found=%d zk_epoch=%d "
                            "epoch=%d reason=\"ZooKeeper's history went back; no writer of "
                            "the newer epoch is connected\"", pipeline_id, exc.target,
                            exc.found, epoch, exc.found + 1)
            elif live:
                raise PositionConflictError(
                    f"{exc.args[0].split(';')[0]}, yet this node holds the pipeline in "
                    f"ZooKeeper (epoch {epoch}), and connections {live} of that owner are "
                    "still connected: another setl (one on another ZooKeeper?) runs this "
                    "pipeline. Stop it; once they are gone, start the channel again") from None
    raise PositionConflictError(f"pipeline {pipeline_id}: its targets' owner epochs kept "
                                "moving while this node claimed them; start it again")


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
                    pipeline: Pipeline, lake: bool = False,
                    case: int | None = None, subscription: bool = False) -> CompiledPipeline:
    """The compiled pipeline with the unique keys of its tables that have no primary key;
    a table nothing keys refuses the start, and so do key_columns a ``lake`` cannot merge
    by (:func:`shared.tablekeys.lake_key_problem`), pairs that cannot run beside each
    other (:func:`shared.pairchecks.pairs_problems`), on a two-way channel a keyless table
    or a pair that writes part of a row (:func:`two_way_pair_problems`), and on a source
    that folds names a pair written in capitals (:func:`cased_pair_problems`), and a pair
    writing a target column twice (:func:`shared.columnclash.clash_problems`). ``case``:
    the source's ``lower_case_table_names``, when already known (else read); with 2 its
    tables' names are read too, for the DDL's names typed in another case. A subscription's
    columns are not checked for case (its reader gets each by its own name)."""
    try:
        keys = tablekeys.read_keys(source)
        # just after the keys were read: a DDL logged past it ran after the read (an ALTER
        # holds its table's metadata lock until it is logged; the read waits for it)
        read_at = positions.end_if_known(source)
        nullable = tablekeys.read_nullable(source, [pipeline])
        indexes = tablekeys.read_indexes(source, [pipeline])
        case = name_case(source) if case is None else case
        blind = stored_names(source) if case == 2 else None
        versioned = versioned_pair_problems(compiled, source)
        columns = None if subscription else read_columns(source, [pipeline])
    except pymysql.MySQLError as exc:
        raise SourceError(f"pipeline {compiled.pipeline_id}: cannot read the tables of "
                          f"{source.name}: {exc.args[-1] if exc.args else exc}") from None
    unique, problems = tablekeys.pipeline_keys(pipeline, keys, nullable, lake,
                                               compiled.two_way, indexes)
    names = [f"pair {pair.source} → {pair.target}" for pair in pipeline.pairs]
    problems += [f"pipeline {pipeline.name} {names[at]}: {why}"  # (a definition written
                 for at, why in pairs_problems(pipeline.pairs, names)]  # straight into ZK,
    if compiled.two_way:  # or by an older setl, was never checked as apply checks now)
        problems += two_way_pair_problems(pipeline)
    if case == 1:
        problems += cased_pair_problems(pipeline, source)
    problems += versioned
    if columns is not None:  # (apply checks it too, where it reaches the source)
        problems += clash_problems(pipeline, columns, keys)
    if problems:
        raise ConfigError("; ".join(problems))
    return dataclasses.replace(compiled, table_keys=unique, keys_read_at=read_at,
                               fold_names=case == 1, blind_names=blind)


def versioned_pair_problems(compiled: CompiledPipeline, source: DataSource) -> list[str]:
    """MariaDB's system-versioned tables the pairs take: their binlog is no picture of their
    current rows (a DELETE is logged as an UPDATE of ``row_end``, each UPDATE adds the old
    row as an INSERT, the key holds ``row_end``), so a target would keep deleted rows as
    current ones and gain every old version. And the sequences they take (a catch-all
    pattern's): a sequence's row events would find no table on the target."""
    with connect(source, connect_timeout=5) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema."
                       "TABLES WHERE TABLE_TYPE IN ('SYSTEM VERSIONED', 'SEQUENCE') AND "
                       f"TABLE_SCHEMA NOT IN ({', '.join(['%s'] * len(SYSTEM_SCHEMAS))}) "
                       "ORDER BY 1, 2", SYSTEM_SCHEMAS)
        found = [(str(schema), str(table), str(kind))
                 for schema, table, kind in cursor.fetchall()]
    wanted = [(f"{schema}.{table}", kind) for schema, table, kind in found
              if compiled.wants_schema(schema) and compiled.wants(schema, table)]
    return [f"pipeline {compiled.pipeline_id}: {sequence_problem(name)}. Narrow the "
            "pipeline's pairs so that none takes it" if kind == "SEQUENCE" else
            f"pipeline {compiled.pipeline_id}: {versioned_problem(name)}. "
            "Leave it out of the pipeline's pairs, or drop its versioning on the source "
            "(ALTER TABLE … DROP SYSTEM VERSIONING) and copy it again"
            for name, kind in wanted]


def cased_pair_problems(pipeline: Pipeline, source: DataSource) -> list[str]:
    """Pairs whose source names hold a capital letter, on a source that folds names: its
    binlog and information_schema name every table in lower case, so such a pair would
    take nothing, silently (a regular expression's escapes, ``\\S``, and classes,
    ``[A-Za-z]``, are not capitals)."""
    found = []
    for pair in pipeline.pairs:
        for pattern in (pair.source.namespace, pair.source.table):
            text = pattern.text
            if pattern.kind is PatternKind.WILDCARD:
                if "(?i" in text:
                    continue  # the expression ignores case itself
                text = re.sub(r"\\.|\[(?:\\.|[^\]])*\]", "", text)  # (classes: [A-Z])
            if text != text.lower():
                found.append(
                    f"pipeline {pipeline.name} pair {pair.source} → {pair.target}: source "
                    f"{source.name} stores its table and database names in lower case "
                    f"(lower_case_table_names=1), so its binlog never names {pattern.text!r} "
                    f"and the pair would replicate nothing; write it {pattern.text.lower()!r}")
                break
    return found


def name_case(source: DataSource) -> int:
    """The source's ``lower_case_table_names``. With 1 it stores table and database names
    lower-cased: its table maps name them so, and its DDL's names, as typed, are matched
    lower-cased too. With 2 names are stored as created (and so are in table maps), only
    compared without case: folding them would lose the rows of a pair written as created,
    so a DDL's names are matched to the stored ones (:func:`stored_names`)."""
    with connect(source) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT @@lower_case_table_names")
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def stored_names(source: DataSource) -> dict[tuple[str, str], tuple[str, str]]:
    """The source's tables (and databases, under ``(name, "")``) by their names lowered,
    as a source with ``lower_case_table_names = 2`` compares them: a DDL typed
    ``TRUNCATE TABLE ORDERS`` is of ``Orders``."""
    with connect(source) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE "
                       f"TABLE_SCHEMA NOT IN ({', '.join(['%s'] * len(SYSTEM_SCHEMAS))})",
                       SYSTEM_SCHEMAS)
        names = [(str(schema), str(table)) for schema, table in cursor.fetchall()]
    found = {(lowered(schema), ""): (schema, "") for schema, _ in names}
    found.update({(lowered(schema), lowered(table)): (schema, table)
                  for schema, table in names})
    return found


def keys_read(compiled: CompiledPipeline, source: DataSource, pipeline: Pipeline,
              lake: bool = False, subscription: bool = False) -> CompiledPipeline:
    """After a DDL: the unique keys of the tables without a primary key (and the names of a
    source that compares them without case) read again, not yet put in place (what
    :func:`keys_again` puts there). The source ran the DDL before it logged it, so a read
    begun any time after Select read it sees it, like a read after its load (Select begins
    it before: :mod:`node.selectloop`); ``keys_read_at`` says where the binlog ended then
    (:func:`node.ddlpauses.keyed_before`). ``compiled`` is only read."""
    case = 2 if compiled.blind_names is not None else int(compiled.fold_names)
    return with_table_keys(compiled, source, pipeline, lake, case, subscription)


def keys_again(compiled: CompiledPipeline, source: DataSource, pipeline: Pipeline,
               lake: bool = False, subscription: bool = False,
               fresh: CompiledPipeline | None = None) -> None:
    """After a DDL is loaded: the unique keys of the tables without a primary key are read
    again (``fresh``: already read, by :func:`keys_read`), put in place (an ALTER may have
    dropped one, or let its columns take NULL: rows with NULL there would be merged as one
    key); a table nothing keys now stops the pipeline."""
    if fresh is None:
        fresh = keys_read(compiled, source, pipeline, lake, subscription)
    compiled.rekey(fresh.table_keys, fresh.blind_names, fresh.keys_read_at)


def paired_tables(source: DataSource, compiled: CompiledPipeline) -> list[tuple[str, str]]:
    """The source's tables some pair of the pipeline takes (a snapshot of all of them)."""
    with connect(source) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE "
                       "TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN "
                       f"({', '.join(['%s'] * len(SYSTEM_SCHEMAS))}) "
                       "ORDER BY TABLE_SCHEMA, TABLE_NAME", SYSTEM_SCHEMAS)
        names = [(str(schema), str(table)) for schema, table in cursor.fetchall()]
    return [(schema, table) for schema, table in names
            if compiled.wants_schema(schema) and compiled.wants(schema, table)]

