"""The definitions stored in ZooKeeper: sources, channels (versioned) and channel status.

An apply is one ZooKeeper transaction: it writes every created or changed definition or
nothing at all. Definitions equal to the stored ones are left alone, so applying the same
file twice changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)

from shared import codec, members, positions, zk
from shared.errors import (
    ConfigError,
    ConflictError,
    CoordinationError,
    NotFoundError,
    SetlError,
    ZooKeeperUnavailableError,
)
from shared.members import PrimaryRecord
from shared.model import Channel, ChannelStatus, DataSource, Definitions
from shared.rpc import model_pb2
from shared.zk import ZkPaths

log = logging.getLogger("setl.catalog")
# kazoo's errors that mean "no answer now", not "refused"
UNAVAILABLE = (ConnectionLoss, OperationTimeoutError, SessionExpiredError, ConnectionClosedError)


@dataclass(frozen=True)
class ChannelRecord:
    channel: Channel
    version: int
    updated_ms: int
    status: ChannelStatus
    status_version: int = -1  # the status znode's version (-1: none stored, read as STOP)


@dataclass(frozen=True)
class Change:
    kind: str  # source | channel
    name: str
    action: str  # created | updated | unchanged
    version: int


def _now_ms() -> int:
    return int(time.time() * 1000)


def call(what: str, func, *args, **kwargs):  # type: ignore[no-untyped-def]
    """``func(*args, **kwargs)`` with kazoo's errors translated (the expected NoNode,
    NodeExists and BadVersion pass through for the caller to handle)."""
    try:
        return func(*args, **kwargs)
    except (NoNodeError, NodeExistsError, BadVersionError):
        raise
    except UNAVAILABLE as exc:
        raise ZooKeeperUnavailableError(
            f"ZooKeeper did not answer to {what} ({_named(exc)}); check that it is up, then "
            "retry") from None
    except KazooException as exc:
        raise CoordinationError(f"ZooKeeper failed to {what}: {_named(exc)}. "
                                "Check that ZooKeeper is up and retry") from None


def _named(exc: Exception) -> str:
    """kazoo's error by its name, and its text when it has one (ConnectionLoss has none)."""
    return f"{type(exc).__name__} {exc}".strip()


def sources_used(channel: Channel) -> set[str]:
    """Every source a channel names: its pipelines' ends, its pairs' data sources (shard
    targets among them) and a free door's source — the sources that must be defined for
    it, and that cannot be deleted while it exists. A runner is given fewer
    (:func:`node.supervisor.sources_of`: the ones it connects to), on purpose."""
    used = set()
    for pipeline in channel.pipelines:
        used |= {pipeline.source, pipeline.target, pipeline.params.free_door_source}
        for pair in pipeline.pairs:
            used |= {pair.source.datasource, pair.target.datasource}
    return used - {""}


class Catalog:
    def __init__(self, client: KazooClient, paths: ZkPaths) -> None:
        self.client, self.paths = client, paths

    def _call(self, what: str, func, *args, **kwargs):  # type: ignore[no-untyped-def]
        return call(what, func, *args, **kwargs)

    def ensure_layout(self) -> None:
        for path in (self.paths.sources, self.paths.channels, self.paths.channel_states,
                     self.paths.nodes):
            self._call("create the setl layout", self.client.ensure_path, path)

    # -- sources --------------------------------------------------------------------------
    def source_names(self) -> list[str]:
        try:
            return sorted(self._call("list sources", self.client.get_children, self.paths.sources))
        except NoNodeError:
            return []

    def source(self, name: str) -> DataSource:
        try:
            data, _ = self._call("read a source", self.client.get, self.paths.source(name))
        except NoNodeError:
            raise NotFoundError(f"no source named {name!r}; apply a file that defines it") from None
        source = codec.from_proto(codec.source_from_bytes(data).source, DataSource)
        if source.hosts:  # a replica set: the member that is its primary now
            record, _ = self.primary(name)
            if record is not None and record.member in source.hosts:
                source = members.at(source, record.member)
        return source

    def primary(self, name: str) -> tuple[PrimaryRecord | None, int]:
        """Where a replica-set source switched to last (None: never), with the record's
        version (-1 when there is none) for :meth:`set_primary`."""
        try:
            data, stat = self._call("read a source's primary", self.client.get,
                                    self.paths.primary(name))
        except NoNodeError:
            return None, -1
        return PrimaryRecord.from_json(data), stat.version

    def set_primary(self, name: str, record: PrimaryRecord, version: int) -> bool:
        """Store the source's new primary unless someone stored another since ``version``
        was read; whether it was stored."""
        try:
            if version < 0:
                self._call("store a source's primary", self.client.create,
                           self.paths.primary(name), record.to_json(), makepath=True)
            else:
                self._call("store a source's primary", self.client.set,
                           self.paths.primary(name), record.to_json(), version=version)
        except (NodeExistsError, BadVersionError):
            return False
        log.info("event=source_primary_stored source=%s member=%s from=%s by=%s gtid=%s",
                 name, record.member, record.previous or "-", record.by, record.gtid or "-")
        return True

    def source_versions(self) -> dict[str, int]:
        """Each stored source's definition version (it moves with each apply that changes
        the source: host, port, user, ...; never with a switch of its primary)."""
        found = {}
        for name in self.source_names():
            try:
                data, _ = self._call("read a source", self.client.get, self.paths.source(name))
            except NoNodeError:
                continue  # deleted between list and read
            found[name] = codec.source_from_bytes(data).version
        return found

    def sources(self) -> list[DataSource]:
        found = []
        for name in self.source_names():
            try:
                found.append(self.source(name))
            except NotFoundError:
                continue  # deleted between list and read
        return found

    def delete_source(self, name: str) -> None:
        """Delete a source no channel uses. Every channel is checked unchanged in the same
        transaction, and so is the channels folder, whose version every apply that creates a
        channel bumps; an apply checks that the sources its channels use still exist. So
        neither can slip past the other."""
        self.ensure_layout()
        self.source(name)  # raises NotFoundError
        transaction, users = self.client.transaction(), []
        folder = self._call("read the channels folder", self.client.exists, self.paths.channels)
        transaction.check(self.paths.channels, folder.version if folder else -1)
        for channel in self.channel_names():
            try:
                data, stat = self._call("read a channel", self.client.get,
                                        self.paths.channel(channel))
            except NoNodeError:
                continue
            used = sources_used(codec.from_proto(codec.channel_from_bytes(data).channel,
                                                 Channel))
            if name in used:
                users.append(channel)
            transaction.check(self.paths.channel(channel), stat.version)
        if users:
            raise ConflictError(f"source {name!r} is used by channel(s) {', '.join(users)}; "
                                "delete those channels (or change them to another source) "
                                "first")
        transaction.delete(self.paths.source(name))
        self._commit(transaction, f"delete source {name}")
        log.info("event=source_deleted source=%s", name)

    # -- channels -------------------------------------------------------------------------
    def channel_names(self) -> list[str]:
        try:
            return sorted(self._call("list channels", self.client.get_children,
                                     self.paths.channels))
        except NoNodeError:
            return []

    def channel(self, name: str) -> ChannelRecord:
        try:
            data, _ = self._call("read a channel", self.client.get, self.paths.channel(name))
        except NoNodeError:
            raise NotFoundError(f"no channel named {name!r}; see 'setl channel list'") from None
        stored = codec.channel_from_bytes(data)
        return ChannelRecord(codec.from_proto(stored.channel, Channel), stored.version,
                             stored.updated_ms, *self.status_at(name))

    def channels(self) -> list[ChannelRecord]:
        records = []
        for name in self.channel_names():
            try:
                records.append(self.channel(name))
            except NotFoundError:
                continue  # deleted between list and read
        return records

    def status(self, name: str) -> ChannelStatus:
        return self.status_at(name)[0]

    def status_at(self, name: str) -> tuple[ChannelStatus, int]:
        """The channel's status with its znode's version (STOP and -1 when none is stored),
        for :meth:`set_status_over`."""
        try:
            data, stat = self._call("read a channel status", self.client.get,
                                    self.paths.channel_status(name))
        except NoNodeError:
            return ChannelStatus.STOP, -1
        return ChannelStatus(data.decode()), stat.version

    def set_status(self, name: str, status: ChannelStatus) -> ChannelRecord:
        record = self.channel(name)  # raises NotFoundError
        if status is ChannelStatus.START:
            self.fix_starts(record.channel)
        path = self.paths.channel_status(name)
        try:
            self._call("set a channel status", self.client.set, path, status.value.encode())
        except NoNodeError:
            self._call("set a channel status", self.client.create, path, status.value.encode(),
                       makepath=True)
        log.info("event=channel_status channel=%s status=%s", name, status.value)
        return self.channel(name)

    def set_status_over(self, name: str, status: ChannelStatus, version: int) -> None:
        """Write ``status`` over ``version`` of the channel's status znode only (START, which
        also fixes starts, goes through :meth:`set_status`). BadVersionError when another
        status was written since, or the channel went: someone else decided. A write whose
        answer was lost and that landed counts as written."""
        data = status.value.encode()
        self._call("set a channel status", zk.write_over, self.client,
                   self.paths.channel_status(name), data, version, data)
        log.info("event=channel_status channel=%s status=%s over_version=%d", name,
                 status.value, version)

    def fix_starts(self, channel: Channel) -> None:
        """Each pipeline that has no cursor yet gets its first one now, before the channel's
        status says START (``start: latest`` is this moment: see :mod:`shared.positions`)."""
        for pipeline in channel.pipelines:
            pipeline_id = channel.pipeline_id(pipeline)
            fixed = self._call("fix a pipeline's start", positions.fix_start, self.client,
                               self.paths.cursor(pipeline_id), pipeline,
                               self.source(pipeline.source))
            if fixed is not None:
                log.info("event=pipeline_start_fixed pipeline=%s position=%s startup=%s",
                         pipeline_id, fixed.position, pipeline.params.startup.value.lower())

    def delete_channel(self, name: str) -> None:
        record = self.channel(name)
        if record.status is not ChannelStatus.STOP:
            raise ConflictError(f"channel {name!r} is {record.status.value}; stop it first: "
                                f"setl channel stop {name}")
        transaction = self.client.transaction()
        transaction.delete(self.paths.channel(name))
        self._commit(transaction, f"delete channel {name}")
        self._call("delete channel state", self.client.delete, self.paths.channel_state(name),
                   recursive=True)
        for pipeline in record.channel.pipelines:
            pipeline_path = self.paths.pipeline(record.channel.pipeline_id(pipeline))
            self._call("delete pipeline state", self.client.delete, pipeline_path,
                       recursive=True)
        log.info("event=channel_deleted channel=%s", name)

    # -- apply ----------------------------------------------------------------------------
    def apply(self, definitions: Definitions, dry_run: bool = False,
              requests: Callable[[str, int], list[tuple[str, bytes]]] | None = None
              ) -> list[Change]:
        """Store what differs from ZooKeeper in one transaction; return what changed.
        ``requests(channel, version)``: sequential znodes (path prefix, data) created in the
        same transaction for a channel updated to ``version`` (the copies its new definition
        asks for): stored together with it, or not at all."""
        self.ensure_layout()
        now, changes = _now_ms(), []
        transaction = self.client.transaction()
        for source in definitions.sources:
            stored = model_pb2.StoredSource(source=codec.to_proto(source), updated_ms=now)
            changes.append(self._stage(transaction, "source", source.name,
                                       self.paths.source(source.name), stored, stored.source))
        defined = {source.name for source in definitions.sources}
        for used in sorted({name for channel in definitions.channels
                            for name in sources_used(channel)} - defined):
            transaction.check(self.paths.source(used), -1)  # not deleted meanwhile
        for channel in definitions.channels:
            stored_channel = model_pb2.StoredChannel(channel=codec.to_proto(channel),
                                                     updated_ms=now)
            change = self._stage(transaction, "channel", channel.name,
                                 self.paths.channel(channel.name), stored_channel,
                                 stored_channel.channel)
            if change.action == "created":
                # a source delete under way sees the folder changed (channels are its children)
                transaction.set_data(self.paths.channels, b"")
                transaction.create(self.paths.channel_state(channel.name), b"")
                transaction.create(self.paths.channel_status(channel.name),
                                   ChannelStatus.STOP.value.encode())
            if requests is not None and change.action == "updated" and not dry_run:
                asked = requests(channel.name, change.version)
                _fits(channel.name, asked)
                for prefix, data in asked:
                    self._call("make a copy request folder", self.client.ensure_path,
                               prefix.rsplit("/", 1)[0])
                    transaction.create(prefix, data, sequence=True)
            changes.append(change)
        if not dry_run and any(change.action != "unchanged" for change in changes):
            self._commit(transaction, "store definitions")
            for change in changes:
                log.info("event=definition_%s kind=%s name=%s version=%d", change.action,
                         change.kind, change.name, change.version)
        return changes

    def _stage(self, transaction, kind: str, name: str, path: str, stored, body) -> Change:  # type: ignore[no-untyped-def]
        """Add the write of one definition to ``transaction`` if it differs from ZooKeeper."""
        try:
            data, stat = self._call(f"read {kind} {name}", self.client.get, path)
        except NoNodeError:
            stored.version = 1
            transaction.create(path, stored.SerializeToString(deterministic=True))
            return Change(kind, name, "created", 1)
        previous = type(stored)()
        previous.ParseFromString(data)
        old_body = getattr(previous, kind)
        if old_body.SerializeToString(deterministic=True) == \
                body.SerializeToString(deterministic=True):
            transaction.check(path, stat.version)
            return Change(kind, name, "unchanged", previous.version)
        stored.version = previous.version + 1
        transaction.set_data(path, stored.SerializeToString(deterministic=True), stat.version)
        return Change(kind, name, "updated", stored.version)

    def _commit(self, transaction, what: str) -> None:  # type: ignore[no-untyped-def]
        results = self._call(what, transaction.commit)
        failures = [result for result in results if isinstance(result, Exception)]
        if not failures:
            return
        if any(isinstance(failure, BadVersionError | NodeExistsError | NoNodeError)
               for failure in failures):
            raise ConflictError(f"definitions changed while trying to {what}; try again")
        raise SetlError(f"ZooKeeper refused to {what}: {failures[0]!r}")


# bytes of copy requests one apply's transaction may carry beside the definitions: ZooKeeper
# refuses a request over jute.maxbuffer (1 MiB by default), and the definition would not be
# stored at all
REQUESTS_BUDGET = 600_000


def _fits(channel: str, asked: list[tuple[str, bytes]]) -> None:
    """Refuse (:class:`ConfigError`) copy requests too large for the transaction that stores
    their channel's definition with them (a few thousand tables of a pattern pair added at
    once)."""
    size = sum(len(prefix) + len(data) + 64 for prefix, data in asked)
    if size > REQUESTS_BUDGET:
        most = max(1, len(asked) * REQUESTS_BUDGET // size)
        raise ConfigError(
            f"channel {channel}: this apply asks for copies of {len(asked):,} tables, more "
            f"than ZooKeeper takes in the one transaction that stores the definition with "
            f"them (about {most:,}); nothing was stored. Add the new tables in parts (a "
            "pattern pair that matches fewer of them, then the rest), each apply copying "
            "its own")
