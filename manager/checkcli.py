"""``setl check source|target NAME``: connects to a database as a node would (the CLI's own
``security`` rules, as for ``setl backfill``) and lists every problem with its fix; exit 0
when nothing would stop a pipeline, 1 when something would."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from manager import render
from manager.client import ManagerClient
from shared import codec, members
from shared.endpoint import connect
from shared.errors import ConfigError, SourceError
from shared.model import Channel, DataSource
from shared.preflight import (
    Finding,
    Server,
    replica_server_id,
    server,
    source_findings,
    source_schemas,
    target_findings,
    target_schemas,
    zone,
    zone_findings,
)
from shared.rpc import manager_pb2


def add_command(commands: Any) -> None:
    check = commands.add_parser("check", help="is a database ready to be a source or a "
                                              "target? every problem with its fix")
    check.add_argument("role", choices=["source", "target"],
                       help="what the database is in the channels")
    check.add_argument("name", help="the source's name in the definitions")


def run(args: argparse.Namespace, client: ManagerClient) -> int:
    source = codec.from_proto(client.call("GetSource", manager_pb2.GetSourceRequest(
        name=args.name)), DataSource)
    if source.type in ("delta", "subscription"):
        kind = "lake" if source.type == "delta" else "subscription"
        raise ConfigError(f"{source.name} is a {kind}, not a database: there is no server "
                          "to check (setl check takes a MySQL or MariaDB source or target)")
    channels = [codec.from_proto(info.channel, Channel) for info in client.call(
        "ListChannels", manager_pb2.ListChannelsRequest()).channels]
    # a replica set: every member, since setl may read any of them after a switch
    each = members.each(source) if args.role == "source" else (source,)
    results = [(member, _findings(args.role, member, channels, bool(source.hosts), client))
               for member in each]
    errors = sum(finding.severity == "error" for _, found in results for finding in found)
    if args.output != "table":
        print(render.structured({"source": source.name, "role": args.role,
                                 "errors": errors,
                                 "findings": [dataclasses.asdict(f) for _, found in results
                                              for f in found],
                                 "members": [{"member": members.address(member),
                                              "findings": [dataclasses.asdict(f)
                                                           for f in found]}
                                             for member, found in results]},
                                args.output))
    else:
        print("\n\n".join(_table(member, args.role, found) for member, found in results))
    return 1 if errors else 0


def _findings(role: str, source: DataSource, channels: list[Channel],
              replica_set: bool, client: ManagerClient) -> list[Finding]:
    try:
        conn = connect(source)
    except SourceError as exc:
        if not replica_set:
            raise
        return [Finding("connection", str(exc), "start the member, or take it out of the "
                        "source's hosts")]
    with conn, conn.cursor() as cursor:
        if role == "source":
            pipelines = [(channel, p) for channel in channels for p in channel.pipelines
                         if p.source == source.name]
            return source_findings(cursor, source_schemas(p for _, p in pipelines), [
                replica_server_id(channel.pipeline_id(p)) for channel, p in pipelines],
                replica_set)
        pipelines = [p for channel in channels for p in channel.pipelines
                     if p.target == source.name or any(
                         pair.target.datasource == source.name for pair in p.pairs)]
        ddl = any(p.params.ddl_sync for p in pipelines)
        # what readers see of TIMESTAMPs, and packets as large as a source's
        sources = [there for there in (_server(codec.from_proto(client.call(
            "GetSource", manager_pb2.GetSourceRequest(name=name)), DataSource))
            for name in sorted({p.source for p in pipelines})) if there is not None]
        found = target_findings(cursor, target_schemas(pipelines, source.name), ddl,
                                max((s.packet for s in sources), default=None))
        here = zone(cursor)
    for there in sources:
        found += [finding for finding in zone_findings(there.zone, here, ddl)
                  if finding not in found]
    return found


def _server(source: DataSource) -> Server | None:
    """A source's time zone and packet size, or None when it does not answer (its own check
    says why)."""
    try:
        conn = connect(source, connect_timeout=5)
    except SourceError:
        return None
    with conn, conn.cursor() as cursor:
        return server(cursor)


def _table(source: DataSource, role: str, found: list[Finding]) -> str:
    errors = sum(finding.severity == "error" for finding in found)
    where = f"{source.name} ({members.address(source)}) as a {role}"
    if not found:
        return f"{where}: ready, nothing to fix"
    rows = [(f.severity.upper(), f.what, f.problem, f.fix) for f in found]
    verdict = f"{errors} problem(s) would stop a pipeline" if errors else \
        "nothing would stop a pipeline"
    return f"{where}: {verdict}\n" + render.table(["", "WHAT", "PROBLEM", "FIX"], rows)
