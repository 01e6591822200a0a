"""``setl check source|target NAME``: a database looked at as a node would use it, every
problem listed with the statement or setting that fixes it.

A source must write full row images to its binlog and keep it long enough; setl's user needs
to read the binlog, the replicated schemas and its ``retl`` schema. A target needs its user
to write the paired schemas and its position rows. Errors stop a pipeline (the node refuses
to start one on them, saying the same); warnings cost speed or margin.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared.identifiers import quote
from shared.model import Pipeline
from shared.patterns import PatternKind

# what the binlog must say of a row for setl to replicate it exactly
REQUIRED = {"binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL"}
MIN_PACKET = 64 * 1024 * 1024  # a row image or a multi-row statement as large as setl sends
MIN_RETENTION_S = 24 * 3600  # a pipeline stopped longer than the binlog is kept loses its place
SCHEMA_RIGHTS = ("SELECT", "INSERT", "UPDATE", "DELETE")
DDL_RIGHTS = ("CREATE", "ALTER", "DROP", "INDEX")
RETL_RIGHTS = ("SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER")  # ALTER: upgrades


def replica_server_id(pipeline_id: str) -> int:
    """A stable server_id for the pipeline's binlog connection, away from usual small ids."""
    return 1_000_000 + zlib.crc32(pipeline_id.encode()) % 1_000_000_000


@dataclass(frozen=True)
class Finding:
    what: str  # the setting or privilege
    problem: str
    fix: str
    severity: str = "error"  # error | warning


def source_schemas(pipelines: Iterable[Pipeline]) -> set[str]:
    """The schemas ``pipelines`` read (those named literally)."""
    return {pair.source.namespace.literal for p in pipelines for pair in p.pairs
            if pair.source.namespace.kind is PatternKind.SINGLE}


def target_schemas(pipelines: Iterable[Pipeline], target: str) -> set[str]:
    """The schemas ``pipelines`` write on the database named ``target``."""
    return {pair.target.namespace.literal for p in pipelines for pair in p.pairs
            if pair.target.datasource == target and pair.target.namespace.kind is
            PatternKind.SINGLE}


@dataclass(frozen=True)
class Zone:
    """A server's time zone: its global setting, what SYSTEM is there, its offset from UTC
    now (minutes), and whether it knows named zones (its time zone tables are loaded)."""

    setting: str
    system: str
    offset_min: int
    named: bool

    @property
    def name(self) -> str:
        return self.system if self.setting.upper() == "SYSTEM" else self.setting

    def __str__(self) -> str:
        shown = f"SYSTEM ({self.system})" if self.setting.upper() == "SYSTEM" else self.setting
        hours, minutes = divmod(abs(self.offset_min), 60)
        return f"{shown}, UTC{'-' if self.offset_min < 0 else '+'}{hours:02d}:{minutes:02d} now"


@dataclass(frozen=True)
class Server:
    """What a check of one database compares with the other side's."""

    zone: Zone
    packet: int  # max_allowed_packet


def server(cursor: Any) -> Server:
    cursor.execute("SELECT @@global.max_allowed_packet")
    packet = int(cursor.fetchone()[0])
    return Server(zone(cursor), packet)


def zone(cursor: Any) -> Zone:
    cursor.execute("SELECT @@global.time_zone, @@system_time_zone, "
                   "TIMESTAMPDIFF(MINUTE, UTC_TIMESTAMP(), "
                   "CONVERT_TZ(UTC_TIMESTAMP(), '+00:00', @@global.time_zone)), "
                   "CONVERT_TZ('2000-01-01 00:00:00', '+00:00', 'Europe/London') IS NOT NULL")
    setting, system, offset, named = cursor.fetchone()
    return Zone(str(setting), str(system), int(offset or 0), bool(named))


def zone_findings(source: Zone, target: Zone, ddl: bool) -> list[Finding]:
    """Time zones of a source and a target: TIMESTAMP is copied as the instant (setl reads
    and writes it in UTC) and DATETIME as written, whatever the zones; what differs is what
    readers see, and a replayed DDL statement needs the source's named zone on the target."""
    found = []
    if source.offset_min != target.offset_min:
        found.append(Finding("time_zone", f"the source's is {source}, the target's {target}: "
                             "TIMESTAMP columns hold the same instants but readers see them "
                             "in each server's zone (DATETIME is copied as written)",
                             f"SET GLOBAL time_zone = '{source.name}'; "
                             "on the target (and default_time_zone in its my.cnf) if its "
                             "readers should see the source's wall clock", "warning"))
    if ddl and not target.named:
        found.append(Finding("time zone tables", "the target knows no named time zones: a "
                             "DDL statement replayed in the session zone of the source (SET "
                             "time_zone = 'Europe/Berlin') fails there", "mysql_tzinfo_to_sql "
                             "/usr/share/zoneinfo | mysql -u root mysql (on the target)",
                             "warning"))
    return found


def variables(cursor: Any, names: Iterable[str]) -> dict[str, str]:
    wanted = ", ".join(f"'{name}'" for name in names)
    cursor.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({wanted})")
    return {str(name).lower(): str(value) for name, value in cursor.fetchall()}


# the rights SHOW SLAVE STATUS takes on MariaDB 10.5+ (REPLICA MONITOR: 10.5.9's name)
REPLICA_MONITOR = ("SLAVE MONITOR", "REPLICA MONITOR", "SUPER")


def source_findings(cursor: Any, schemas: Iterable[str], replica_ids: Iterable[int],
                    replica_set: bool = False) -> list[Finding]:
    """What keeps the source from being replicated exactly (``schemas``: the replicated
    ones; ``replica_ids``: the server_ids its pipelines replicate with); with
    ``replica_set``, of one member of a source setl follows across switchovers by GTID."""
    found: list[Finding] = []
    seen = variables(cursor, ["log_bin", *REQUIRED, "server_id",
                              "binlog_transaction_compression", "expire_logs_days",
                              "binlog_expire_logs_seconds", "max_allowed_packet", "gtid_mode",
                              "gtid_strict_mode", "version", "log_slave_updates",
                              "sync_binlog", "innodb_flush_log_at_trx_commit"])
    if seen.get("log_bin", "OFF").upper() != "ON":
        found.append(Finding("log_bin", "the binary log is off", "set log_bin = binlog in "
                             "my.cnf and restart the server"))
    for name, wanted in REQUIRED.items():
        actual = seen.get(name)
        if actual is None:
            found.append(Finding(name, "the server has no such setting (too old?)",
                                 "use MariaDB 10.5+ or MySQL 8.0+"))
        elif actual.upper() != wanted:
            found.append(Finding(name, f"is {actual}; setl needs {wanted}",
                                 f"SET GLOBAL {name} = '{wanted}'; and {name} = {wanted} in "
                                 "my.cnf"))
    if seen.get("binlog_transaction_compression", "OFF").upper() == "ON":
        found.append(Finding("binlog_transaction_compression", "compressed transactions "
                             "cannot be read", "SET GLOBAL binlog_transaction_compression = "
                             "OFF; and the same in my.cnf"))
    server_id = int(seen.get("server_id") or 0)
    if server_id in set(replica_ids):
        found.append(Finding("server_id", f"{server_id} is the id a pipeline replicates with",
                             "give the source another server_id in my.cnf"))
    retention = _retention_s(seen)
    if retention is not None and retention < MIN_RETENTION_S:
        found.append(Finding("binlog retention", f"binlogs are kept {retention / 3600:g} h: a "
                             "pipeline stopped longer loses its place", "SET GLOBAL "
                             "binlog_expire_logs_seconds = 604800; (a week) and in my.cnf",
                             "warning"))
    found += _packet(seen)
    found += _durability(seen)
    mariadb = "mariadb" in seen.get("version", "").lower()
    if mariadb and seen.get("gtid_strict_mode", "OFF").upper() != "ON":
        found.append(Finding("gtid_strict_mode", "is OFF: GTIDs are not kept in order, which a "
                             "switch to another server by GTID relies on", "SET GLOBAL "
                             "gtid_strict_mode = ON; and in my.cnf",
                             "error" if replica_set else "warning"))
    if replica_set and not mariadb:
        found.append(Finding("GTID", "setl follows a replica set by MariaDB GTIDs "
                             "(domain-server-sequence); MySQL's GTID sets are not followed",
                             "name one host (host:, port:) for a MySQL source"))
    if replica_set and seen.get("log_slave_updates", "OFF").upper() != "ON":
        found.append(Finding("log_slave_updates", "is OFF: as a replica this member does not "
                             "write what it replicates to its binlog, so after a switch to it "
                             "setl would not find the transactions it resumes after",
                             "log_slave_updates = ON in my.cnf (restart)"))
    rights = _rights(cursor)
    if not rights.has_global("REPLICATION SLAVE"):
        found.append(Finding("REPLICATION SLAVE", "setl's user cannot read the binlog",
                             f"GRANT REPLICATION SLAVE ON *.* TO {rights.user};"))
    if not (rights.has_global("REPLICATION CLIENT") or rights.has_global("BINLOG MONITOR")):
        found.append(Finding("REPLICATION CLIENT", "setl's user cannot see where the binlog "
                             "ends (SHOW MASTER STATUS, SHOW BINARY LOGS)",
                             f"GRANT REPLICATION CLIENT ON *.* TO {rights.user}; (MariaDB "
                             "10.5+: BINLOG MONITOR)"))
    if replica_set and not any(rights.has_global(right) for right in REPLICA_MONITOR):
        found.append(Finding("SLAVE MONITOR", "setl's user cannot see whether a member still "
                             "replicates (SHOW SLAVE STATUS), so a switch could go to a replica "
                             "that has not caught up, and one still catching up could be taken "
                             "for a lost primary's lost transactions",
                             f"GRANT SLAVE MONITOR ON *.* TO {rights.user};"))
    for schema in sorted(set(schemas)):
        if not rights.has(schema, "SELECT"):
            found.append(Finding(f"SELECT on {schema}", "snapshots, lookups and verify cannot "
                                 "read its tables", f"GRANT SELECT ON {quote(schema)}.* TO "
                                 f"{rights.user};"))
    found += _retl(rights)
    return found


def target_findings(cursor: Any, schemas: Iterable[str], ddl: bool,
                    source_packet: int | None = None) -> list[Finding]:
    """What keeps the target from taking a pipeline's writes (``schemas``: the target
    schemas; ``ddl``: a pipeline replays DDL into them)."""
    found: list[Finding] = []
    seen = variables(cursor, ["max_allowed_packet", "local_infile", "innodb_autoinc_lock_mode",
                              "read_only"])
    if seen.get("read_only", "OFF").upper() == "ON":
        found.append(Finding("read_only", "the server is read-only", "point the pipeline at "
                             "the primary, or SET GLOBAL read_only = OFF"))
    found += _packet(seen, source_packet, target=True)
    if seen.get("local_infile", "OFF").upper() != "ON":
        found.append(Finding("local_infile", "is OFF: copies and bulk upserts go as multi-row "
                             "statements, not LOAD DATA LOCAL (slower)",
                             "SET GLOBAL local_infile = ON; and in my.cnf", "warning"))
    if seen.get("innodb_autoinc_lock_mode", "2") != "2":
        found.append(Finding("innodb_autoinc_lock_mode", f"is {seen['innodb_autoinc_lock_mode']}"
                             ": parallel copies into a table with an AUTO_INCREMENT column "
                             "queue on its table lock (setl then copies as REPLACE tuples)",
                             "innodb_autoinc_lock_mode = 2 in my.cnf (restart) for faster "
                             "copies", "warning"))
    rights = _rights(cursor)
    needed = SCHEMA_RIGHTS + (DDL_RIGHTS if ddl else ())
    for schema in sorted(set(schemas)):
        missing = [right for right in needed if not rights.has(schema, right)]
        if missing:
            found.append(Finding(f"{', '.join(missing)} on {schema}", "setl's user cannot "
                                 "write the pipeline's rows" + (" and DDL" if ddl else ""),
                                 f"GRANT {', '.join(missing)} ON {quote(schema)}.* TO "
                                 f"{rights.user};"))
    return found + _retl(rights)


def _packet(seen: dict[str, str], source_packet: int | None = None,
            target: bool = False) -> list[Finding]:
    """A source's packet under MIN_PACKET; a target's under its source's (an error: a value
    the source holds may not fit) or under MIN_PACKET. Equal to the source's is not always
    enough: a keyed table's row of any size goes in statements under the target's packet
    (its largest values a piece at a time), but a keyless table's row goes in one statement,
    a binary value written as hex (twice its size), and one value is never cut on the
    target (appended, it is whole there)."""
    packet = int(seen.get("max_allowed_packet") or 0)
    wanted = max(MIN_PACKET, source_packet or 0)
    if packet and packet < wanted:
        problem = "a larger row or statement stops the pipeline" if not target else \
            "a larger value, or a keyless table's row whose statement is larger (binary " \
            "values go as hex, twice their size), stops the pipeline; a keyed table's " \
            "larger rows go in pieces"
        return [Finding("max_allowed_packet", f"is {packet:,} bytes: {problem}",
                        f"SET GLOBAL max_allowed_packet = {wanted}; and in my.cnf (at least "
                        "the source's" + ("; over twice the largest row of a keyless table"
                                          if target else "") + ")",
                        "error" if source_packet and packet < source_packet else "warning")]
    return []


def _durability(seen: dict[str, str]) -> list[Finding]:
    """A source that may lose its binlog's tail in a crash of its machine: setl may have
    loaded those transactions already, and the restarted source gives their positions and
    GTIDs to other transactions, so the targets hold rows the source never kept."""
    return [Finding(name, f"is {seen[name]}: a crash of the source's machine can lose "
                    "transactions setl already copied (the restarted source reuses their "
                    "positions and GTIDs, and the targets keep rows the source lost)",
                    f"SET GLOBAL {name} = 1; and {name} = 1 in my.cnf", "warning")
            for name in ("sync_binlog", "innodb_flush_log_at_trx_commit")
            if seen.get(name, "1") != "1"]


def _retention_s(seen: dict[str, str]) -> float | None:
    seconds = float(seen.get("binlog_expire_logs_seconds") or 0)
    days = float(seen.get("expire_logs_days") or 0)
    kept = seconds or days * 86400
    return kept or None  # 0: kept until purged by hand


@dataclass(frozen=True)
class _Rights:
    user: str
    global_: frozenset[str]
    schemas: dict[str, frozenset[str]]

    def has_global(self, right: str) -> bool:
        return right in self.global_ or "ALL PRIVILEGES" in self.global_

    def has(self, schema: str, right: str) -> bool:
        held = self.schemas.get(schema.lower(), frozenset())
        return self.has_global(right) or right in held or "ALL PRIVILEGES" in held


def _rights(cursor: Any) -> _Rights:
    """The current user's global and schema privileges (roles not followed)."""
    cursor.execute("SELECT CURRENT_USER()")
    name, _, host = str(cursor.fetchone()[0]).rpartition("@")
    user = f"'{name}'@'{host}'"
    cursor.execute("SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE "
                   "GRANTEE = %s", (user,))
    global_ = frozenset(str(row[0]).upper() for row in cursor.fetchall())
    cursor.execute("SELECT TABLE_SCHEMA, PRIVILEGE_TYPE FROM "
                   "information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = %s", (user,))
    schemas: dict[str, set[str]] = {}
    for schema, right in cursor.fetchall():
        schemas.setdefault(str(schema).lower().replace("\\_", "_"), set()).add(
            str(right).upper())
    return _Rights(user, global_, {name: frozenset(held) for name, held in schemas.items()})


def _retl(rights: _Rights) -> list[Finding]:
    missing = [right for right in RETL_RIGHTS if not rights.has("retl", right)]
    if not missing:
        return []
    return [Finding(f"{', '.join(missing)} on retl", "setl's user cannot keep its system "
                    "tables (position rows, free door, watermarks)",
                    f"GRANT ALL ON retl.* TO {rights.user};")]
