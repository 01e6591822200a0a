"""How each attempt of a pipeline runner opens, before Select reads a byte: the source's
member resolved, the stored cursor (the hint) read, the targets claimed and read, where the
stream resumes worked out from them, and the source checked. The checks themselves are
plain functions (:mod:`node.start`, :func:`node.cursor.resume`); the stream that goes on from
here is :meth:`node.pipeline.PipelineRunner._run_from`."""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any

from kazoo.exceptions import KazooException

from node import cursor as cursors
from node import held, start
from node.cursor import Cursor, CursorStore
from node.extract import freedoor
from node.extract.etl import CompiledPipeline
from node.held import check_held
from node.primary import Primary
from node.select import source as endpoints
from node.snapshot.state import SnapshotStore
from node.target import kinds
from node.target.base import TargetLoader
from shared import positions
from shared.errors import OwnershipLostError, ZooKeeperUnavailableError
from shared.model import DataSource

log = logging.getLogger("setl.node.pipeline")


class RunnerStart:
    """The opening half of :class:`node.pipeline.PipelineRunner` (its attributes are the
    runner's)."""

    ctx: Any
    pipeline_id: str
    stop_event: threading.Event
    cursor: Cursor | None
    cursors: CursorStore
    snapshot_store: SnapshotStore
    primary: Primary
    target_kind: str
    _central: freedoor.CentralDoor | None

    def _open(self, compiled: CompiledPipeline) -> tuple[DataSource, Cursor]:
        """The member of the source to read and the stored cursor (the hint)."""
        try:
            known = self.cursor or self.cursors.load()  # where it is: the switch's GTID
            source = self.primary.resolve(known.position if known else None)
            self._still_owner("source resolve")  # (a first start writes the cursor)
            hint = self._start_cursor(compiled, source)
        except (KazooException, ZooKeeperUnavailableError) as exc:  # no ZooKeeper, no start
            # (the catalog's calls say it as ZooKeeperUnavailableError): no failure counted,
            # the node starts it again once ZooKeeper answers (an outage of a minute paused
            # the channel, and left its runner dead on the node that held it)
            raise OwnershipLostError(f"ZooKeeper did not answer reading the position: {exc!r}"
                                     ) from None
        self._still_owner("position read")
        return source, hint

    def _start_cursor(self, compiled: CompiledPipeline, source: DataSource) -> Cursor:
        return start.first_or_stored(self.cursors, self.snapshot_store, self.ctx.pipeline,
                                     source, compiled)

    def _still_owner(self, step: str) -> None:
        """Go on only while this runner should run: a stop or a lost ZooKeeper session while
        it waited on ``step`` ends the start here, before it touches the binlog or a target
        (else a new runner of the same pipeline, started meanwhile, would run beside it)."""
        if self.stop_event.is_set():
            raise OwnershipLostError(f"stopping during {step}")
        if not self.ctx.owns():
            raise OwnershipLostError(f"node {self.ctx.node_id} no longer holds the pipeline "
                                     f"after {step} (ZooKeeper session lost or mainstem taken)")

    def _loader(self, hint: Cursor) -> TargetLoader:
        """The targets' loader of this attempt (its kind kept as :attr:`target_kind`)."""
        pipeline, params = self.ctx.pipeline, self.ctx.pipeline.params
        targets = {pair.target.datasource: self.ctx.sources[pair.target.datasource]
                   for pair in pipeline.pairs}
        channel = self.ctx.channel
        self.target_kind = kinds.kind_of(self.pipeline_id, targets)
        return kinds.loader(self.target_kind, self.pipeline_id, targets, params=params,
                            epoch=self.ctx.epoch, stop=self.stop_event, run=hint.run,
                            two_way=(channel.name, channel.pipelines[0].name ==
                                     pipeline.name) if channel.two_way else None,
                            zk=(self.ctx.client, self.ctx.paths))

    def _resume(self, loader: TargetLoader, source: DataSource, hint: Cursor
                ) -> cursors.Resume:
        """Where Select begins: fenced, then read, where the targets are decides it."""
        rows = {} if self.ctx.pipeline.params.dry_run else self._claim(loader)
        # on this server: nothing the targets hold may be missing from it, and a start
        # of another server's binlog is found by its GTID state
        found, hint, rows = check_held(self.pipeline_id, source, hint, rows)
        resume = held.on_server(self.pipeline_id,
                                cursors.resume(self.pipeline_id, hint, rows),
                                found.server, found.gtid_pos)
        moved = None if resume.cuts else endpoints.after_quiet_purge(
            source, self.pipeline_id, resume.start.position)
        if moved is not None:  # a purged file with nothing since: the oldest kept one's start
            resume = dataclasses.replace(resume, start=dataclasses.replace(
                resume.start, position=moved))
        if resume.behind:
            log.warning("event=target_behind pipeline=%s targets=%s cursor=%s action=replay",
                        self.pipeline_id, ",".join(resume.behind), hint.position)
        if resume.cuts or resume.start != hint:
            log.info("event=pipeline_resumes pipeline=%s hint=%s position=%s "
                     "process_id=%d cuts=%s", self.pipeline_id, hint.position,
                     resume.start.position, resume.start.process_id,
                     ",".join(map(str, resume.cuts)) or "-")
        return resume

    def _claim(self, loader: TargetLoader) -> dict[str, Cursor | None]:
        return start.claim(loader, self.ctx.owns, self.ctx.epoch, self.pipeline_id)

    def _check_source(self, compiled: CompiledPipeline, resume: cursors.Resume,
                      loader: TargetLoader, source: DataSource
                      ) -> tuple[CompiledPipeline, int]:
        """The source checked before Select reads it: the resume position still in its
        binlog, its settings, its tables' keys (read into ``compiled``, returned with the
        replica server id Select connects as), the free door's buffers there."""
        pipeline = self.ctx.pipeline
        server_id = endpoints.replica_server_id(self.pipeline_id)
        start.within_binlog(self.pipeline_id, resume, positions.current_position(source))
        endpoints.check_source(source, self.pipeline_id, server_id,
                               resume.start.position if resume.start.position.file else None)
        compiled = start.with_table_keys(
            compiled, source, pipeline, self.target_kind == "delta",
            subscription=self.target_kind == "subscription")
        kinds.check_source(self.target_kind, compiled, source,
                           two_way=loader.targets if self.ctx.channel.two_way else None,
                           targets=loader.targets)
        freedoor.ensure_buffer(source, self.pipeline_id)
        if self._central is not None and self._central.buffer is not source:
            freedoor.ensure_buffer(self._central.buffer, self.pipeline_id)
        self._still_owner("source connect")
        return compiled, server_id
