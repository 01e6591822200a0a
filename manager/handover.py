"""A source table's target handed from one pipeline to another by ``setl apply``: a pipeline
renamed, or a table moved into another pipeline or channel.

The pipeline that takes the table over has no cursor yet: it starts as its ``start:`` says
(``latest``: the apply's moment, or the channel's start), while the one that gave it up
loaded up to wherever it stood. Were either running, the stretch between the two would be
lost (the old one behind: its transactions not yet loaded are loaded by neither) or loaded
twice (the old one still loading past the new one's start: a keyless table's rows twice,
and a row written back to an older version while the two interleave), with nothing said.
So such an apply is refused while either channel runs; with both stopped it goes through,
and its note gives the ``setl position set`` that starts the new pipeline where the old
one stopped."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from manager.snapshots import target_addresses
from shared import tablekeys
from shared.model import BinlogPosition, Channel, ChannelStatus, DataSource

Address = tuple[str, str, str]  # (datasource, schema, table) a pipeline writes


@dataclass(frozen=True)
class Handover:
    """Source table ``table`` of ``source`` goes to ``address`` by ``taker`` now, by
    ``giver`` (which has run) before."""

    source: str
    table: tuple[str, str]
    address: Address
    giver: str  # pipeline id
    taker: str


@dataclass
class Handovers:
    """What :func:`handovers` found: refusals (either channel runs) and notes."""

    refused: list[str]
    notes: list[str]


def handovers(before: dict[str, Channel], after: Iterable[Channel],
              has_run: Callable[[str], bool], status: Callable[[str], ChannelStatus],
              source: Callable[[str], DataSource],
              stopped_at: Callable[[str], BinlogPosition | None]) -> Handovers:
    """The handovers an apply of ``after`` makes (``before``: every channel as stored), as
    refusals while a channel of either side is not stopped, else as notes with the position
    the giver stopped at. ``has_run``, ``stopped_at``: a pipeline id's cursor exists, and
    where it stands."""
    changed = {channel.name: channel for channel in after
               if before.get(channel.name) != channel}
    if not changed:
        return Handovers([], [])
    givers = [(name, pipeline) for name, channel in before.items() if name in changed
              for pipeline in channel.pipelines
              if has_run(channel.pipeline_id(pipeline))]
    old_ids = {channel.pipeline_id(pipeline) for channel in before.values()
               for pipeline in channel.pipelines}
    takers = [(channel.name, pipeline) for channel in changed.values()
              for pipeline in channel.pipelines
              if channel.pipeline_id(pipeline) not in old_ids
              and not has_run(channel.pipeline_id(pipeline))]
    if not givers or not takers:
        return Handovers([], [])
    now = {name: {pipeline.name: pipeline for pipeline in channel.pipelines}
           for name, channel in changed.items()}
    found: list[Handover] = []
    tables: dict[str, Iterable[tuple[str, str]] | str] = {}
    for giver_channel, giver in givers:
        kept = now[giver_channel].get(giver.name)
        giver_id = before[giver_channel].pipeline_id(giver)
        for taker_channel, taker in takers:
            if taker.source != giver.source:
                continue
            if giver.source not in tables:
                tables[giver.source] = _tables(source(giver.source))
            listed = tables[giver.source]
            if isinstance(listed, str):
                continue  # said once below
            taker_id = changed[taker_channel].pipeline_id(taker)
            for table in listed:
                gone = target_addresses(giver, *table) - (
                    target_addresses(kept, *table) if kept is not None else frozenset())
                for address in sorted(gone & target_addresses(taker, *table)):
                    found.append(Handover(giver.source, table, address, giver_id, taker_id))
    unread = [f"source {name}: cannot read its tables ({why}), so setl apply could not check "
              "whether a table this apply moves from a pipeline that has run to a new one "
              "leaves a gap between the two: if it does, stop both channels, then start the "
              "new pipeline where the old one stopped (setl position set)"
              for name, why in tables.items() if isinstance(why, str)]
    return _said(found, status, stopped_at, unread)


def _tables(source: DataSource) -> list[tuple[str, str]] | str:
    try:
        return sorted(tablekeys.read_keys(source))
    except Exception as exc:  # said in the notes: the apply is not failed for it
        return str(exc)


def _said(found: list[Handover], status: Callable[[str], ChannelStatus],
          stopped_at: Callable[[str], BinlogPosition | None], unread: list[str]
          ) -> Handovers:
    refused, notes = [], list(unread)
    by_pair: dict[tuple[str, str], list[Handover]] = {}
    for handover in found:
        by_pair.setdefault((handover.giver, handover.taker), []).append(handover)
    for (giver, taker), moved in by_pair.items():
        what = ", ".join(f"{h.table[0]}.{h.table[1]} → {h.address[0]}:{h.address[1]}."
                         f"{h.address[2]}" for h in moved[:5]) + \
            (f" and {len(moved) - 5} more" if len(moved) > 5 else "")
        running = sorted({pipeline_id.split(".", 1)[0] for pipeline_id in (giver, taker)
                          if status(pipeline_id.split(".", 1)[0]) is not ChannelStatus.STOP})
        if running:
            refused.append(
                f"pipeline {taker} would take over from pipeline {giver}, which has run, what "
                f"it wrote ({what}), while channel {' and '.join(running)} runs: the new "
                "pipeline starts at its start: and the old one stops where it stands, so the "
                "transactions between the two would be loaded by neither, or by both (a "
                "keyless table's rows twice, a row written back to an older version). Stop "
                f"{' and '.join(f'setl channel stop {c} --wait' for c in running)}, apply "
                "again, then start the new pipeline where the old one stopped (setl position "
                "set, as the apply's note will say)")
            continue
        at = stopped_at(giver)
        channel, name = taker.split(".", 1)
        where = "it has no position" if at is None else (
            f"it stopped at {at}; before starting channel {channel}: setl position set "
            f"{channel}/{name} " + (f"--gtid {at.gtid}" if at.gtid and not at.file else
                                    f"--file {at.file} --pos {at.pos}"))
        notes.append(f"pipeline {taker} takes over from pipeline {giver} what it wrote "
                     f"({what}) and starts at its start:, not where {giver} stopped: {where}"
                     " (or copy the tables again: setl snapshot)")
    return Handovers(refused, notes)
