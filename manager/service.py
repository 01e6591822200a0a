"""The gRPC ``ManagerService``: a thin adapter from requests to the catalog and views.

Reads are served by every manager; changes only by the leader (a standby answers
FAILED_PRECONDITION with the leader's address in the ``setl-leader`` trailer, and the CLI
follows it). SetlErrors become gRPC status codes with their message; nothing else leaks.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from manager import heldrows, positions, startcheck, subscribe, verify
from manager.client import Access
from manager.election import LeaderElection
from manager.handover import handovers
from manager.monitor import Monitor
from manager.positions import Positions
from manager.snapshots import Snapshots
from manager.switch import switch_source
from manager.views import Views
from shared import codec, confinement, definitions, rawstreams, rpcserver, tablekeys
from shared import positions as positions_of
from shared.catalog import Catalog, call
from shared.errors import (
    ConfigError,
    ConflictError,
    CoordinationError,
    NodeCallError,
    NotFoundError,
    NotLeaderError,
    PermissionDeniedError,
    SetlError,
    StartRefusedError,
    SubscriptionMovedError,
    VerifyError,
    ZooKeeperUnavailableError,
)
from shared.model import BinlogPosition, Channel, ChannelStatus
from shared.rpc import manager_pb2, manager_pb2_grpc, model_pb2, subscription_pb2
from shared.snapshotctl import SnapshotControl

log = logging.getLogger("setl.manager.service")
LEADER_TRAILER = "setl-leader"
_CODES: list[tuple[type[SetlError], grpc.StatusCode]] = [
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (ConflictError, grpc.StatusCode.ABORTED),
    (NotLeaderError, grpc.StatusCode.FAILED_PRECONDITION),
    (StartRefusedError, grpc.StatusCode.FAILED_PRECONDITION),
    (ConfigError, grpc.StatusCode.INVALID_ARGUMENT),
    # not UNAVAILABLE: to the CLI that means "this manager is down, try another"
    (CoordinationError, grpc.StatusCode.FAILED_PRECONDITION),
    (VerifyError, grpc.StatusCode.FAILED_PRECONDITION),
    (SubscriptionMovedError, grpc.StatusCode.ABORTED),  # a reader connects again
    (PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),  # (a reader's token)
]


def _abort(exc: SetlError, context: grpc.ServicerContext) -> None:
    code = next((code for kind, code in _CODES if isinstance(exc, kind)),
                grpc.StatusCode.INTERNAL)
    if isinstance(exc, NotLeaderError) and exc.leader:
        context.set_trailing_metadata(((LEADER_TRAILER, exc.leader),))
    context.abort(code, str(exc))


def _rpc(func: Callable[..., Any]) -> Callable[..., Any]:
    """Translate SetlError into a gRPC status; log anything unexpected once."""
    @functools.wraps(func)
    def wrapper(self: ManagerServicer, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return func(self, request, context)
        except SetlError as exc:
            _abort(exc, context)
        except Exception:
            log.exception("event=rpc_failed method=%s", func.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"{func.__name__} failed unexpectedly; "
                          "see the manager's log")
    return wrapper


class ManagerServicer(manager_pb2_grpc.ManagerServiceServicer):
    def __init__(self, catalog: Catalog, views: Views, election: LeaderElection,
                 address: str, monitor: Monitor | None = None,
                 node_access: Access | None = None,
                 readers: rpcserver.Readers | None = None) -> None:
        self.catalog, self.views, self.election, self.address = catalog, views, election, address
        self.readers = readers or rpcserver.Readers(24, "this manager")
        self.node_access = node_access or Access()  # how verify reaches the nodes
        self.monitor = monitor  # alarms, as this manager shows them
        self.web_url = ""
        self.snapshots = Snapshots(views.client, views.paths, catalog, views)
        self.positions = Positions(views.client, views.paths, catalog)

    def _require_leader(self) -> None:
        if not self.election.is_leader:
            raise NotLeaderError(self.election.leader_address())

    def _winner_moved(self, before: Channel, after: Channel) -> str:
        """Why a two-way channel's pipelines may not change places now ('' when they may):
        the first pipeline wins conflicts, and while its runners take the new definition one
        after the other, both sides could take themselves for the winner (each keeping the
        other's row). Stopped, nothing runs between the two definitions."""
        old, new = [p.name for p in before.pipelines], [p.name for p in after.pipelines]
        if not (before.two_way and after.two_way) or old[0] == new[0] or \
                self.catalog.status(after.name) is ChannelStatus.STOP:
            return ""
        return (f"channel {after.name}: pipeline {new[0]} would be first, and win conflicts, "
                f"in place of {old[0]} while the channel runs: while its pipelines take the "
                "new definition one after the other both sides could win, and keep each "
                f"other's row. Stop the channel (setl channel stop {after.name}), apply, then "
                "start it; or keep the pipelines' order")

    @_rpc
    def Apply(self, request: manager_pb2.ApplyRequest, context: Any) -> manager_pb2.ApplyResponse:
        if not request.dry_run:
            self._require_leader()
        try:
            known = {source.name: source.type or "mysql" for source in self.catalog.sources()}
            parsed = definitions.load_text(request.yaml, request.file or "<apply>", known,
                                           confinement.current())
        except ConfigError as exc:
            return manager_pb2.ApplyResponse(errors=[str(issue) for issue in exc.issues])
        noted: list[str] = []  # (key columns a D by key alone may not compute: keyfillers)
        refused = tablekeys.keyless_tables(parsed, self.catalog.source, noted)
        before = {record.channel.name: record.channel for record in self.catalog.channels()}
        refused += [problem for channel in parsed.channels if channel.name in before
                    for problem in self.snapshots.moved_shards(before[channel.name], channel)]
        refused += [problem for channel in parsed.channels if channel.name in before
                    if (problem := self._winner_moved(before[channel.name], channel))]
        defined = {source.name: source for source in parsed.sources}
        handed = handovers(before, parsed.channels, self._has_run, self.catalog.status,
                           lambda name: defined.get(name) or self.catalog.source(name),
                           self._stopped_at)
        refused += handed.refused
        if refused:
            return manager_pb2.ApplyResponse(errors=[f"{request.file or '<apply>'}: {problem}"
                                                     for problem in refused])
        # tables written to new targets are copied: the copies are asked in the transaction
        # that stores the definition (stored with it or not at all, never the one alone)
        asks: dict[str, list[tuple[SnapshotControl, str, str]]] = {}
        said: list[tuple[str, str]] = []
        if not request.dry_run:
            for channel in parsed.channels:
                if channel.name in before and before[channel.name] != channel:
                    asks[channel.name] = []
                    said += [(channel.name, line) for line in self.snapshots.copy_added(
                        before[channel.name], channel, asks=asks[channel.name])]
        changes = self.catalog.apply(
            parsed, dry_run=request.dry_run, requests=lambda name, version: [
                control.request(schema, table, version=version)
                for control, schema, table in asks.get(name, [])])
        notes: list[str] = []
        if not request.dry_run:
            for name, line in said:
                log.info("event=snapshot_added channel=%s detail=%s", name, line)
                notes.append(line)
            for channel in parsed.channels:
                if self.catalog.status(channel.name) is not ChannelStatus.STOP:
                    self._fix_starts(channel)
        return manager_pb2.ApplyResponse(changes=[
            manager_pb2.Change(kind=c.kind, name=c.name, action=c.action, version=c.version)
            for c in changes], notes=notes + [f"{request.file or '<apply>'}: {note}"
                                              for note in noted] + handed.notes +
            self._starts_ignored(before, parsed.channels))

    def _has_run(self, pipeline_id: str) -> bool:
        return bool(call("read a pipeline cursor", self.views.client.exists,
                         self.views.paths.cursor(pipeline_id)))

    def _stopped_at(self, pipeline_id: str) -> BinlogPosition | None:
        """Where a pipeline's cursor stands (None: it has none)."""
        stored = call("read a pipeline cursor", positions_of.load, self.views.client,
                      self.views.paths.cursor(pipeline_id))
        return None if stored is None else stored.position

    def _fix_starts(self, channel: Channel) -> None:
        """A pipeline added to a running channel starts at this apply ('start: latest'), not
        when a node gets to it; a source the manager cannot reach now leaves that to the
        node's start, as before."""
        try:
            self.catalog.fix_starts(channel)
        except SetlError as exc:
            log.warning("event=pipeline_start_not_fixed channel=%s error=%r", channel.name,
                        str(exc))

    def _starts_ignored(self, before: dict[str, Channel], channels: list[Channel]
                        ) -> list[str]:
        """An edited start: of a pipeline that already has a cursor does not move it."""
        notes = []
        for channel in channels:
            old = {p.name: p for p in before[channel.name].pipelines} \
                if channel.name in before else {}
            for pipeline in channel.pipelines:
                was = old.get(pipeline.name)
                if was is None or (was.params.startup, was.params.start_position) == \
                        (pipeline.params.startup, pipeline.params.start_position):
                    continue
                pipeline_id = channel.pipeline_id(pipeline)
                stored = self._stopped_at(pipeline_id)
                if stored is not None:
                    notes.append(
                        f"pipeline {pipeline_id}: the new start: does not move it, it goes "
                        f"on from {stored}; to start elsewhere: setl channel stop "
                        f"{channel.name} --wait, then setl position set {channel.name}/"
                        f"{pipeline.name} --file F --pos P (or --gtid G, --latest)")
        return notes

    @_rpc
    def GetSource(self, request: manager_pb2.GetSourceRequest,
                  context: Any) -> model_pb2.DataSource:
        return codec.to_proto(self.catalog.source(request.name))

    @_rpc
    def ListSources(self, request: Any, context: Any) -> manager_pb2.ListSourcesResponse:
        return manager_pb2.ListSourcesResponse(
            sources=[codec.to_proto(source) for source in self.catalog.sources()])

    @_rpc
    def DeleteSource(self, request: manager_pb2.DeleteSourceRequest,
                     context: Any) -> manager_pb2.DeleteSourceResponse:
        self._require_leader()
        self.catalog.delete_source(request.name)
        return manager_pb2.DeleteSourceResponse(name=request.name)

    @_rpc
    def SwitchSource(self, request: manager_pb2.SwitchSourceRequest,
                     context: Any) -> manager_pb2.SwitchSourceResponse:
        self._require_leader()
        record = switch_source(self.catalog, request.name, request.to)
        return manager_pb2.SwitchSourceResponse(name=request.name, member=record.member,
                                                previous=record.previous, gtid=record.gtid)

    @_rpc
    def Snapshot(self, request: manager_pb2.SnapshotRequest,
                 context: Any) -> manager_pb2.SnapshotResponse:
        if (request.action or "start") != "status":
            self._require_leader()
        return self.snapshots.handle(request)

    @_rpc
    def Positions(self, request: manager_pb2.PositionsRequest,
                  context: Any) -> manager_pb2.PositionsResponse:
        if (request.action or "show") != "show":
            self._require_leader()
        return self.positions.handle(request)

    @_rpc
    def ListChannels(self, request: Any, context: Any) -> manager_pb2.ListChannelsResponse:
        return manager_pb2.ListChannelsResponse(channels=self.views.channels())

    @_rpc
    def GetChannel(self, request: manager_pb2.GetChannelRequest,
                   context: Any) -> manager_pb2.ChannelInfo:
        return self.views.channel(self.catalog.channel(request.name))

    @_rpc
    def SetChannelStatus(self, request: manager_pb2.SetChannelStatusRequest,
                         context: Any) -> manager_pb2.ChannelInfo:
        self._require_leader()
        name = model_pb2.ChannelStatus.Name(request.status).removeprefix("CHANNEL_STATUS_")
        if name not in ChannelStatus.__members__:
            raise ConfigError(f"unknown channel status {request.status}; use START, PAUSE or STOP")
        if name == "START":  # the checks of setl check: a broken database is said now
            channel = self.catalog.channel(request.name).channel
            startcheck.refuse_shared(self.catalog, channel)
            startcheck.refuse_broken(self.catalog, channel)
            heldrows.refuse_earlier(self.views.client, self.views.paths, channel)
        return self.views.channel(self.catalog.set_status(request.name, ChannelStatus[name]))

    @_rpc
    def DeleteChannel(self, request: manager_pb2.DeleteChannelRequest,
                      context: Any) -> manager_pb2.DeleteChannelResponse:
        self._require_leader()
        channel = self.catalog.channel(request.name).channel
        self.catalog.delete_channel(request.name)
        try:
            left = positions.on_targets(self.catalog, channel, request.purge_positions)
        except SetlError as exc:  # deleted all the same: say what could not be looked at
            left = [f"position rows on its targets not looked at: {exc}"]
        return manager_pb2.DeleteChannelResponse(name=request.name, positions=left)

    @_rpc
    def ListNodes(self, request: Any, context: Any) -> manager_pb2.ListNodesResponse:
        return manager_pb2.ListNodesResponse(nodes=self.views.nodes())

    @_rpc
    def Status(self, request: Any, context: Any) -> manager_pb2.StatusResponse:
        nodes = self.views.nodes()
        return manager_pb2.StatusResponse(
            manager_address=self.address, leader=self.election.is_leader,
            leader_address=self.election.leader_address() or "",
            channels=self.views.channels(nodes), nodes=nodes,
            alarms=self.monitor.alarms() if self.monitor else [], web_url=self.web_url)

    def Verify(self, request: manager_pb2.VerifyRequest,
               context: Any) -> Iterator[manager_pb2.VerifyProgress]:
        """The progress and reports of the node running each pipeline."""
        yield from self._forwarded("Verify", context, lambda: verify.forward(
            self.catalog, self.views, self.views.client, self.views.paths, request, context,
            self.node_access))

    def Subscribe(self, requests: Iterator[subscription_pb2.SubscribeRequest],
                  context: Any) -> Iterator[bytes]:
        """A subscription's batches from the node that runs it, as the bytes it sent (the
        method is served raw: :func:`add`). ZooKeeper not answering the manager is
        UNAVAILABLE here: the reader connects again (and gives up after its give_up_s)."""
        with self.readers.held(context):
            yield from self._forwarded("Subscribe", context, lambda: subscribe.relay(
                self.catalog, self.views, self.views.client, self.views.paths, requests,
                context, self.node_access), again=(ZooKeeperUnavailableError,))

    def _forwarded(self, method: str, context: Any, stream: Callable[[], Iterator[Any]],
                   again: tuple[type[SetlError], ...] = ()) -> Iterator[Any]:
        """A stream the leader relays from a node: errors are translated as they come, also
        once messages went out; those of ``again`` become UNAVAILABLE (worth another try)."""
        try:
            self._require_leader()
            yield from stream()
        except NodeCallError as exc:  # the node's own answer, as it gave it
            context.abort(grpc.StatusCode[exc.code], str(exc))
        except again as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{exc} (the reader connects again)")
        except SetlError as exc:
            _abort(exc, context)
        except Exception:
            log.exception("event=rpc_failed method=%s", method)
            context.abort(grpc.StatusCode.INTERNAL, f"{method} failed unexpectedly; see the "
                          "manager's log")

def add(servicer: ManagerServicer, server: grpc.Server) -> None:
    """The service on ``server``; Subscribe relays its batches' bytes unchanged."""
    rawstreams.add(manager_pb2_grpc.add_ManagerServiceServicer_to_server, servicer, server,
                   {"Subscribe"})
