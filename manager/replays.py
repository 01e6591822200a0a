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


def ahead(row: BinlogPosition, position: BinlogPosition, strict: bool = False) -> bool:
    """Whether a target's row is past ``position`` (or cannot be told from it: then a move
    must be asked for with --replay too). A position by GTID alone is ordered by its MariaDB
    state only when the source runs ``gtid_strict_mode`` (``strict``; a domain the row has
    and it lacks would be read from its start: ahead): without it a domain's numbers need
    not grow (a multi-source replica logs a later transaction with a lower one), and a
    state says nothing of which came first."""
    if not position.file and not strict:
        return True
    try:
        return gtid.compare(row, position) > 0
    except PositionConflictError:
        return True


def untold(position: BinlogPosition, strict: bool) -> bool:
    """Whether a row is taken for ahead of ``position`` only because setl cannot tell:
    a MariaDB GTID position alone, of a source without ``gtid_strict_mode`` (MySQL's GTID
    sets never compare by state: they need --replay as any position setl cannot compare)."""
    if position.file or strict:
        return False
    try:
        return bool(gtid.parse(position.gtid))
    except PositionConflictError:
        return False


def behind(pipeline_id: str, name: str, row: BinlogPosition, position: BinlogPosition,
           strict: bool) -> str:
    """Why a start at ``position`` is refused without --replay: target ``name``'s ``row`` is
    past it, or cannot be told from it (:func:`ahead`)."""
    if untold(position, strict):
        return (f"setl cannot tell whether {position} is before or after what target {name} "
                f"holds of pipeline {pipeline_id} (up to {row}): gtid_strict_mode is OFF on "
                "the source, so a domain's sequence numbers need not grow (a multi-source "
                "replica logs a later transaction with a lower one). Add --replay to start "
                f"there anyway (the target's position row follows: what it holds after "
                f"{position} is loaded again), or give the place by --file F --pos P, which "
                "setl can compare")
    return (f"target {name} holds pipeline {pipeline_id}'s transactions up to {row}; a start "
            f"at {position} would go on from there for it. Add --replay to load again from "
            f"{position} (its position row follows), or choose a later place")


def refuse_duplicates(catalog: Catalog, channel: Channel, pipeline: Pipeline,
                      position: BinlogPosition, targets: dict[str, Row],
                      request: manager_pb2.PositionsRequest, strict: bool = False) -> None:
    """Refuse a replay from ``position`` into ``targets`` (those whose rows it is, or
    may be, before) over keyless source tables or lake change logs unless the request says
    their target tables are ready (``keyless_duplicates``). A GTID position after a row (one
    that leaves out errant transactions) replays nothing, when that can be told
    (``strict``: :func:`ahead`)."""
    if request.keyless_duplicates:
        return
    source = catalog.source(pipeline.source)
    moved = sorted(name for name, row in targets.items() if ahead(row[0], position, strict))
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
