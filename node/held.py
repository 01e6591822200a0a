"""What a pipeline holds against the server it reads: checked before it goes on there.

On any server the pipeline resumes from the GTID state its positions carry
(:mod:`shared.gtid`), never from file/pos of another server (:func:`on_server`); and before
it does, the targets' positions are checked against what the server holds
(:func:`check_held`): a target that holds transactions the server never had (a failover
that lost the old primary's last transactions) pauses the pipeline with the GTIDs and the
choices — going on would leave those rows on the target and the server's own transactions
of the same numbers unsent. A position row naming the server read now must be a position
of its binlog now (not of one a RESET MASTER or a restore replaced), and one written before
positions named their server is taken for this server's only where its binlog has that
boundary with those GTIDs (:class:`_Identify`). Which server is read is
:mod:`node.primary`'s to say.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from node.cursor import Cursor, Resume
from node.primary import SwitchPending
from shared import gtid, members
from shared.endpoint import connect
from shared.errors import PositionLostError, SourceError
from shared.members import Probe
from shared.model import BinlogPosition, DataSource
from shared.positions import BETWEEN_GROUPS, GROUP_OPENS, event_at, state_conflict

log = logging.getLogger("setl.node.primary")  # its events as before it left node.primary


Held = tuple[Probe, Cursor, dict[str, Cursor | None]]


def check_held(pipeline_id: str, source: DataSource, hint: Cursor,
               rows: dict[str, Cursor | None]) -> Held:
    """Refuse to go on from the server ``source`` names when the pipeline's cursor or a
    target holds transactions it never had; else the server's probe, with the cursor and
    rows as this server's (positions written before positions named their server are
    found in its binlog, or refused)."""
    found = members.probe(source)
    if not found.answers:
        raise SourceError(f"pipeline {pipeline_id}: source {source.name} "
                          f"({members.address(source)}) does not answer: {found.error}")
    members.refuse_unsafe(source, found, "the pipeline would go on at")  # (an empty
    # gtid_binlog_state too: a replica without log_slave_updates)
    if not found.gtid_state:
        return found, hint, rows  # MySQL, or no GTIDs: positions stay file/pos
    identify = _Identify(pipeline_id, source, found)
    hint = dataclasses.replace(
        hint, position=identify(hint.position, "the cursor"),
        targets={name: at for name, at in ((name, identify(at, "", must=False))
                                           for name, at in hint.targets.items()) if at})
    rows = {name: row if row is None or not row.position.file else dataclasses.replace(
        row, position=identify(row.position, f"target {name}'s position row"))
        for name, row in rows.items()}
    _check_rows_of_this_binlog(pipeline_id, source, found.server, rows)
    held = {"the cursor": hint.position,
            **{f"target {name}": row.position for name, row in rows.items()
               if row is not None and row.position.file}}
    lost = {}
    for who, position in held.items():
        if position.gtid and not position.gtid.count(":"):  # a MariaDB state
            gaps = gtid.missing(position.gtid, found.gtid_state)
            if gaps:
                lost[who] = gaps
    if not lost:
        return found, hint, rows
    where = members.address(source)
    parted = gtid.diverged((gap for gaps in lost.values() for gap in gaps), found.gtid_pos)
    if found.replicating and not parted:
        raise SwitchPending(f"pipeline {pipeline_id}: {where} (source {source.name}) does "
                            f"not hold {', '.join(next(iter(lost.values())))} yet and is "
                            "still replicating: waiting for it to catch up")
    listed = "; ".join(f"{who} holds {', '.join(gaps)}" for who, gaps in lost.items())
    step, channel = pipeline_id.replace(".", "/"), pipeline_id.partition(".")[0]
    why = (f"Its binlog went on with other transactions of those numbers: "
           f"{', '.join(parted)} — two histories, which no catching up joins"
           + (" (it still replicates, and never will get them)" if found.replicating
              else "") if parted else
           "They were lost when the old primary failed before its replica got them, or "
           "this server's binlog was reset (RESET MASTER), which begins its numbering again")
    raise PositionLostError(
        f"pipeline {pipeline_id}: source {source.name}'s server {where} ({found.server}) "
        f"never had transactions the pipeline already replicated: {listed} (its GTID state "
        f"is {found.gtid_state}). {why}; going on would keep them on the targets and send "
        "this server's own transactions of the same numbers over them. Either apply them "
        "to this server (mariadb-binlog of the old primary from those GTIDs) and start the "
        f"channel again, or accept the loss: setl channel stop {channel} --wait; setl "
        f"position set {step} --latest --replay; setl channel start {channel}; then setl "
        f"verify {channel} --repair")


def _check_rows_of_this_binlog(pipeline_id: str, source: DataSource, server: str,
                               rows: dict[str, Cursor | None]) -> None:
    """Refuse a target row that names the server read now but is no position of its
    binlog now: the server keeps its name (``server_id@host:port``) when its binlog starts
    again (RESET MASTER: an old primary rejoined, a restore), and a row of its old binlog
    (binlog.000004) is taken by file/pos for past every batch of the new one (binlog.000001):
    each skipped. Positions of one server compare by file/pos (:func:`shared.gtid.compare`),
    so a row of another binlog of it stops here; rows in purged files, rows without a GTID
    state, and states MariaDB cannot say (BINLOG_GTID_POS NULL) pass."""
    mine = {name: row.position for name, row in rows.items()
            if row is not None and row.position.file and row.position.server == server}
    if not mine:
        return
    with connect(source) as conn, conn.cursor() as cursor:
        sizes = _binlog_sizes(cursor)  # once: MariaDB opens every kept file to list it
        judged: dict[BinlogPosition, str] = {}  # (a lake's tables often share a position)
        for name, at in mine.items():
            why = judged.get(at)
            if why is None:
                why = judged[at] = _not_of_this_binlog(cursor, at, sizes)
            if why:
                step, channel = pipeline_id.replace(".", "/"), pipeline_id.partition(".")[0]
                raise PositionLostError(
                    f"pipeline {pipeline_id}: target {name}'s position row is at {at}, of "
                    f"server {server} ({members.address(source)}, source {source.name}), but "
                    f"{why}: the server's binlog was reset or restarted (RESET MASTER, a "
                    "restore) since the row was written, so its file/pos say nothing of "
                    "where the target stands now, and going on could skip or repeat its "
                    "rows. Nothing was read or loaded. With the channel stopped (setl "
                    f"channel stop {channel} --wait), go on from the binlog's end and "
                    f"repair the target (setl position set {step} --latest --replay; setl "
                    f"channel start {channel}; then setl verify {channel} --repair); or, "
                    "only where the server still holds the target's GTID state (a restore "
                    "that kept @@gtid_binlog_state: after RESET MASTER it begins again), set "
                    f"that state (setl position set {step} --gtid STATE --replay; setl "
                    f"channel start {channel})")


def _missing(at: BinlogPosition, sizes: dict[str, int]) -> str:
    """'' when ``at``'s file (not among ``sizes``) is older than the oldest one kept: purged;
    else why it is no file of this binlog."""
    kept = sorted(sizes, key=lambda file: BinlogPosition(file, 0).order())
    mine, first = BinlogPosition(at.file, 0).order(), BinlogPosition(kept[0], 0).order()
    if mine[0] and mine[1] == first[1] and mine < first:
        return ""
    return f"{at.file} is not among its binlog files now ({kept[0]} to {kept[-1]})"


def _binlog_sizes(cursor: Any) -> dict[str, int]:
    cursor.execute("SHOW BINARY LOGS")
    return {str(r[0]): int(r[1]) for r in cursor.fetchall()}


def _not_of_this_binlog(cursor: Any, at: BinlogPosition,
                        sizes: dict[str, int] | None = None) -> str:
    """Why ``at`` (a position naming the connected MariaDB server) is not of the server's
    binlog now, '' when it is or cannot be told: its file is missing though not older than
    the oldest one kept (those are purged), no event begins there, or the GTID state there
    (BINLOG_GTID_POS; NULL after an event over max_allowed_packet: unknown) is not the
    stored one. ``sizes``: the server's binlog files as listed (read here if not given)."""
    if at.pos < 4:
        return ""
    sizes = _binlog_sizes(cursor) if sizes is None else sizes
    if not sizes:
        return ""  # no binlog: the start's own checks say it
    if at.file not in sizes:  # (a file's start holds nothing yet: not judged by its name)
        return "" if at.pos == 4 else _missing(at, sizes)
    # a file's start: its GTID list is the state there (shared.positions.check_start)
    kind = "" if at.pos == 4 else event_at(cursor, at, sizes[at.file])
    if kind is None:
        fresh = _binlog_sizes(cursor)  # purged meanwhile (MariaDB says "no event" then too)?
        if at.file not in fresh and fresh and not _missing(at, fresh):
            return ""
        return f"no event begins at {at.file}:{at.pos} in its binlog now"
    if not at.gtid:
        return ""
    cursor.execute("SELECT BINLOG_GTID_POS(%s, %s)", (at.file, at.pos))
    found = cursor.fetchone()[0]
    if found is None:
        return ""  # unknown there (see shared.positions.check_start)
    why = state_conflict(at.gtid, str(found), kind not in GROUP_OPENS | BETWEEN_GROUPS | {""})
    return f"at {at.file}:{at.pos} {why}" if why else ""


class _Identify:
    """A position without its server (written by an older setl) is this server's when this
    server's binlog has a transaction boundary there with the position's GTIDs; it is then
    named so, with the whole GTID state there. Else it is another server's: refused
    (``must``) or dropped. One without GTIDs is never taken for this server's: any server's
    binlog may have a boundary at the same file and offset."""

    def __init__(self, pipeline_id: str, source: DataSource, found: Probe) -> None:
        self.pipeline_id, self.source, self.found = pipeline_id, source, found

    def __call__(self, position: BinlogPosition, who: str,
                 must: bool = True) -> BinlogPosition | None:
        if position.server or not position.file:
            return position
        with connect(self.source) as conn, conn.cursor() as cursor:
            cursor.execute("SELECT BINLOG_GTID_POS(%s, %s)", (position.file, position.pos))
            found = cursor.fetchone()[0]  # NULL: no such file, or not an event boundary
            if found is None:
                cursor.execute("SHOW BINARY LOGS")
                if position.file not in {str(row[0]) for row in cursor.fetchall()}:
                    return position  # purged (or never here): the start's checks say so
        state = "" if found is None else str(found)
        parts = set(state.split(","))
        if found is not None and position.gtid and \
                all(part in parts for part in position.gtid.split(",") if part):
            return BinlogPosition(position.file, position.pos, state, self.found.server)
        if not must:
            return None
        raise PositionLostError(
            f"pipeline {self.pipeline_id}: {who} is at {position}, written before positions "
            f"named their server, and {members.address(self.source)}'s binlog has no "
            f"transaction boundary there with those GTIDs ({state or 'none'}): it is "
            "another server's position (the source switched, or was pointed elsewhere). Set "
            f"where the pipeline goes on: setl position set "
            f"{self.pipeline_id.replace('.', '/')} --gtid STATE (the GTID state the targets "
            "hold)")


def on_server(pipeline_id: str, resume: Resume, server: str, server_pos: str = "") -> Resume:
    """The resume with its start as the server ``server`` (whose ``@@gtid_binlog_pos`` is
    ``server_pos``) can read it: a start of another server's binlog becomes its GTID state
    (MariaDB finds the place in its own binlog). A domain of the server's that the state
    never saw refuses: MariaDB would send its every transaction still in the binlog, and
    whether the targets should get them is the operator's to say (:func:`_unseen`)."""
    start = resume.start.position
    if not start.server or not server or start.server == server or not start.file:
        return resume
    if not start.gtid or ":" in start.gtid:  # none, or MySQL's (its sets are not followed)
        raise PositionLostError(
            f"pipeline {pipeline_id}: it goes on at {start} of server {start.server}, but "
            f"reads {server} now, and that position has no GTID state to find its place by. "
            f"Set where it goes on (setl position set {pipeline_id.replace('.', '/')} --gtid "
            "STATE) once you know which transactions the targets hold")
    unseen = gtid.unseen_domains(start.gtid, server_pos)
    if unseen:
        raise _unseen(pipeline_id, start, server, unseen)
    log.info("event=resume_by_gtid pipeline=%s from_server=%s server=%s gtid=%s",
             pipeline_id, start.server, server, start.gtid)
    return dataclasses.replace(resume, start=dataclasses.replace(
        resume.start, position=BinlogPosition(gtid=start.gtid)))


def _unseen(pipeline_id: str, start: BinlogPosition, server: str,
            unseen: gtid.State) -> PositionLostError:
    """The stop for domains of the server read now that the pipeline's GTID state never
    saw (transactions the old primary never had: a replica's local writes in a domain of
    their own, or the new primary's own since the switch), with the two ways on."""
    step, channel = pipeline_id.replace(".", "/"), pipeline_id.partition(".")[0]
    domains = ", ".join(str(domain) for domain in sorted(unseen))
    skipped = gtid.text({**gtid.parse(start.gtid), **unseen})
    return PositionLostError(
        f"pipeline {pipeline_id}: it goes on at GTID state {start.gtid} of server "
        f"{start.server}, reads {server} now, and {server} has transactions in GTID domain "
        f"{domains} that this state has none of (up to {gtid.text(unseen)}): the old "
        "primary never had them (a replica's local writes, or writes on the new primary in "
        "a domain of its own). Going on would send every one of them still in its binlog "
        "to the targets; setl does not guess whether they belong there. Decide, with the "
        f"channel stopped (setl channel stop {channel} --wait): to send them, setl position "
        f"set {step} --gtid {start.gtid} --replay; to leave them out, setl position set "
        f"{step} --gtid {skipped} --replay (the targets hold {start.gtid} either way: "
        f"nothing of it is loaded again); then setl channel start {channel}")
