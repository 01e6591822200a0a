"""``setl snapshot``, on the manager's side: a copy of a table asked of the pipeline that
replicates it (the node running it copies it in its stream), and the copies' state, pause,
resume and cancel."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient

from manager.views import Views
from shared import identifiers, tablekeys
from shared.catalog import Catalog
from shared.errors import ConfigError, NotFoundError, SourceError
from shared.model import (
    TWO_WAY_COPY,
    Channel,
    MediaPair,
    Pipeline,
    ShardRule,
    pairs_taking,
)
from shared.patterns import NamePattern, PatternKind
from shared.rpc import manager_pb2
from shared.snapshotctl import SnapshotControl
from shared.zk import ZkPaths

ACTIONS = ("start", "status", "pause", "resume", "cancel")


class Snapshots:
    def __init__(self, client: KazooClient, paths: ZkPaths, catalog: Catalog,
                 views: Views) -> None:
        self.client, self.paths, self.catalog, self.views = client, paths, catalog, views

    def handle(self, request: manager_pb2.SnapshotRequest) -> manager_pb2.SnapshotResponse:
        action = request.action or "start"
        if action not in ACTIONS:
            raise ConfigError(f"snapshot action {action!r}: use one of {', '.join(ACTIONS)}")
        record = self.catalog.channel(request.channel)
        channel = record.channel
        pipeline = self._pipeline(channel, request.pipeline, request.table)
        pipeline_id = channel.pipeline_id(pipeline)
        if action == "start" and self.catalog.source(pipeline.target).type == "subscription":
            raise ConfigError(f"pipeline {pipeline_id} feeds a subscription, which carries "
                              "the binlog's changes only: nothing is copied into it (its "
                              "reader reads the table itself if it needs the rows)")
        if action == "start" and channel.two_way:
            raise ConfigError(f"pipeline {pipeline_id}: {TWO_WAY_COPY}")
        control = SnapshotControl(self.client, self.paths, pipeline_id)
        message = ""
        if action == "start":
            schema, table = self._table(channel, pipeline, request.table)
            control.ask(schema, table, request.where, version=record.version)
            message = (f"{schema}.{table} will be copied by pipeline {pipeline_id}"
                       + (f" where {request.where}" if request.where else ""))
        elif action in ("pause", "resume"):
            control.set_paused(action == "pause")
            message = f"copies of pipeline {pipeline_id} {action}d"
        elif action == "cancel":
            target = "*"
            if request.table:
                schema, table = self._table(channel, pipeline, request.table)
                target = f"{schema}.{table}"
            control.cancel(target)
            message = f"copies of {'every table' if target == '*' else target} cancelled"
        state = self.views.channel(record).pipelines[channel.pipelines.index(pipeline)]
        return manager_pb2.SnapshotResponse(pipeline_id=pipeline_id, copies=state.snapshots,
                                            paused=control.paused(), message=message)

    def _pipeline(self, channel: Channel, name: str, table: str) -> Pipeline:
        if name:
            for pipeline in channel.pipelines:
                if pipeline.name == name:
                    return pipeline
            raise NotFoundError(f"channel {channel.name} has no pipeline {name!r} (it has "
                                f"{', '.join(p.name for p in channel.pipelines)})")
        if table:
            schema, name_ = _split(table)
            for pipeline in channel.pipelines:
                if _pairs_take(pipeline, schema, name_):
                    return pipeline
        return channel.pipelines[0]

    def _table(self, channel: Channel, pipeline: Pipeline, text: str) -> tuple[str, str]:
        if not text:
            raise ConfigError("give the table to copy: --table schema.table")
        schema, table = _split(text)
        where = f"channel {channel.name} pipeline {pipeline.name}"
        if not _pairs_take(pipeline, schema, table):
            raise ConfigError(f"{where} does not replicate {schema}.{table}: no pair takes "
                              "it; add a pair for it (setl apply) and it is copied then")
        source = self.catalog.source(pipeline.source)
        try:
            keys = tablekeys.read_keys(source)
        except Exception as exc:  # a connection error: said with the source's name
            raise SourceError(f"{where}: cannot read the tables of source {source.name}: "
                              f"{exc}") from None
        if (schema, table) not in keys:
            raise NotFoundError(f"source {source.name} has no table {schema}.{table}")
        if not keys[(schema, table)]:
            raise ConfigError(
                f"{schema}.{table} has no primary key and no unique key over NOT NULL "
                "columns, so it cannot be copied in chunks by key (a row copied twice would "
                "be there twice); give it a primary key, or copy it by hand")
        return schema, table


    def copy_added(self, before: Channel, after: Channel, version: int = 0,
                   asks: list[tuple[SnapshotControl, str, str]] | None = None) -> list[str]:
        """Ask for a copy of each source table a changed definition writes somewhere it did
        not write before (a table newly paired, or a new target of one already paired: a
        fan-out, a split, a shard), in pipelines that have run (a pipeline that never ran
        starts as its start: says); ``version``: the channel's new definition version, which
        the requests carry (a runner of an older one leaves them to the new one). Returns
        what was asked and what was not, and why, as lines for the user. ``asks``: the
        requests are added to it, (control, schema, table), for the caller to create in the
        transaction that stores the definition, instead of being created now.

        A copy reads the source table and its rows go through every pair that takes it, so
        its targets already written get the rows again too: at each window's high watermark,
        as ``setl snapshot`` of a replicated table writes them (never older than what the
        stream wrote); the line says so."""
        asked = []

        def ask(control: SnapshotControl, schema: str, table: str) -> None:
            if asks is None:
                control.ask(schema, table, version=version)
            else:
                asks.append((control, schema, table))

        old = {pipeline.name: pipeline for pipeline in before.pipelines}
        for pipeline in after.pipelines:
            previous = old.get(pipeline.name)
            pipeline_id = after.pipeline_id(pipeline)
            if previous is None or not self.client.exists(self.paths.cursor(pipeline_id)) or \
                    self.catalog.source(pipeline.target).type == "subscription":
                continue  # (a subscription carries the binlog's changes only)
            if pipeline.pairs == previous.pairs:
                continue  # the same pairs: every table goes where it went
            try:
                keys = tablekeys.read_keys(self.catalog.source(pipeline.source))
            except Exception as exc:  # nothing asked: said, with what to do
                asked.append(
                    f"pipeline {pipeline_id}: tables its changed pairs write to new targets are "
                    f"NOT copied (only their changes from now on replicate there): cannot read "
                    f"the tables of source {pipeline.source}: {exc}; once it answers, copy "
                    f"each with: setl snapshot {after.name} --pipeline {pipeline.name} "
                    "--table SCHEMA.TABLE")
                continue
            control = SnapshotControl(self.client, self.paths, pipeline_id)
            for (schema, table), key in sorted(keys.items()):
                now = target_addresses(pipeline, schema, table)
                was = target_addresses(previous, schema, table)
                new = sorted(now - was)
                if not new:
                    asked += self._rewritten(control, pipeline_id, previous, pipeline, schema,
                                             table, key, after.two_way, ask)
                    continue
                into = ", ".join(map(_address, new))
                if not key:
                    asked.append(f"pipeline {pipeline_id}: {schema}.{table} is NOT copied into "
                                 f"{into}: it has no primary key and no unique key over NOT "
                                 "NULL columns (its changes replicate from now on); give it "
                                 "one and copy it with setl snapshot, or copy it by hand")
                    continue
                if after.two_way:
                    asked.append(f"pipeline {pipeline_id}: {schema}.{table} is NOT copied into "
                                 f"{into} (its changes replicate from now on): {TWO_WAY_COPY}")
                    continue
                ask(control, schema, table)
                also = sorted(now & was)
                asked.append(f"pipeline {pipeline_id}: {schema}.{table} will be copied into "
                             f"{into}" + (
                                 f" (and again into {', '.join(map(_address, also))}, "
                                 "at the copy's watermarks, as setl snapshot does)"
                                 if also else "") + f"; {COPY_DELETES_NOTHING}")
        return asked

    def _rewritten(self, control: SnapshotControl, pipeline_id: str, previous: Pipeline,
                   pipeline: Pipeline, schema: str, table: str, key: Any, two_way: bool,
                   ask: Callable[[SnapshotControl, str, str], None]) -> list[str]:
        """A table that goes to the targets it went to, by pairs that now write it otherwise
        (other columns, a processor, a join, key_columns: :func:`written_apart`): the rows
        there were written by the old pairs and would keep their old shape until each is
        changed again (a column the new pair adds empty in every row never updated), with
        nothing said. It is copied again through the new pairs, as a new target is; where
        it cannot be, the line says what to do."""
        apart = written_apart(previous, pipeline, schema, table)
        if not apart:
            return []
        into = ", ".join(map(_address, sorted(apart)))
        how = ", ".join(sorted({name for names in apart.values() for name in names}))
        why = (f"pipeline {pipeline_id}: {schema}.{table} goes to {into} by a pair changed "
               f"in {how}, and the rows there were written by the old one")
        if not key:
            return [f"{why}; it is NOT copied again: it has no primary key and no unique key "
                    "over NOT NULL columns. Its rows keep the old pair's shape until each "
                    "changes; rewrite them by hand (empty the target table, then copy the "
                    "source's rows)"]
        if two_way:
            return [f"{why}; it is NOT copied again: {TWO_WAY_COPY}"]
        ask(control, schema, table)
        return [f"{why}: it will be copied again into {into} through the new pair, as setl "
                f"snapshot does; {COPY_DELETES_NOTHING}"]


    def moved_shards(self, before: Channel, after: Channel) -> list[str]:
        """Why a changed definition is refused: a shard route of a pipeline that has run
        whose rule or slots change while it keeps slots it has written. Its rows stay in
        the slots the old rule gave them; the new rule would look for them elsewhere (a
        copy of the old row left behind for good, its updates and deletes written to
        another slot), and nothing would say so until a verify."""
        problems = []
        old = {pipeline.name: pipeline for pipeline in before.pipelines}
        for pipeline in after.pipelines:
            previous = old.get(pipeline.name)
            pipeline_id = after.pipeline_id(pipeline)
            if previous is None or not self.client.exists(self.paths.cursor(pipeline_id)):
                continue  # nothing written yet: any route goes
            was = shard_routes(previous)
            for source, (rule, slots) in sorted(shard_routes(pipeline).items()):
                old_rule, old_slots = was.get(source, (rule, slots))
                kept = [slot for slot in old_slots if slot in slots]
                if (old_rule, old_slots) == (rule, slots) or not kept:
                    continue
                changed = [f"{name} {_plain(getattr(old_rule, name))} → "
                           f"{_plain(getattr(rule, name))}"
                           for name in ("column", "algorithm", "table_balance_size")
                           if getattr(old_rule, name) != getattr(rule, name)]
                if old_slots != slots:
                    changed.append(f"{len(old_slots)} slots → {len(slots)}"
                                   if len(old_slots) != len(slots) else "the slots' order")
                problems.append(
                    f"channel {after.name} pipeline {pipeline.name}: the shard route of "
                    f"{'.'.join(source[1:])} changes ({', '.join(changed)}) and keeps slots "
                    f"it has written ({', '.join(map(_address, kept[:3]))}"
                    f"{', …' if len(kept) > 3 else ''}): the rows there stay in the slots "
                    "the old rule gave them, and the new one would write and delete them "
                    "elsewhere (old copies left for good). Route into new, empty tables "
                    "(slot names the route did not have: setl apply copies the table into "
                    "them), or take the pair out (setl apply), empty its slots, then put it "
                    "back with the new rule (setl apply copies the table into them)")
        return problems


Address = tuple[str, str, str]  # datasource, schema, table


def shard_routes(pipeline: Pipeline) -> dict[Address, tuple[ShardRule, tuple[Address, ...]]]:
    """Per source table a pipeline shards: the route's rule and its slots in order, as the
    node makes them (node.extract.shard.Route)."""
    found: dict[Address, tuple[ShardRule, tuple[Address, ...]]] = {}
    for pair in pipeline.pairs:
        if pair.shard is None:
            continue
        source = (pair.source.datasource, pair.source.namespace.literal,
                  pair.source.table.literal)
        target = pair.target
        try:
            slots = tuple((target.datasource, each, name) for each in target.namespace.names()
                          for name in target.table.names())
        except ValueError:
            slots = ((target.datasource, target.namespace.text, target.table.text),)
        rule, earlier = found.get(source, (pair.shard, ()))
        found[source] = rule, earlier + slots
    return found


# what a copy cannot do, said where one is asked for a table already written
COPY_DELETES_NOTHING = ("a copy deletes nothing: if the target held rows before, run setl "
                        "verify --repair after it, for those the source no longer has")
# how a pair writes a table's rows, its target and the order of targets aside
_WRITING = tuple(f.name for f in dataclasses.fields(MediaPair)
                 if f.name not in ("source", "target", "push_weight", "fan_out", "shard"))


def written_apart(before: Pipeline, after: Pipeline, schema: str, table: str
                  ) -> dict[tuple[str, str, str], list[str]]:
    """The targets a source table goes to both before and after a change whose pair writes
    its rows otherwise now, with the settings that differ (columns, column_pairs, processor,
    joins, key_columns, ...): a pair's source and target patterns, its ``push_weight`` and
    ``fan_out`` say where and in what order rows go, not what they hold; a shard route's
    rule is :meth:`Snapshots.moved_shards`'s."""
    was, now = _writers(before, schema, table), _writers(after, schema, table)
    found = {}
    for address in sorted(was.keys() & now.keys()):
        apart = [name for name in _WRITING
                 if getattr(was[address], name) != getattr(now[address], name)]
        if apart:
            found[address] = apart
    return found


def _writers(pipeline: Pipeline, schema: str, table: str
             ) -> dict[tuple[str, str, str], MediaPair]:
    """Each target a source table goes to, with the pair that writes it there."""
    taking = pairs_taking([pair for pair in pipeline.pairs if pair.shard is None], schema,
                          table, lambda pair: pair)
    found: dict[tuple[str, str, str], MediaPair] = {}
    for pair in pipeline.pairs:
        if pair.shard is not None or pair in taking:
            for address in target_addresses(dataclasses.replace(pipeline, pairs=(pair,)),
                                            schema, table):
                found.setdefault(address, pair)
    return found


def target_addresses(pipeline: Pipeline, schema: str, table: str
                     ) -> frozenset[tuple[str, str, str]]:
    """(datasource, schema, table) of every table the pipeline writes a source table's rows
    to: the targets of the pairs that take it (every fan-out pair, else the most specific
    match, as the node picks them) and every slot of the shard routes it feeds. A name a
    pattern cannot list stands as the pattern's text (a new one is a new target still)."""
    found: set[tuple[str, str, str]] = set()
    taking = [pair for pair in pipeline.pairs if pair.shard is None]
    sharded = [pair for pair in pipeline.pairs if pair.shard is not None and
               pair.source.namespace.matches_schema(schema) and pair.source.table.matches(table)]
    for pair in sharded:
        target = pair.target
        try:
            found.update((target.datasource, each, name) for each in target.namespace.names()
                         for name in target.table.names())
        except ValueError:
            found.add((target.datasource, target.namespace.text, target.table.text))
    for pair in pairs_taking(taking, schema, table, lambda pair: pair):
        found.add((pair.target.datasource,
                   _target_name(pair.source.namespace, pair.target.namespace, schema,
                                (schema, table)),
                   _target_name(pair.source.table, pair.target.table, table,
                                (schema, table))))
    return frozenset(found)


def _plain(value: Any) -> Any:
    return str(value.value).lower() if isinstance(value, enum.Enum) else value


def _address(address: tuple[str, str, str]) -> str:
    return f"{address[0]}:{address[1]}.{address[2]}"


def _target_name(source: NamePattern, target: NamePattern, name: str,
                 matched: tuple[str, str]) -> str:
    """The target's name for the source's ``name`` (as node.extract.etl works it out)."""
    if target.kind is PatternKind.TEMPLATE:
        return target.render(*matched)
    if target.kind is PatternKind.MULTI:
        index = source.index_of(name) if source.kind is PatternKind.MULTI else None
        return target.name_at(target.low if index is None else target.low + index - source.low)
    return target.literal


def _split(text: str) -> tuple[str, str]:
    schema, table = identifiers.split_qualified(text)
    return identifiers.unquote(schema), identifiers.unquote(table)


def _pairs_take(pipeline: Pipeline, schema: str, table: str) -> bool:
    return any(pair.source.namespace.matches_schema(schema) and pair.source.table.matches(table)
               for pair in pipeline.pairs)
