"""Which server a pipeline reads: its source's primary, followed across a switchover.

A source that names a replica set (``hosts:``) is read from its primary, the member stored
in ZooKeeper (:meth:`shared.catalog.Catalog.primary`; the first member until a switch).
When the runner (re)starts and that member does not answer, or answers read-only, for
``switch_after_s``, it finds the new primary (:func:`shared.members.find_primary`), stores
it, and goes on there; until then the start is retried without counting as a failure.

On any server the pipeline resumes from the GTID state its positions carry, checked first
against what that server holds (:mod:`node.held`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient

from shared import members
from shared.catalog import Catalog
from shared.errors import SourceError
from shared.members import PrimaryRecord
from shared.model import BinlogPosition, DataSource

log = logging.getLogger("setl.node.primary")


class SwitchPending(SourceError):
    """The source's primary is lost and setl waits before it switches (or for a member to
    become the primary, or to catch up): the start is tried again, not counted as failed."""


class Primary:
    """The member a runner reads, and the switches it made or saw."""

    def __init__(self, catalog: Catalog, name: str, pipeline_id: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.catalog, self.name, self.pipeline_id, self.clock = catalog, name, pipeline_id, clock
        self.in_use = ""  # host:port of the member read now ("" before the first start)
        self.record: PrimaryRecord | None = None
        self.switches = 0
        self._lost_since: float | None = None

    def resolve(self, at: BinlogPosition | None) -> DataSource:
        """The source as the member to read now; raises :class:`SwitchPending` while the
        primary is lost and the wait is not over, or no member can take its place."""
        for _ in range(3):  # a switch stored by another node meanwhile is taken
            source = self.catalog.source(self.name)
            if not source.hosts:
                self.in_use = members.address(source)
                return source
            self.record, version = self.catalog.primary(self.name)
            current = members.address(source)
            found = members.probe(source)
            if members.usable(source, found):
                self._lost_since = None
                self._note(current)
                return source
            now = self.clock()
            since = self._lost_since = self._lost_since if self._lost_since is not None else now
            why = found.error or "is read-only (read_only = ON)"
            if now - since < source.switch_after_s:
                raise SwitchPending(
                    f"pipeline {self.pipeline_id}: source {self.name}'s primary {current} "
                    f"{why}; setl switches to the member that is the primary if it stays so "
                    f"{source.switch_after_s - (now - since):.0f} s more")
            new, probes = members.find_primary(source)
            if new is None or members.address(new) == current:
                raise SwitchPending(
                    f"pipeline {self.pipeline_id}: source {self.name}'s primary {current} "
                    f"{why}, and no other member can take its place ({members.said(probes)});"
                    " waiting for one (promote a replica: STOP SLAVE; RESET SLAVE ALL; SET "
                    "GLOBAL read_only = OFF)")
            if any(p.member == members.address(new) and p.replicating for p in probes):
                raise SwitchPending(  # a replica left writable is not promoted
                    f"pipeline {self.pipeline_id}: source {self.name}'s primary {current} "
                    f"{why}; {members.address(new)} is writable but still replicates from "
                    "another server, so it is no primary yet (it may lack transactions, "
                    "and the old primary may come back): waiting for it to be promoted "
                    "(STOP SLAVE; RESET SLAVE ALL), or name the primary: setl source switch "
                    f"{self.name} --to HOST:PORT")
            members.refuse_unsafe(source, next(p for p in probes if p.member ==
                                               members.address(new)), "setl would switch to")
            record = PrimaryRecord(members.address(new), current, int(time.time() * 1000),
                                   at.gtid if at else "", "auto")
            if self.catalog.set_primary(self.name, record, version):
                log.warning("event=source_switched pipeline=%s source=%s from=%s to=%s gtid=%s "
                            "by=auto reason=%r", self.pipeline_id, self.name, current,
                            record.member, record.gtid or "-", why)
                self.record, self._lost_since = record, None
                self._note(record.member)
                return new
        raise SwitchPending(f"pipeline {self.pipeline_id}: source {self.name}'s primary "
                            "changed three times while this node looked: trying again")

    def _note(self, member: str) -> None:
        if self.in_use and member != self.in_use:
            self.switches += 1
        self.in_use = member

    def watch(self, client: KazooClient, path: str, source: DataSource,
              stop: threading.Event, moved: Callable[[], None]) -> None:
        """Call ``moved`` once when the member read stops being the primary while the runner
        runs: the stored primary moved (``path``), or the member was demoted and left up."""
        watch_moves(client, path, self.pipeline_id, self.in_use, source.hosts, stop, moved)
        watch_demotion(source, self.pipeline_id, stop, moved)

    def describe(self) -> str:
        """What status shows of the last switch ('' when none)."""
        return self.record.describe() if self.record is not None else ""


def watch_moves(client: KazooClient, path: str, pipeline_id: str, in_use: str,
                hosts: tuple[str, ...], stop: threading.Event,
                moved: Callable[[], None]) -> None:
    """Call ``moved`` once when the source's stored primary (``path``) names another of its
    ``hosts`` than ``in_use``; the watch ends then, or when ``stop`` is set."""
    def changed(data: bytes | None, stat: object) -> bool:
        if stop.is_set():
            return False  # the run it watched for is over
        if data:
            member = PrimaryRecord.from_json(data).member
            if member != in_use and member in hosts:
                log.warning("event=source_primary_moved pipeline=%s from=%s to=%s",
                            pipeline_id, in_use, member)
                moved()
                return False
        return True
    client.DataWatch(path, changed)


DEMOTION_PROBE_S = 5.0  # at most this often a running pipeline asks its member if it is primary


def watch_demotion(source: DataSource, pipeline_id: str, stop: threading.Event,
                   moved: Callable[[], None]) -> None:
    """Call ``moved`` once when the member read answers read-only while another member is
    the primary: an HA tool failed over and left the old primary up (isolated, or demoted
    and not pointed at the new one). Its binlog connection does not break, so nothing else
    would tell: the stream would stay on it, idle and green, and the new primary's writes
    would never come. A member that does not answer is the binlog connection's to find."""
    if not source.hosts or source.primary == "order":
        return

    def probe() -> None:
        every, seen = max(DEMOTION_PROBE_S, float(source.switch_after_s)), 0
        while not stop.wait(every):
            found = members.probe(source)
            if not (found.answers and found.read_only):
                seen = 0
                continue
            try:
                new, _ = members.find_primary(source)
            except SourceError:  # two writable members: the runner's start says it
                new = None
            if new is None or members.address(new) == members.address(source):
                seen = 0
                continue
            seen += 1  # twice in a row: a planned switch ('setl source switch') goes first
            if seen >= 2:
                log.warning("event=source_primary_demoted pipeline=%s member=%s primary=%s",
                            pipeline_id, members.address(source), members.address(new))
                moved()
                return

    threading.Thread(target=probe, name=f"demotion-{pipeline_id}", daemon=True).start()
