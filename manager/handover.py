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
from shared.model import BinlogPosition, Channel, ChannelStatus, DataSource, Pipeline

Address = tuple[str, str, str]  # (datasource, schema, table) a pipeline writes


@dataclass(frozen=True)
class Handover:
    """Source table ``table`` of ``source`` goes to ``address`` by ``taker`` now, by
    ``giver`` (which has run) before; ``resumes``: the taker has run too, so it goes on from
    its own position."""

    source: str
    table: tuple[str, str]
    address: Address
    giver: str  # pipeline id
    taker: str
    resumes: bool = False


@dataclass
class Handovers:
    """What :func:`handovers` found: refusals (either channel runs) and notes."""

    refused: list[str]
    notes: list[str]


Listed = list[tuple[str, str]] | str  # a source's tables, or why they could not be read


def handovers(before: dict[str, Channel], after: Iterable[Channel],
              has_run: Callable[[str], bool], status: Callable[[str], ChannelStatus],
              source: Callable[[str], DataSource],
              stopped_at: Callable[[str], BinlogPosition | None]) -> Handovers:
    """The handovers an apply of ``after`` makes (``before``: every channel as stored), and
    the tables it leaves written by pipelines of two channels, as refusals while a channel
    of either side is not stopped, else as notes (with the position the giver stopped at).
    ``has_run``, ``stopped_at``: a pipeline id's cursor exists, and where it stands."""
    after = list(after)
    changed = {channel.name: channel for channel in after
               if before.get(channel.name) != channel}
    if not changed:
        return Handovers([], [])
    tables: dict[str, Listed] = {}

    def listed(name: str) -> Listed:
        if name not in tables:
            tables[name] = _tables(source, name)
        return tables[name]

    givers = [(name, pipeline) for name, channel in before.items() if name in changed
              for pipeline in channel.pipelines
              if has_run(channel.pipeline_id(pipeline))]
    takers = [(channel.name, pipeline) for channel in changed.values()
              for pipeline in channel.pipelines]
    now = {name: {pipeline.name: pipeline for pipeline in channel.pipelines}
           for name, channel in changed.items()}
    found: list[Handover] = []
    for giver_channel, giver in givers:
        kept = now[giver_channel].get(giver.name)
        giver_id = before[giver_channel].pipeline_id(giver)
        for taker_channel, taker in takers:
            taker_id = changed[taker_channel].pipeline_id(taker)
            if taker.source != giver.source or taker_id == giver_id:
                continue
            had = {p.name: p for p in before[taker_channel].pipelines}.get(taker.name) \
                if taker_channel in before else None
            ran = has_run(taker_id)
            if had is not None and not ran:
                continue  # an existing pipeline that never ran starts as its start: says
            table_list = listed(giver.source)
            if isinstance(table_list, str):
                continue  # said once below
            for table in table_list:
                gone = _writes(giver, table) - _writes(kept, table)
                taken = _writes(taker, table) - _writes(had, table)
                for address in sorted(gone & taken):
                    found.append(Handover(giver.source, table, address, giver_id, taker_id,
                                          ran))
    # every channel as it stands after the apply: the file's, and the stored ones it leaves
    final = {**before, **{channel.name: channel for channel in after}}
    shared = _shared(changed, final, listed)
    # a share stored before this apply (an older setl let it be) is said, not refused: an
    # edit of either channel must not wait for it
    was = _shared({name: before[name] for name in changed if name in before}, before, listed)
    unread = [f"source {name}: cannot read its tables ({why}), so setl apply could not check "
              "whether this apply moves a table from a pipeline that has run to another one "
              "(a gap, or rows loaded twice, between the two) or leaves a table written by "
              "pipelines of two channels: if it does, stop both channels first (then setl "
              "position set, or copy the table again: setl snapshot), and keep each table in "
              "one channel (setl channel delete the one no longer wanted)"
              for name, why in tables.items() if isinstance(why, str)]
    said = _said(found, status, stopped_at, unread)
    running = _running(status, before)
    for pair, meets in shared.items():
        one, other = pair
        channels = sorted({one.split(".", 1)[0], other.split(".", 1)[0]})
        not_stopped = [name for name in channels if running(name)]
        both = f"pipeline {one} and pipeline {other} both take {_meeting(final, pair, meets)}"
        if not_stopped and not set(meets) <= set(was.get(pair, ())):
            said.refused.append(
                f"{both}: two writers of one table, each loading from its own position (a "
                "keyless table's rows twice, a row written back to an older version), while "
                f"channel {' and '.join(not_stopped)} is not stopped (paused or running). "
                "Keep each table in one channel: "
                "stop the channels ("
                f"{', '.join(f'setl channel stop {c} --wait' for c in not_stopped)}) and "
                "delete the one no longer wanted (setl channel delete NAME: a channel renamed "
                "leaves the old one stored, running as it did), then apply again")
        else:
            said.notes.append(
                f"{both}: start only one of channels {' and '.join(channels)} (setl channel "
                "start refuses the second while the first runs), or delete the one no longer "
                "wanted (setl channel delete NAME: a channel renamed leaves the old one stored)")
    return said


def writers_besides(channel: Channel, others: Iterable[Channel],
                    source: Callable[[str], DataSource]
                    ) -> tuple[dict[str, list[str]], list[str]]:
    """Problems of starting ``channel`` while ``others`` (the channels that are not stopped)
    run: each pipeline of theirs that takes a source table the channel's pipelines take (the
    same source) into the same target, as lines naming both, by the other channel; and the
    sources whose tables could not be read."""
    tables: dict[str, Listed] = {}

    def listed(name: str) -> Listed:
        if name not in tables:
            tables[name] = _tables(source, name)
        return tables[name]

    final = {**{other.name: other for other in others}, channel.name: channel}
    shared = _shared({channel.name: channel}, final, listed)
    by_channel: dict[str, list[str]] = {}
    for (one, other), meets in shared.items():
        rival = next(name.split(".", 1)[0] for name in (one, other)
                     if name.split(".", 1)[0] != channel.name)
        by_channel.setdefault(rival, []).append(
            f"pipeline {one} and pipeline {other} would both take "
            f"{_meeting(final, (one, other), meets)}")
    return (by_channel,
            [f"source {name}: cannot read its tables ({why})"
             for name, why in tables.items() if isinstance(why, str)])


def _writes(pipeline: Pipeline | None, table: tuple[str, str]) -> frozenset[Address]:
    return target_addresses(pipeline, *table) if pipeline is not None else frozenset()


Meets = list[tuple[tuple[str, str], Address]]  # (source table, target) two pipelines share


def _shared(changed: dict[str, Channel], final: dict[str, Channel],
            listed: Callable[[str], Listed]) -> dict[tuple[str, str], Meets]:
    """(pipeline of ``changed``, pipeline of another channel of ``final``), sorted, that take
    one source table of one source into one target address, with what they share. Each
    pipeline's targets are worked out once (a source of 10,000 tables, 50 channels). Two
    channels writing one target from different source tables or sources are not this, nor
    the two pipelines of one (two-way) channel."""
    sources = {pipeline.source for channel in changed.values() for pipeline in channel.pipelines}
    writers: dict[tuple[str, tuple[str, str], Address], list[tuple[str, str]]] = {}
    for name, channel in sorted(final.items()):
        for pipeline in channel.pipelines:
            table_list = listed(pipeline.source) if pipeline.source in sources else ""
            if isinstance(table_list, str):
                continue
            pipeline_id = channel.pipeline_id(pipeline)
            for table in table_list:
                for address in _writes(pipeline, table):
                    writers.setdefault((pipeline.source, table, address), []).append(
                        (name, pipeline_id))
    found: dict[tuple[str, str], Meets] = {}
    for (_, table, address), who in writers.items():
        for index, (one_channel, one) in enumerate(who):
            for other_channel, other in who[index + 1:]:
                if one_channel != other_channel and (
                        one_channel in changed or other_channel in changed):
                    pair = (one, other) if one < other else (other, one)
                    found.setdefault(pair, []).append((table, address))
    return {pair: sorted(meets) for pair, meets in found.items()}


def _meeting(final: dict[str, Channel], pair: tuple[str, str], meets: Meets) -> str:
    return f"from source {_pipeline(final, pair[0]).source} {_what(meets)}"


def _pipeline(channels: dict[str, Channel], pipeline_id: str) -> Pipeline:
    channel, name = pipeline_id.split(".", 1)
    return channels[channel].pipeline(name)


def _what(moved: list[tuple[tuple[str, str], Address]]) -> str:
    return ", ".join(f"{table[0]}.{table[1]} → {address[0]}:{address[1]}.{address[2]}"
                     for table, address in moved[:5]) + \
        (f" and {len(moved) - 5} more" if len(moved) > 5 else "")


def _running(status: Callable[[str], ChannelStatus], stored: dict[str, Channel]
             ) -> Callable[[str], bool]:
    """A channel is not stopped (a channel not stored yet is)."""
    return lambda name: name in stored and status(name) is not ChannelStatus.STOP


def _tables(source: Callable[[str], DataSource], name: str) -> Listed:
    try:
        return sorted(tablekeys.read_keys(source(name)))
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
        what = _what([(h.table, h.address) for h in moved])
        running = sorted({pipeline_id.split(".", 1)[0] for pipeline_id in (giver, taker)
                          if status(pipeline_id.split(".", 1)[0]) is not ChannelStatus.STOP})
        channel, name = taker.split(".", 1)
        copies = " ".join(f"setl snapshot {channel} --pipeline {name} --table "
                          f"{h.table[0]}.{h.table[1]}" for h in moved[:5])
        if moved[0].resumes:
            if running:
                refused.append(
                    f"pipeline {taker}, which has run, would take over from pipeline {giver}, "
                    f"which has run, what it wrote ({what}), while channel "
                    f"{' and '.join(running)} runs: {taker} goes on from its own position, "
                    f"not where {giver} stopped, so the transactions between the two would be "
                    "loaded by neither, or twice (a keyless table's rows twice), and the old "
                    f"pipeline's runner may still load a batch after {taker} wrote newer rows "
                    "(an older version kept for good). Stop "
                    f"{' and '.join(f'setl channel stop {c} --wait' for c in running)}, apply "
                    "again, then copy the tables again (" + copies + ") or set where each "
                    "stands (setl position show, setl position set)")
                continue
            notes.append(
                f"pipeline {taker}, which has run, takes over from pipeline {giver} what it "
                f"wrote ({what}) and goes on from its own position ({_at(stopped_at(taker))}),"
                f" not where {giver} stopped ({_at(stopped_at(giver))}): rows between the two "
                "are missing, or loaded twice; copy the tables again (" + copies + "; a "
                "keyed table this apply copies already, see its copy lines) and verify them "
                f"(setl verify {channel} --table SCHEMA.TABLE)")
            continue
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
        where = "it has no position" if at is None else (
            f"it stopped at {at}; before starting channel {channel}: setl position set "
            f"{channel}/{name} " + (f"--gtid {at.gtid}" if at.gtid and not at.file else
                                    f"--file {at.file} --pos {at.pos}"))
        notes.append(f"pipeline {taker} takes over from pipeline {giver} what it wrote "
                     f"({what}) and starts at its start:, not where {giver} stopped: {where}"
                     " (or copy the tables again: setl snapshot)")
    return Handovers(refused, notes)


def _at(position: BinlogPosition | None) -> str:
    return "no position" if position is None else str(position)
