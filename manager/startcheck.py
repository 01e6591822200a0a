"""The checks of ``setl check`` at ``setl channel start``: a channel whose source or target
would stop its pipelines (binlog settings, grants, packet size, …) is not started; the
answer lists every problem with its fix. Warnings (retention, time zones, speed) are logged.

A database that does not answer, or that this manager may not reach under its own
``security`` settings, is left to the node: it checks the source again when a pipeline starts
and pauses the channel with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pymysql

from manager.handover import writers_besides
from shared import members
from shared.catalog import Catalog
from shared.endpoint import connect
from shared.errors import SetlError, StartRefusedError
from shared.model import Channel, ChannelStatus, DataSource, Pipeline
from shared.preflight import (
    Finding,
    Server,
    replica_server_id,
    server,
    source_findings,
    source_schemas,
    target_findings,
    target_schemas,
    zone_findings,
)

log = logging.getLogger("setl.manager.startcheck")


def refuse_broken(catalog: Catalog, channel: Channel) -> None:
    """Raise StartRefusedError naming every error the channel's databases show; log the
    warnings."""
    errors: list[str] = []
    for pipeline in channel.pipelines:
        pipeline_id = channel.pipeline_id(pipeline)
        for where, finding in findings(catalog, channel, pipeline):
            if finding.severity == "error":
                errors.append(f"pipeline {pipeline_id}: {where}: {finding.what} "
                              f"{finding.problem}; fix: {finding.fix}")
            else:
                log.warning("event=start_check_warning channel=%s pipeline=%s where=%r "
                            "what=%r problem=%r fix=%r", channel.name, pipeline_id, where,
                            finding.what, finding.problem, finding.fix)
    if errors:
        raise StartRefusedError("\n".join([
            f"channel {channel.name} was not started: {len(errors)} problem(s) would stop "
            "its pipelines", *errors, "fix them (setl check source|target NAME lists every "
            "check), then start the channel again"]))


def refuse_shared(catalog: Catalog, channel: Channel) -> None:
    """Raise StartRefusedError when a channel that is not stopped has a pipeline taking a
    source table this channel's pipelines take (the same source) into the same target: two
    writers of one table, each loading from its own position (a keyless table's rows twice,
    a row written back to an older version). A source whose tables cannot be read is
    logged, and left."""
    others = [record.channel for record in catalog.channels()
              if record.channel.name != channel.name and record.status is not ChannelStatus.STOP]
    if not others:
        return
    shared, unread = writers_besides(channel, others, catalog.source)
    for why in unread:
        log.warning("event=start_shared_check_skipped channel=%s reason=%r", channel.name, why)
    if shared:
        running = sorted(shared)
        raise StartRefusedError("\n".join([
            f"channel {channel.name} was not started: channel {' and '.join(running)}, which "
            "is not stopped, writes the same tables from the same source (two writers of one "
            "table, each loading from its own position: a keyless table's rows twice, a row "
            "written back to an older version)",
            *(line for name in running for line in shared[name]),
            f"keep each table in one channel: stop the other one "
            f"({' and '.join(f'setl channel stop {c} --wait' for c in running)}), or delete "
            "the one no longer wanted (setl channel delete NAME), then start this one"]))


def findings(catalog: Catalog, channel: Channel, pipeline: Pipeline
             ) -> list[tuple[str, Finding]]:
    """(where, finding) for the pipeline's source (the member it reads now) and every
    database it writes."""
    pipeline_id = channel.pipeline_id(pipeline)
    source = catalog.source(pipeline.source)
    found: list[tuple[str, Finding]] = []
    read = _checked(pipeline_id, source, "source", found, lambda cursor: source_findings(
        cursor, source_schemas([pipeline]), [replica_server_id(pipeline_id)],
        bool(source.hosts)))
    if source.hosts:
        found += member_findings(pipeline_id, source)
    names = {pipeline.target} | {pair.target.datasource for pair in pipeline.pairs}
    for name in sorted(names):
        target = catalog.source(name)
        if target.type in ("delta", "subscription"):  # no server to ask (a lake: the node
            # checks its tables)
            continue
        written = _checked(pipeline_id, target, "target", found, lambda cursor, n=name:
                           target_findings(cursor, target_schemas([pipeline], n),
                                           pipeline.params.ddl_sync,
                                           read.packet if read is not None else None))
        if read is not None and written is not None:
            where = f"target {_named(target)}"
            found += [(where, finding) for finding in
                      zone_findings(read.zone, written.zone, pipeline.params.ddl_sync)]
    return found


def _checked(pipeline_id: str, database: DataSource, role: str,
             found: list[tuple[str, Finding]], check: Callable[[Any], list[Finding]]
             ) -> Server | None:
    """Run ``check`` on the database; what the other side's check compares with, or None
    when it was not looked at."""
    try:
        conn = connect(database, connect_timeout=3)
    except SetlError as exc:
        log.info("event=start_check_skipped pipeline=%s %s=%s reason=%r", pipeline_id, role,
                 database.name, str(exc))
        return None
    with conn, conn.cursor() as cursor:
        try:
            found += [(f"{role} {_named(database)}", finding) for finding in check(cursor)]
            return server(cursor)
        except pymysql.MySQLError as exc:
            log.info("event=start_check_skipped pipeline=%s %s=%s reason=%r", pipeline_id,
                     role, database.name, str(exc))
            return None


def _named(database: DataSource) -> str:
    return f"{database.name} ({members.address(database)})"


def member_findings(pipeline_id: str, source: DataSource) -> list[tuple[str, Finding]]:
    """gtid_strict_mode and log_slave_updates of the replica set's members besides the one
    read now: setl may go on at any of them after a switch, by GTID, which is exact only
    with both (:func:`shared.members.refuse_unsafe`; the member read now has its full
    check). A member that does not answer is left: the switch checks it again."""
    found: list[tuple[str, Finding]] = []
    for member in members.each(source):
        if members.address(member) == members.address(source):
            continue
        probe = members.probe(member)
        if not probe.answers:
            log.info("event=start_check_skipped pipeline=%s source=%s member=%s reason=%r",
                     pipeline_id, source.name, probe.member, probe.error)
        for name in probe.unsafe:
            why = "a write made on it while it replicated would never be sent" \
                if name == "gtid_strict_mode" else "its binlog lacks what it replicated"
            found.append((f"source {_named(member)}", Finding(
                name, f"is OFF on this member of the replica set: after a switch to it setl "
                f"could not go on there exactly by GTID ({why})",
                members.GTID_SETTINGS[name])))
    return found
