"""What a move back over what a pipeline's targets hold would load again (``setl position set
--replay``, ``reset``), and the replays refused: on a two-way channel always, over keyless
tables and lake change logs until the user says the targets are ready
(``--keyless-duplicates``), naming the tables (:mod:`manager.positions` asks).
"""

from __future__ import annotations

from collections.abc import Collection

import pymysql

from manager.positionrows import Row
from shared import gtid, tablekeys
from shared.catalog import Catalog
from shared.errors import ConflictError, PositionConflictError, SetlError, SourceError
from shared.model import BinlogPosition, Channel, DataSource, Pipeline, pairs_taking
from shared.rpc import manager_pb2


def ahead(row: BinlogPosition, position: BinlogPosition) -> bool:
    """Whether a target's row is past ``position`` (or cannot be told from it: then a move
    must be asked for with --replay too). A position by GTID alone compares by its MariaDB
    state (a domain the row has and it lacks would be read from its start: ahead)."""
    try:
        return gtid.compare(row, position) > 0
    except PositionConflictError:
        return True


def loads_again(row: BinlogPosition, position: BinlogPosition) -> bool:
    """Whether a start at ``position`` loads again what a target's row says it holds (or
    may: the two cannot be compared)."""
    try:
        return gtid.compare(row, position) > 0
    except PositionConflictError:
        return True


def refuse_duplicates(catalog: Catalog, channel: Channel, pipeline: Pipeline,
                      position: BinlogPosition, targets: dict[str, Row],
                      request: manager_pb2.PositionsRequest) -> None:
    """Refuse a replay from ``position`` into ``targets`` (those whose rows it is, or
    may be, before) over keyless source tables or lake change logs unless the request says
    their target tables are ready (``keyless_duplicates``). A GTID position after a row (one
    that leaves out errant transactions) replays nothing."""
    if request.keyless_duplicates:
        return
    source = catalog.source(pipeline.source)
    moved = sorted(name for name, row in targets.items() if loads_again(row[0], position))
    lakes = [name for name in moved if catalog.source(name).type == "delta"]
    logs = change_logs(pipeline, lakes)
    if logs:
        raise ConflictError(
            f"pipeline {channel.pipeline_id(pipeline)}: a replay from {position} into lake "
            f"{', '.join(lakes)} appends again to its change logs every change they hold "
            f"since then (pairs {', '.join(logs)}, mode: changelog): each would be there "
            "twice, with the same _setl_txn and _setl_seq. Delete from those tables the "
            f"changes of the transactions after {position} first (or have their readers "
            "drop repeats by _setl_txn and _setl_seq), then run the same command with "
            "--keyless-duplicates; or choose a later place")
    replayed = [name for name in moved if name not in lakes]
    tables = keyless_taken(pipeline, source, replayed)
    if not tables:
        return
    shown = ", ".join(tables[:20]) + (f" and {len(tables) - 20} more"
                                      if len(tables) > 20 else "")
    raise ConflictError(
        f"pipeline {channel.pipeline_id(pipeline)}: a replay from {position} into target "
        f"{', '.join(replayed)} takes keyless tables: {shown}. They have no "
        "primary key and no unique key over NOT NULL columns, so their rows are written "
        "by their whole image, beside the copies the target holds, not over them: every "
        "row written since then would be there twice. Make each of those target tables "
        f"hold what its source table held at {position} first (empty it if the source's "
        "was empty then, else copy it by hand), then run the same command with "
        "--keyless-duplicates; or choose a later place")


def two_way_replay(channel: Channel, pipeline: Pipeline, what: str) -> str:
    """Why a two-way pipeline loads nothing again, and what to do instead."""
    pipeline_id = channel.pipeline_id(pipeline)
    others = [p.name for p in channel.pipelines]
    return (f"pipeline {pipeline_id} is on a two-way channel: {what} is refused. A replay "
            "writes its source's older changes again over rows the other side changed later "
            "(the first pipeline overwrites whatever it finds), while those later changes "
            "reach its source's binlog as echoes of the other pipeline and are skipped, so "
            "the two sides would differ for good. Instead: keep both sides from taking "
            "writes, make them "
            "equal (a one-way channel from the side you trust, with start: snapshot or "
            "verify --repair), then move both pipelines to their sources' current end "
            f"(setl position set {channel.name}/{others[0]} --latest, and "
            f"{channel.name}/{others[-1]}) and start the channel again")


def keyless_taken(pipeline: Pipeline, source: DataSource, targets: Collection[str]
                  ) -> list[str]:
    """The source's keyless tables (``schema.table``) that the pipeline's pairs write into
    ``targets`` (see shared/tablekeys.py: no primary key, no unique key over NOT NULL
    columns)."""
    if not targets:
        return []
    try:
        keys = tablekeys.read_keys(source)
    except (SetlError, pymysql.MySQLError) as exc:
        raise SourceError(f"source {source.name}: cannot read which of its tables have a "
                          f"key (a replay needs to know): "
                          f"{exc.args[-1] if exc.args else exc}") from None
    return [f"{schema}.{table}" for (schema, table), columns in sorted(keys.items())
            if columns is None and any(
                pair.target.datasource in targets
                for pair in pairs_taking(pipeline.pairs, schema, table, lambda pair: pair))]


def change_logs(pipeline: Pipeline, lakes: Collection[str]) -> list[str]:
    """The source tables (as the pairs name them) whose pairs append to change logs in the
    lake targets ``lakes``: a replay writes their changes again beside the first ones."""
    return sorted({f"{pair.source.namespace.text}.{pair.source.table.text}"
                   for pair in pipeline.pairs
                   if pair.target.datasource in lakes and pair.mode == "changelog"})
