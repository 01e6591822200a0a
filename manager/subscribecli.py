"""``setl subscribe CHANNEL``: print a subscription's source transactions as they commit,
acknowledging each batch once its lines are written (the kafka-console-consumer of setl).

    setl subscribe orders-feed [-o json] [--table 'shop.*'] [--count N] [--no-ack]
                               [--from latest|FILE:POS|GTID]

``-o json`` prints one JSON object per transaction (id, position, commit time, changes
with their typed images: integers and floats as numbers, DECIMAL, dates, times and text as
strings, binary as upper-case hex); the default prints one line per change. ``--from``
moves the subscription first: its channel is stopped, its position set (what it had
acknowledged past that is sent again), and started.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from typing import Any

from manager import render
from manager.client import ManagerClient
from manager.subscriber import Subscriber, move
from shared.errors import NotFoundError
from shared.rpc import manager_pb2, subscription_pb2


def add_command(commands: Any) -> None:
    subscribe = commands.add_parser(
        "subscribe", help="print a subscription's transactions as they commit, acking them",
        description="Read a subscription channel (a pipeline whose target is a source of "
        "type: subscription): whole source transactions in commit order, each batch "
        "acknowledged once printed, so a restart goes on after the last one printed.")
    subscribe.add_argument("pipeline", help="CHANNEL or CHANNEL/PIPELINE")
    subscribe.add_argument("--table", action="append", default=[],
                           help="print only changes of these schema.table (shell patterns; "
                           "repeat); the others are acknowledged with their batch")
    subscribe.add_argument("--count", type=int, default=0,
                           help="stop after this many transactions (default: never)")
    subscribe.add_argument("--no-ack", action="store_true",
                           help="acknowledge nothing (a look that moves nothing)")
    subscribe.add_argument("--from", dest="start", default="",
                           help="move the subscription first: latest, FILE:POS "
                           "(mysql-bin.000003:4), a MariaDB GTID position (0-1-100) or a "
                           "MySQL GTID set (uuid:1-23; uuid:23 means uuid:1-23); stops and "
                           "starts its channel, which runs on where it was when the position "
                           "cannot be set")
    subscribe.add_argument("--timeout", type=float, default=60.0,
                           help="--from: seconds to wait for the channel to stop and start")


def add_admin(commands: Any) -> None:
    subscription = commands.add_parser(
        "subscription", help="list, show and delete subscriptions (their readers, lag)")
    verbs = subscription.add_subparsers(dest="action", required=True, metavar="ACTION")
    verbs.add_parser("list", help="every subscription: its reader, what it has not "
                     "acknowledged, how far behind the source it is")
    verbs.add_parser("show", help="one subscription").add_argument("name", help="CHANNEL")
    verbs.add_parser("delete", help="a stopped subscription (its channel and position)"
                     ).add_argument("name", help="CHANNEL")


def admin(args: argparse.Namespace, client: ManagerClient) -> int:
    """``setl subscription list|show|delete``."""
    if args.action == "delete":
        found = _subscriptions(client, args.name)
        client.call("DeleteChannel", manager_pb2.DeleteChannelRequest(name=found[0][0]
                                                                      .channel.name))
        print(f"subscription {args.name} deleted (its channel and acknowledged position)")
        return 0
    rows = []
    for info, positions in _subscriptions(client, args.name if args.action == "show" else ""):
        for state, where in zip(info.pipelines, positions.pipelines, strict=False):
            acked = where.targets[0].position if where.targets else None
            rows.append({
                "subscription": info.channel.name, "pipeline": state.pipeline_id,
                "status": render.status_name(info.status), "state": state.state or "-",
                "node": state.owner_node or "-", "reader": state.subscriber or "-",
                "unacked": state.unacked,
                "acked": render.position_text(acked) if acked and acked.file else "-",
                "behind": f"{where.behind_bytes} bytes" if where.behind_bytes >= 0 else "?",
                "delay_ms": state.delay_ms})
    if args.output == "json":
        print(json.dumps(rows, indent=2))
    elif rows:
        print(render.table([key.upper() for key in rows[0]], [list(r.values()) for r in rows]))
    else:
        print("no subscriptions; define a source of type: subscription and a channel that "
              "writes it (docs/subscriptions.md)")
    return 0


def _subscriptions(client: ManagerClient, name: str
                   ) -> list[tuple[manager_pb2.ChannelInfo, manager_pb2.PositionsResponse]]:
    feeds = {source.name for source in client.call(
        "ListSources", manager_pb2.ListSourcesRequest()).sources
        if source.type == "subscription"}
    infos = [info for info in client.call("ListChannels",
                                          manager_pb2.ListChannelsRequest()).channels
             if any(p.target in feeds for p in info.channel.pipelines)
             and name in ("", info.channel.name)]
    if name and not infos:
        raise NotFoundError(f"no subscription {name!r}: a channel whose pipeline writes a "
                            "source of type: subscription (setl subscription list)")
    return [(info, client.call("Positions", manager_pb2.PositionsRequest(
        channel=info.channel.name))) for info in infos]


def run(args: argparse.Namespace, client: ManagerClient) -> int:
    channel, _, pipeline = args.pipeline.partition("/")
    if args.start:
        move(client, channel, pipeline, args.start, args.timeout)
    printed = 0
    json_lines = args.output == "json"
    with Subscriber(channel, pipeline, client.addresses, client.access) as feed:
        for batch in feed:
            whole = True  # every transaction of the batch printed
            for place, txn in enumerate(batch.transactions):
                lines = _lines(txn, args.table, json_lines)
                if not lines:
                    continue  # (a transaction left out by --table is acknowledged with its batch)
                sys.stdout.write("".join(line + "\n" for line in lines))
                printed += 1
                if args.count and printed >= args.count:
                    whole = place == len(batch.transactions) - 1
                    break
            sys.stdout.flush()  # printed, then acknowledged
            if whole and not args.no_ack:
                feed.ack(batch)
            if args.count and printed >= args.count:
                return 0
    return 0


def _lines(txn: subscription_pb2.Transaction, tables: list[str], json_lines: bool
           ) -> list[str]:
    changes = [change for change in txn.changes if not tables or any(
        fnmatch.fnmatchcase(f"{change.schema}.{change.table}", pattern) for pattern in tables)]
    if txn.ddl:  # shown when a pattern's schema part matches its schema
        if tables and not any(fnmatch.fnmatchcase(txn.ddl_schema, pattern.partition(".")[0])
                              for pattern in tables):
            return []
    elif not changes:
        return []
    if json_lines:
        return [json.dumps(transaction(txn, changes), ensure_ascii=False)]
    if txn.ddl:
        return [f"{txn.id} DDL {txn.ddl_schema}: {txn.ddl}"]
    return [f"{txn.id} #{change.index} {change.op} {change.schema}.{change.table} "
            + json.dumps({"before": row(change.before), "after": row(change.after)}
                         if change.op == "U" else row(change.before if change.op == "D"
                                                      else change.after),
                         ensure_ascii=False)
            for change in changes]


def transaction(txn: subscription_pb2.Transaction,
                changes: Any = None) -> dict[str, Any]:
    """A transaction as JSON: its changes' values as :func:`value` gives them."""
    found: dict[str, Any] = {
        "id": txn.id, "file": txn.position.file, "pos": txn.position.pos,
        "gtid": txn.position.gtid, "commit_ts_ms": txn.commit_ts_ms}
    if txn.ddl:
        found.update(ddl=txn.ddl, schema=txn.ddl_schema)
        return found
    found["changes"] = [
        {"index": change.index, "op": change.op, "schema": change.schema,
         "table": change.table, "keys": list(change.keys),
         **({"before": row(change.before)} if change.op != "I" else {}),
         **({"after": row(change.after)} if change.op != "D" else {})}
        for change in (txn.changes if changes is None else changes)]
    return found


def row(fields: Any) -> dict[str, Any]:
    return {field.name: value(field.value) for field in fields}


def value(message: subscription_pb2.Value) -> Any:
    """A typed value as JSON: numbers as numbers, binary as upper-case hex, the rest (DECIMAL,
    dates, times, text) as the exact strings the message holds."""
    kind = message.WhichOneof("kind")
    if kind is None or kind == "null":
        return None
    found = getattr(message, kind)
    return found.hex().upper() if kind == "binary" else found
