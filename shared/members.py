"""A source that is a replica set: its members, and which of them is the primary.

A source may name several hosts (``hosts: [db1:3306, db2:3306]``); setl reads the binlog of
one of them, the primary. Which member that is, is kept in ZooKeeper
(:meth:`shared.catalog.Catalog.primary`) so the manager and every node use the same one;
when it is lost, a node finds the new one here (:func:`find_primary`):

- ``primary: read_only`` (the default): the one member that answers with ``read_only = OFF``.
  Two writable members are never guessed between: that stops with the fix to run.
- ``primary: order``: the first member, in the order listed, that answers.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass

import pymysql

from shared.endpoint import connect, server_answered
from shared.errors import PositionLostError, SourceError
from shared.model import DataSource
from shared.positions import server_identity

log = logging.getLogger("setl.members")
FINDERS = {"read_only": "the member with read_only = OFF",
           "order": "the first member, in the order listed, that answers"}
PROBE_TIMEOUT_S = 3


def split(text: str) -> tuple[str, int]:
    """host and port of ``host:port`` (``[v6]:port``; 3306 when no port is given; -1 for a
    port that is not a number)."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else "3306"
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, "3306"
    return host, int(port) if port.isdigit() else -1


def normal(text: str) -> str:
    host, port = split(text)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def problem(text: str) -> str | None:
    """What is wrong with a member's text (None: nothing)."""
    host, port = split(text)
    if not host or any(c.isspace() or c in "/@?#" for c in host):
        return f"{text!r} is not host:port"
    if not 1 <= port <= 65535:
        return f"{text!r}: the port must be between 1 and 65535"
    return None


def address(source: DataSource) -> str:
    if source.type == "delta":
        return source.location  # a lake: where its tables are
    if source.type == "subscription":
        return "(read with setl subscribe)"
    host = source.host
    return f"[{host}]:{source.port}" if ":" in host else f"{host}:{source.port}"


def each(source: DataSource) -> tuple[DataSource, ...]:
    """The source as each of its members (itself when it names no replica set)."""
    return tuple(at(source, member) for member in source.hosts) or (source,)


def at(source: DataSource, member: str) -> DataSource:
    """The source as its member ``member`` (host:port); refuses a host that is no member."""
    wanted = normal(member)
    if source.hosts and wanted not in source.hosts:
        raise SourceError(f"source {source.name}: {member} is not one of its hosts "
                          f"({', '.join(source.hosts)}); add it to the source's hosts first")
    host, port = split(wanted)
    return dataclasses.replace(source, host=host, port=port)


@dataclass(frozen=True)
class PrimaryRecord:
    """A source's primary as stored in ZooKeeper: the member, the one before it, when and
    at which GTID state setl switched, and who switched (``auto``: a node that lost the
    old primary; ``manual``: setl source switch)."""

    member: str
    previous: str = ""
    at_ms: int = 0
    gtid: str = ""
    by: str = "auto"

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes) -> PrimaryRecord:
        raw = json.loads(data)
        return cls(str(raw["member"]), str(raw.get("previous", "")), int(raw.get("at_ms", 0)),
                   str(raw.get("gtid", "")), str(raw.get("by", "auto")))

    def describe(self) -> str:
        return (f"switched from {self.previous or '?'} to {self.member} ({self.by}) at GTID "
                f"{self.gtid or '?'}")


@dataclass(frozen=True)
class Probe:
    """What a member said when asked (or why it did not answer)."""

    member: str
    error: str = ""
    read_only: bool = False
    server: str = ""  # server_id@hostname:port
    gtid_state: str = ""  # @@gtid_binlog_state: the last GTID of every domain and server
    gtid_pos: str = ""  # @@gtid_binlog_pos: the last GTID of every domain
    replicating: bool = False  # its replica threads run (a replica still catching up)
    unsafe: tuple[str, ...] = ()  # of gtid_strict_mode, log_slave_updates: the ones OFF

    @property
    def answers(self) -> bool:
        return not self.error


# what a switch by GTID relies on, with how to set it
GTID_SETTINGS = {"gtid_strict_mode": "SET GLOBAL gtid_strict_mode = ON; and gtid_strict_mode = "
                                     "ON in my.cnf",
                 "log_slave_updates": "log_slave_updates = ON in my.cnf (a restart)"}


def probe(source: DataSource) -> Probe:
    try:
        with connect(source, connect_timeout=PROBE_TIMEOUT_S,
                     read_timeout=PROBE_TIMEOUT_S) as conn, conn.cursor() as cursor:
            cursor.execute("SELECT @@read_only")
            read_only = bool(int(cursor.fetchone()[0]))
            server = server_identity(cursor)
            state = pos = ""
            unsafe: tuple[str, ...] = ()
            try:
                cursor.execute("SELECT @@gtid_binlog_state, @@gtid_binlog_pos, "
                               "@@gtid_strict_mode, @@log_slave_updates")
                state, pos, *flags = (str(value or "") for value in cursor.fetchone())
                unsafe = tuple(name for name, flag in zip(GTID_SETTINGS, flags, strict=True)
                               if flag.upper() not in ("1", "ON"))
            except pymysql.MySQLError as exc:
                if not server_answered(exc):
                    raise  # lost (a timeout): no answer; MySQL answers that it has no GTIDs
            replicating = False
            try:
                cursor.execute("SHOW SLAVE STATUS")
                rows = cursor.fetchall()
                columns = [column[0] for column in cursor.description or ()]
                replicating = any(dict(zip(columns, row, strict=False)).get(
                    "Slave_IO_Running") in ("Yes", "Connecting") for row in rows)
            except pymysql.MySQLError as exc:
                if not server_answered(exc):
                    raise
                # no SLAVE MONITOR / REPLICATION CLIENT right: not known, not waited on
            return Probe(address(source), "", read_only, server, state, pos, replicating,
                         unsafe)
    except (pymysql.MySQLError, OSError, SourceError) as exc:
        reason = exc.args[-1] if isinstance(exc, pymysql.MySQLError) and exc.args else exc
        return Probe(address(source), str(reason))


def refuse_unsafe(source: DataSource, found: Probe, doing: str) -> None:
    """Refuse (:class:`PositionLostError`) to go on at a member of a replica set that runs
    without gtid_strict_mode or log_slave_updates (``doing``: what setl was about to do,
    for the message). A switch by GTID is exact only on a member whose GTIDs are in order
    and whose binlog holds what it replicated: with strict mode off, a write made on it while
    it replicated (an errant transaction, a number below what the targets hold) is never
    sent by a stream that starts at the targets' GTID state, and nothing tells; without
    log_slave_updates its binlog lacks the transactions a resume is found by."""
    if not (source.hosts and found.unsafe):
        return
    off = " and ".join(f"{name} = OFF" for name in found.unsafe)
    raise PositionLostError(
        f"source {source.name}: {doing} {found.member}, which runs with {off}, and refuses: "
        "setl follows a replica set by GTID, exact only on members that keep GTIDs in order "
        "(gtid_strict_mode) and write what they replicate to their binlog "
        "(log_slave_updates) — a write made on it while it replicated would never be sent, "
        "silently, or the place to go on from is not in its binlog. Set on every member: "
        f"{'; '.join(GTID_SETTINGS[name] for name in found.unsafe)}; then start the "
        "channel again. A member that ran without strict mode may hold such writes "
        "already: compare the targets with it once the channel runs (setl verify CHANNEL "
        "--repair)")


def usable(source: DataSource, found: Probe) -> bool:
    """Whether a member that answered can be the primary as the source finds it."""
    return found.answers and (source.primary == "order" or not found.read_only)


def find_primary(source: DataSource) -> tuple[DataSource | None, list[Probe]]:
    """The member that is the primary now (None: none is), with what each member said."""
    probes = []
    for member in each(source):
        found = probe(member)
        probes.append(found)
        if source.primary == "order" and found.answers:
            return member, probes
    writable = [p for p in probes if usable(source, p)]
    if len(writable) > 1:
        raise SourceError(
            f"source {source.name}: {' and '.join(p.member for p in writable)} are all "
            "writable (read_only = OFF); setl will not guess which is the primary: set "
            "read_only = ON on the ones that are not, or name the primary (setl source "
            f"switch {source.name} --to HOST:PORT)")
    if not writable:
        return None, probes
    return at(source, writable[0].member), probes


def said(probes: list[Probe]) -> str:
    """What the members said, for a message."""
    return "; ".join(f"{p.member}: {p.error or ('read_only' if p.read_only else 'writable')}"
                     for p in probes)


def switch_to(source: DataSource, member: str) -> tuple[DataSource, Probe]:
    """The member an operator names as the new primary, checked: one of the source's hosts,
    answering, promoted (writable, not replicating from another server)."""
    if not source.hosts:
        raise SourceError(f"source {source.name} names one host; a switch needs a replica "
                          "set (hosts: [host:port, ...]) in its definition")
    chosen = at(source, member)
    found = probe(chosen)
    where = address(chosen)
    if not found.answers:
        raise SourceError(f"source {source.name}: {where} does not answer ({found.error}); "
                          "switch to a member that runs")
    if source.primary == "read_only" and found.read_only:
        raise SourceError(f"source {source.name}: {where} is read-only; promote it first "
                          "(STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = OFF), then "
                          "switch")
    if found.replicating:
        raise SourceError(f"source {source.name}: {where} still replicates from another "
                          "server; promote it first (STOP SLAVE; RESET SLAVE ALL), then switch")
    refuse_unsafe(source, found, "setl was asked to switch to")
    return chosen, found
