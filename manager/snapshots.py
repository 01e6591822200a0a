"""``setl snapshot``, on the manager's side: a copy of a table asked of the pipeline that
replicates it (the node running it copies it in its stream), and the copies' state, pause,
resume and cancel."""

from __future__ import annotations

from kazoo.client import KazooClient

from manager.views import Views
from shared import identifiers, tablekeys
from shared.catalog import Catalog
from shared.errors import ConfigError, NotFoundError, SourceError
from shared.model import TWO_WAY_COPY, Channel, Pipeline
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
            control.ask(schema, table, request.where)
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


    def copy_added(self, before: Channel, after: Channel) -> list[str]:
        """Ask for a copy of each table a changed definition pairs that it did not pair
        before, in pipelines that have run (a pipeline that never ran starts as its start:
        says); returns what was asked, as lines for the log."""
        asked = []
        old = {pipeline.name: pipeline for pipeline in before.pipelines}
        for pipeline in after.pipelines:
            previous = old.get(pipeline.name)
            pipeline_id = after.pipeline_id(pipeline)
            if previous is None or not self.client.exists(self.paths.cursor(pipeline_id)) or \
                    self.catalog.source(pipeline.target).type == "subscription":
                continue  # (a subscription carries the binlog's changes only)
            try:
                keys = tablekeys.read_keys(self.catalog.source(pipeline.source))
            except Exception as exc:  # the node copies nothing then; said in the log
                asked.append(f"pipeline {pipeline_id}: tables added to its pairs are not "
                             f"copied: cannot read source {pipeline.source}: {exc}")
                continue
            control = SnapshotControl(self.client, self.paths, pipeline_id)
            for (schema, table), key in sorted(keys.items()):
                if _pairs_take(pipeline, schema, table) and \
                        not _pairs_take(previous, schema, table):
                    if not key:
                        asked.append(f"pipeline {pipeline_id}: {schema}.{table} is not copied: "
                                     "it has no key (its changes replicate from now on)")
                        continue
                    if after.two_way:
                        asked.append(f"pipeline {pipeline_id}: {schema}.{table} is not copied "
                                     f"(its changes replicate from now on): {TWO_WAY_COPY}")
                        continue
                    control.ask(schema, table)
                    asked.append(f"pipeline {pipeline_id}: {schema}.{table} will be copied")
        return asked


def _split(text: str) -> tuple[str, str]:
    schema, table = identifiers.split_qualified(text)
    return identifiers.unquote(schema), identifiers.unquote(table)


def _pairs_take(pipeline: Pipeline, schema: str, table: str) -> bool:
    return any(pair.source.namespace.matches_schema(schema) and pair.source.table.matches(table)
               for pair in pipeline.pairs)
