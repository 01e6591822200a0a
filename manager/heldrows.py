"""What each target held when ``setl position reset`` blanked its position row
(``pipelines/{pid}/held`` in ZooKeeper, JSON: target → position).

A reset blanks the rows so that the next start begins at the definition's ``start:``
instead of resuming where the targets are; but the targets still hold the rows they
loaded. A later ``position set`` (or reset) that compared only with the blanked rows would
find nothing ahead of an earlier place and load those transactions again without being
told (a keyless table's rows twice). So the reset keeps each target's place here, and a
blank row stands for it (:meth:`manager.positions.Positions._rows`): a replay from before
it is refused as it was before the reset. Where the reset itself was a replay asked for
(``start:`` earlier than the row, ``--replay``), the place kept is that ``start:``. The
channel's start after a reset (no cursor yet) refuses a ``start:`` earlier than a place
kept likewise (:func:`refuse_earlier`: the definition may have been edited since).
"""

from __future__ import annotations

import json

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from shared import gtid
from shared.catalog import call
from shared.errors import ConflictError, PositionConflictError
from shared.model import BinlogPosition, Channel, StartupMode
from shared.zk import ZkPaths, put, remove


def read(client: KazooClient, path: str) -> dict[str, BinlogPosition]:
    """The places kept at ``path`` (none: no reset kept any)."""
    try:
        data, _ = call("read what a reset kept of the targets", client.get, path)
    except NoNodeError:
        return {}
    raw = json.loads(data) if data else {}
    return {name: BinlogPosition(str(at[0]), int(at[1]), str(at[2]), str(at[3]))
            for name, at in raw.items()}


def write(client: KazooClient, path: str, held: dict[str, BinlogPosition]) -> None:
    """Keep ``held`` at ``path`` (the node goes when nothing is kept)."""
    if not held:
        call("forget what a reset kept", remove, client, path)
        return
    body = {name: [at.file, at.pos, at.gtid, at.server] for name, at in sorted(held.items())}
    call("keep what a reset forgot of the targets", put, client, path,
         json.dumps(body).encode())


def refuse_earlier(client: KazooClient, paths: ZkPaths, channel: Channel) -> None:
    """Refuse to start ``channel`` when a pipeline of it without a cursor (reset) begins at
    a ``start:`` place before where a target was kept at, or one that cannot be told from
    it (a position by GTID alone, ordered by state only on a strict source): its first
    start would load again what that target holds, a replay nobody asked for (the reset
    said the next start begins at the definition's start: then, which was later)."""
    for pipeline in channel.pipelines:
        params, pipeline_id = pipeline.params, channel.pipeline_id(pipeline)
        start = params.start_position
        if params.startup in (StartupMode.LATEST, StartupMode.SNAPSHOT) or start is None or \
                call("look for a cursor", client.exists, paths.cursor(pipeline_id)):
            continue
        for name, at in sorted(read(client, paths.held(pipeline_id)).items()):
            if at == start or (start.file and _before_or_at(at, start)):
                continue
            moved = f"setl position set {channel.name}/{pipeline.name}"
            where = f"--file {start.file} --pos {start.pos}" if start.file else \
                f"--gtid {start.gtid}"
            raise ConflictError(
                f"pipeline {pipeline_id}: target {name} holds its transactions up to {at} "
                f"(kept when its position was reset); its start: {start} is earlier, or "
                "cannot be compared with it, so the channel's start would load them again. "
                f"To load again from there: {moved} {where} --replay (and "
                "--keyless-duplicates if it says the pipeline takes keyless tables), then "
                f"start the channel; else give a later start:, or {moved} --latest")


def _before_or_at(at: BinlogPosition, start: BinlogPosition) -> bool:
    try:
        return gtid.compare(at, start) <= 0
    except PositionConflictError:
        return False
