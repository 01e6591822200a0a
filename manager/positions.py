"""``setl position show|set|reset``: where a channel's pipelines stand, and a new place for a
stopped pipeline to start from.

A pipeline's truth is each target's position row (``retl.retl_position``); the ZooKeeper
cursor is a restart hint, and a (re)start resumes where the targets are (docs/architecture.md,
restarts). So a new start earlier than what a target holds is refused unless the user asks
for a replay, which moves that target's row with it: never a silent skip. A start later
than the targets skips the binlog in between, as asked. A replay writes a keyless table's
rows again beside the target's copies (they are written by their whole image, not over a
key), so one over keyless tables is refused until the user says the targets are ready for
it (``--keyless-duplicates``), naming them.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pymysql
from kazoo.client import KazooClient

from manager import gtidstart, heldrows, positionrows, replays
from manager.positionrows import Row
from shared import acks, gtid, positions, zk
from shared.catalog import Catalog, call
from shared.endpoint import connect
from shared.errors import (
    ConflictError,
    NotFoundError,
    PositionConflictError,
    PositionLostError,
    SourceError,
)
from shared.model import (
    BinlogPosition,
    Channel,
    ChannelStatus,
    DataSource,
    Pipeline,
    StartupMode,
)
from shared.rpc import manager_pb2
from shared.zk import ZkPaths

log = logging.getLogger("setl.manager.positions")


class Positions:
    def __init__(self, client: KazooClient, paths: ZkPaths, catalog: Catalog) -> None:
        self.client, self.paths, self.catalog = client, paths, catalog

    def handle(self, request: manager_pb2.PositionsRequest) -> manager_pb2.PositionsResponse:
        channel = self.catalog.channel(request.channel).channel
        chosen = [p for p in channel.pipelines if request.pipeline in ("", p.name)]
        if not chosen:
            raise NotFoundError(f"channel {channel.name} has no pipeline {request.pipeline!r} "
                                f"(it has {', '.join(p.name for p in channel.pipelines)})")
        notes: list[str] = []
        if (request.action or "show") == "set":
            if not request.pipeline and len(channel.pipelines) > 1:
                raise ConflictError(f"channel {channel.name} has several pipelines: name one "
                                    f"(setl position set {channel.name}/PIPELINE …)")
            notes = self._set(channel, chosen[0], request)
        elif request.action == "reset":
            for pipeline in chosen:
                if channel.two_way and pipeline.params.startup is not StartupMode.LATEST:
                    raise ConflictError(replays.two_way_replay(
                        channel, pipeline, "setl position reset (the next start loads again "
                        "from the definition's start:)"))
                self._stopped(channel, pipeline, "reset")
            notes = [note for pipeline in chosen
                     for note in self._reset_checked(channel, pipeline, request)]
            for pipeline in chosen:
                self._reset(channel, pipeline)
        elif request.action not in ("", "show"):
            raise ConflictError(f"unknown position action {request.action!r}: show, set or "
                                "reset")
        return manager_pb2.PositionsResponse(
            pipelines=[self._show(channel, pipeline) for pipeline in chosen], notes=notes)

    # -- show -------------------------------------------------------------------------------
    def _show(self, channel: Channel, pipeline: Pipeline) -> manager_pb2.PipelinePositions:
        pipeline_id = channel.pipeline_id(pipeline)
        found = manager_pb2.PipelinePositions(pipeline_id=pipeline_id, behind_bytes=-1)
        cursor = call("read a pipeline cursor", positions.load, self.client,
                      self.paths.cursor(pipeline_id))
        if cursor is not None:
            _fill(found.cursor, cursor.position)
            found.process_id = cursor.process_id
        source = self.catalog.source(pipeline.source)
        end, files = BinlogPosition(), []
        try:
            end, files = _binlog(source)
            _fill(found.source_end, end)
            if cursor is not None:
                found.behind_bytes = _bytes_between(files, cursor.position, end)
        except SourceError as exc:
            found.source_error = str(exc)
        for name in _targets(pipeline):
            target = manager_pb2.TargetPosition(target=name)
            try:
                row = self._row(self.catalog.source(name), pipeline_id)
            except SourceError as exc:
                target.error = str(exc)
            else:
                if row is not None:
                    _fill(target.position, row[0])
                    target.process_id, target.owner_epoch = row[1], row[2]
            found.targets.append(target)
        rows = [t.position for t in found.targets if t.position.file]
        if rows and all(self.catalog.source(t.target).type == "subscription"
                        for t in found.targets) and found.source_end.file:
            # a subscription publishes no cursor: what its reader acknowledged is where it is
            found.cursor.CopyFrom(rows[0])
            found.behind_bytes = _bytes_between(files, BinlogPosition(rows[0].file,
                                                                      rows[0].pos), end)
        return found

    # -- set --------------------------------------------------------------------------------
    def _set(self, channel: Channel, pipeline: Pipeline,
             request: manager_pb2.PositionsRequest) -> list[str]:
        """Move a stopped pipeline's start (refused as the module says); the notes say what
        the move skips."""
        pipeline_id = self._stopped(channel, pipeline, "set")
        source = self.catalog.source(pipeline.source)
        to, strict = request.to, False
        if request.latest:
            position = positions.current_position(source)
        elif to.file and to.pos > 0:  # of the source's server (its primary): its GTID there
            position = positions.position_at(source, to.file, int(to.pos))
        elif to.gtid and not to.file:
            position, strict = gtidstart.checked(source, to.gtid.strip(), channel.name)
        else:
            raise ConflictError("say where: --file F --pos P, --gtid G or --latest")
        if position.file:
            _, files = _binlog(source)
            if position.file not in dict(files):
                raise PositionLostError(
                    f"source {source.name} has no binlog file {position.file} (it keeps "
                    f"{files[0][0] if files else 'none'} to {files[-1][0] if files else '-'})")
        rows, held = self._rows(pipeline, pipeline_id)
        ahead = {name: row for name, row in rows.items()
                 if row is not None and replays.ahead(row[0], position, strict)}
        # first: a subscription's reader may not have been sent what a move skips (whatever
        # --replay says; the refusals below tell of the targets, not of it)
        self._unacked_skip(channel, pipeline, rows, position, strict)
        if ahead and channel.two_way and not request.latest:
            raise ConflictError(replays.two_way_replay(
                channel, pipeline, f"a start at {position} (target {next(iter(ahead))} holds "
                "its transactions past it: a replay)"))
        if ahead and not request.replay:
            name, row = next(iter(ahead.items()))
            raise ConflictError(replays.behind(pipeline_id, name, row[0], position, strict))
        lakes = [name for name in ahead if self.catalog.source(name).type == "delta"]
        if lakes and position.file:  # (refused before any target moves, and before advice
            raise ConflictError(positionrows.lake_moved_back(lakes[0]))  # to delete rows)
        if ahead and not request.latest:  # (the source's end now replays nothing it wrote)
            replays.refuse_duplicates(self.catalog, channel, pipeline, position, ahead, request,
                                      strict)
        old = call("read a pipeline cursor", positions.load, self.client,
                   self.paths.cursor(pipeline_id))
        run = old.run if old is not None and old.run else uuid.uuid4().hex
        process_id = max([old.process_id if old else 0,
                          *(row[1] for row in rows.values() if row is not None)])
        # a start by GTID alone moves every row (blanked: a resume defers to the rows that
        # have a file), a skip forward too; a file/pos start only those it replays
        moved = [name for name, row in rows.items()
                 if row is not None and (name in ahead or not position.file)]
        # first (a failure between leaves no blank row unkept): what each target holds then,
        # the place for a replay, its row's for a skip (it loaded nothing past that)
        self._keep_held(pipeline_id, held, {name: position if name in ahead else row[0]
                                            for name, row in rows.items()
                                            if name in moved and row is not None},
                        blanked=not position.file)
        for name, row in rows.items():
            if row is not None:
                self._move(self.catalog.source(name), pipeline_id, run,
                           position if name in moved else None)
        call("delete a pipeline's last run's figures", zk.remove, self.client,
             self.paths.stats(pipeline_id))  # (they showed where it was, not where it begins)
        cursor = positions.Cursor(position, process_id, run=run)
        path = self.paths.cursor(pipeline_id)
        if call("look for a cursor", self.client.exists, path):
            call("set a pipeline cursor", self.client.set, path, cursor.to_json())
        else:
            call("set a pipeline cursor", self.client.create, path, cursor.to_json(),
                 makepath=True)
        log.info("event=position_set pipeline=%s position=%s replay=%s targets_moved=%s",
                 pipeline_id, position, request.replay, ",".join(moved) or "-")
        return [f"pipeline {pipeline_id}: its next start begins at {position}: target "
                f"{name}'s transactions after {row[0]} up to there are skipped"
                for name, row in sorted(rows.items())
                if row is not None and name not in ahead and _past(position, row[0])
                and _told(position, row[0])]


    def _unacked_skip(self, channel: Channel, pipeline: Pipeline, rows: dict[str, Row | None],
                      position: BinlogPosition, strict: bool) -> None:
        """Refuse to move a subscription past batches its reader had not acknowledged when
        its pipeline paused (stopped or lost before it did: ``pipelines/{pid}/unacked``,
        written before the wait, :class:`shared.acks.Unacked`): a move past the failed
        statement, what the pause says to do, would skip them, and its reader never gets
        them — with ``--replay`` too (which ``setl subscribe --from`` sends: a move forward
        with it skips them as much). The record holds, whatever runs and sets came and went,
        until the acknowledged position reaches their end (a move back sends them again,
        and the reader acknowledges them then) or ``setl position reset`` deletes it."""
        names = [name for name in rows if self.catalog.source(name).type == "subscription"]
        if not names:
            return
        pipeline_id = channel.pipeline_id(pipeline)
        marker = call("read a subscription's unacknowledged batches", acks.read_unacked,
                      self.client, self.paths.unacked(pipeline_id))
        if marker is None or not (marker.until.file or marker.until.gtid):
            return
        row = rows[names[0]]
        acked = row[0] if row is not None else marker.start
        told = _told(marker.until, row[0]) if row is not None else True
        path = self.paths.unacked(pipeline_id)
        if row is not None and told and not _past(marker.until, row[0]):
            # the reader acknowledged them since: gone (a move back would make it hold again)
            call("forget a subscription's acknowledged batches", acks.clear_unacked,
                 self.client, path, marker)
            return
        untold = replays.untold(position, strict)
        for before in (acked, marker.start):  # (a move back, or to where it is: no skip)
            if (before.file or before.gtid) and not untold and not _past(position, before):
                return
        apart = "" if told else (
            f" (that end, {marker.until}, and the acknowledged position cannot be compared: "
            "positions of two servers without comparable GTID states, after a switch — if "
            "the reader has acknowledged them, reset the position and set it again, as "
            "below)")
        replay = not _told(position, acked) or untold  # (to the place the reset keeps too)
        if replay:
            apart += (f" ({position} cannot be compared with {acked}"
                      f"{': gtid_strict_mode is OFF on the source' if untold else ''}: give "
                      "the position by file and offset)")
        raise ConflictError(
            f"subscription {names[0]} paused while its reader had not acknowledged "
            f"{marker.batches} batch(es) handed to it before the failed one, from its "
            f"position {row[0] if row else '(nothing acknowledged yet)'} to {marker.until}"
            f"{apart}: a start at {position} skips them, and the reader never gets them. "
            f"Start the channel again first (setl channel start {channel.name}): the reader "
            "gets them, and the pipeline pauses at the failed statement again once it has "
            "acknowledged them, its position then right before it; then move past it. To "
            f"skip them anyway: setl position reset {channel.name}/{pipeline.name} (it "
            f"deletes this record; it keeps the acknowledged position), then this set again"
            f"{self._replay_flags(pipeline, names) if replay else ''}")

    def _replay_flags(self, pipeline: Pipeline, names: list[str]) -> str:
        """What a set that setl takes for a replay into ``names`` must add."""
        keyless = replays.keyless_taken(pipeline, self.catalog.source(pipeline.source), names)
        return " with --replay" + (f" --keyless-duplicates (it takes keyless tables: "
                                   f"{', '.join(keyless[:5])}{', …' if keyless[5:] else ''})"
                                   if keyless else "")

    def _stopped(self, channel: Channel, pipeline: Pipeline, action: str) -> str:
        """The pipeline's id; raises unless its channel is stopped and no runner is left."""
        pipeline_id = channel.pipeline_id(pipeline)
        record = self.catalog.channel(channel.name)
        if record.status is not ChannelStatus.STOP or \
                call("look for a runner", self.client.exists, self.paths.mainstem(pipeline_id)):
            raise ConflictError(f"pipeline {pipeline_id} is not stopped: run setl channel stop "
                                f"{channel.name} --wait first, then {action} its position")
        return pipeline_id

    def _rows(self, pipeline: Pipeline, pipeline_id: str
              ) -> tuple[dict[str, Row | None], dict[str, BinlogPosition]]:
        """Each target's position row, a row a reset blanked standing at the place the reset
        kept (:mod:`manager.heldrows`: the target holds those transactions still); and what
        is kept."""
        held = heldrows.read(self.client, self.paths.held(pipeline_id))
        rows = {}
        for name in _targets(pipeline):
            row = self._row(self.catalog.source(name), pipeline_id)
            rows[name] = (held[name], 0, 0) if row is None and name in held else row
        return rows, held

    def _keep_held(self, pipeline_id: str, held: dict[str, BinlogPosition],
                   places: dict[str, BinlogPosition], blanked: bool) -> None:
        """Keep ``places``, what targets hold once moved, for those whose row is blank: kept
        for them already (in ``held``, a reset's), or all when the move blanks the rows
        (``blanked``: a GTID start, :func:`manager.positionrows.move_row`)."""
        kept = {name: at for name, at in places.items() if name in held or blanked}
        if kept:
            heldrows.write(self.client, self.paths.held(pipeline_id), {**held, **kept})

    def _row(self, target: DataSource, pipeline_id: str) -> Row | None:
        """A target's position row; a subscription's is what its reader acknowledged."""
        if target.type != "subscription":
            return positionrows.read_row(target, pipeline_id)
        found = call("read a subscription's position", acks.read, self.client,
                     self.paths.acked(pipeline_id))
        if found is None or not found[0].position.file:
            return None
        return found[0].position, found[0].process_id, found[0].epoch

    def _move(self, target: DataSource, pipeline_id: str, run: str,
              to: BinlogPosition | None) -> None:
        if target.type != "subscription":
            positionrows.move_row(target, pipeline_id, run, to)
            return
        call("move a subscription's position", acks.move, self.client,
             self.paths.acked(pipeline_id), run, to)

    # -- reset ------------------------------------------------------------------------------
    def _reset_checked(self, channel: Channel, pipeline: Pipeline,
                       request: manager_pb2.PositionsRequest) -> list[str]:
        """Refuse a reset whose next start (the definition's ``start:``) is earlier than a
        target holds unless the request asks for the replay (and, over keyless tables,
        says so); the notes say what the reset replays or skips."""
        pipeline_id = channel.pipeline_id(pipeline)
        rows = {name: row for name, row in self._rows(pipeline, pipeline_id)[0].items()
                if row is not None}
        params = pipeline.params
        start = params.start_position
        if params.startup is StartupMode.SNAPSHOT or not rows:
            return []
        if params.startup is StartupMode.LATEST or start is None:
            end = positions.current_position(self.catalog.source(pipeline.source))
            return [f"pipeline {pipeline_id}: its next start begins at the source's end then "
                    f"(start: latest): target {name}'s transactions after {row[0]} are skipped "
                    f"(to {end} now, and whatever is written until the channel starts)"
                    for name, row in sorted(rows.items())]
        ahead = {name: row for name, row in rows.items() if replays.ahead(row[0], start)}
        if ahead and not request.replay:
            name, row = next(iter(sorted(ahead.items())))
            raise ConflictError(
                f"target {name} holds pipeline {pipeline_id}'s transactions up to {row[0]}; a "
                f"reset makes the next start begin again at its start: {start} and load them "
                "again. Add --replay to reset it (the target's position row goes too), or "
                f"move it with setl position set {channel.name}/{pipeline.name} instead")
        if ahead:
            replays.refuse_duplicates(self.catalog, channel, pipeline, start, ahead, request)
        return [f"pipeline {pipeline_id}: its next start loads again from {start} what "
                f"target {name} holds up to {row[0]} (a replay)"
                for name, row in sorted(ahead.items())]

    def _reset(self, channel: Channel, pipeline: Pipeline) -> None:
        """Forget where the pipeline stands: its position rows on the targets, its cursor, its
        snapshot progress and its last run's figures go, so the next start begins again at
        the definition's ``start:`` and loads everything from there (a replay, asked for).
        Where each target was is kept (:mod:`manager.heldrows`): a later move back over
        what it holds is a replay still. A reset that is one keeps its ``start:``."""
        pipeline_id = channel.pipeline_id(pipeline)
        params = pipeline.params
        start = params.start_position if params.startup not in (
            StartupMode.LATEST, StartupMode.SNAPSHOT) else None
        found, held = self._rows(pipeline, pipeline_id)
        rows = {name: row for name, row in found.items() if row is not None}
        held.update({name: start if start is not None and replays.ahead(row[0], start)
                     else row[0] for name, row in rows.items()})
        # first: kept before any row is blanked (a failure between leaves none unkept)
        heldrows.write(self.client, self.paths.held(pipeline_id), held)
        removed = []
        for name, row in rows.items():
            target = self.catalog.source(name)
            if self._row(target, pipeline_id) is not None:
                self._move(target, pipeline_id, "", BinlogPosition())
                removed.append(f"{name}@{row[0]}")
        for path in (self.paths.cursor(pipeline_id), self.paths.snapshot(pipeline_id),
                     self.paths.snapshot_plans(pipeline_id), self.paths.stats(pipeline_id),
                     self.paths.unacked(pipeline_id)):
            call("delete a pipeline's state", zk.remove, self.client, path)
        log.info("event=position_reset pipeline=%s start=%s target_rows_deleted=%s held=%s",
                 pipeline_id, params.startup.value.lower(), ",".join(removed) or "-",
                 ",".join(f"{name}@{at}" for name, at in sorted(held.items())) or "-")


def on_targets(catalog: Catalog, channel: Channel, purge: bool) -> list[str]:
    """The position rows a channel's pipelines have on their targets (deleted with
    ``purge``), as lines: a channel made again under the same name finds them (see
    node.cursor.resume), so a delete says what it leaves."""
    lines = []
    for pipeline in channel.pipelines:
        pipeline_id = channel.pipeline_id(pipeline)
        for name in _targets(pipeline):
            target = catalog.source(name)
            if target.type == "subscription":  # its position went with the pipeline's state
                continue
            row = positionrows.read_row(target, pipeline_id)
            if row is None:
                continue
            if purge:
                positionrows.move_row(target, pipeline_id, "", BinlogPosition(), purge=True)
            lines.append(f"target {name}: position row of {pipeline_id} at {row[0]}"
                         + (" deleted" if purge else " kept"))
    return lines


def _fill(message: Any, position: BinlogPosition) -> None:
    message.file, message.pos, message.gtid = position.file, position.pos, position.gtid


def _targets(pipeline: Pipeline) -> list[str]:
    return sorted({pair.target.datasource for pair in pipeline.pairs})


def _binlog(source: DataSource) -> tuple[BinlogPosition, list[tuple[str, int]]]:
    """The source's end now and its binlog files with their sizes."""
    end = positions.current_position(source)
    try:
        with connect(source) as conn, conn.cursor() as cursor:
            cursor.execute("SHOW BINARY LOGS")
            files = [(str(row[0]), int(row[1])) for row in cursor.fetchall()]
    except pymysql.MySQLError as exc:
        raise SourceError(f"source {source.name}: cannot list its binlogs: "
                          f"{exc.args[-1] if exc.args else exc}") from None
    return end, files


def _bytes_between(files: list[tuple[str, int]], start: BinlogPosition,
                   end: BinlogPosition) -> int:
    names = [name for name, _ in files]
    if start.file not in names or end.file not in names:
        return -1
    first, last = names.index(start.file), names.index(end.file)
    between = sum(size for _, size in files[first:last])
    return max(between - start.pos + end.pos, 0)


def _past(position: BinlogPosition, other: BinlogPosition) -> bool:
    """Whether ``position`` is after ``other`` (or cannot be told from it: taken as after,
    so that a move that may skip what a reader was not sent is refused). A position by GTID
    alone compares by its state (:func:`shared.gtid.compare`)."""
    try:
        return gtid.compare(position, other) > 0
    except PositionConflictError:
        return True


def _told(position: BinlogPosition, other: BinlogPosition) -> bool:
    """Whether the two positions can be compared."""
    try:
        gtid.compare(position, other)
    except PositionConflictError:
        return False
    return True
