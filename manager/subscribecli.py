"""``setl subscribe CHANNEL``: print a subscription's source transactions as they commit,
acknowledging each batch once its lines are written (the kafka-console-consumer of setl).

    setl subscribe orders-feed [-o json] [--table 'shop.*' [--ack-filtered]] [--count N]
                               [--no-ack] [--from latest|FILE:POS|GTID]

``-o json`` prints one JSON object per transaction (id, position, commit time, changes
with their typed images: :mod:`manager.subscribejson`); the default prints one line per
change. ``--from``
moves the subscription first: its channel is stopped, its position set (what it had
acknowledged past that is sent again), and started.

``--table`` is a view: each pattern must match a table the subscription's pairs write (their
target names), and a run with it acknowledges nothing unless ``--ack-filtered`` says the
transactions it leaves out may be acknowledged too (else the subscription would move past
rows it never printed).
"""

from __future__ import annotations

import argparse
import fnmatch
import itertools
import json
import re
import sys
from typing import Any

from manager import render
from manager.client import ManagerClient
from manager.subscribejson import dumps, row, transaction
from manager.subscriber import Subscriber, move
from shared import codec, identifiers
from shared.errors import ConfigError, NotFoundError
from shared.model import Channel, MediaPair
from shared.patterns import NamePattern, PatternKind
from shared.rpc import manager_pb2, subscription_pb2

_PLACEHOLDERS = re.compile(r"\{(?:schema|table)\}")
Pattern = tuple[str, str]  # a --table pattern: shell patterns of the schema and the table
Target = tuple[str, str, str]  # a table a pair writes: its schema and table as shell
# patterns (the name itself; a template over names a regular expression matches: its
# placeholders as *), and as shown


def add_command(commands: Any) -> None:
    subscribe = commands.add_parser(
        "subscribe", help="print a subscription's transactions as they commit, acking them",
        description="Read a subscription channel (a pipeline whose target is a source of "
        "type: subscription): whole source transactions in commit order, each batch "
        "acknowledged once printed, so a restart goes on after the last one printed.")
    subscribe.add_argument("pipeline", help="CHANNEL or CHANNEL/PIPELINE")
    subscribe.add_argument("--table", action="append", default=[],
                           help="print only changes of these schema.table, the pairs' target "
                           "names (shell patterns, e.g. 'shop.*', for the schema and the "
                           "table each; a name holding a dot or [*? in backticks: "
                           "`my.db`.orders; repeat): a view, which acknowledges nothing "
                           "unless --ack-filtered")
    subscribe.add_argument("--ack-filtered", action="store_true",
                           help="with --table: acknowledge each batch printed, the "
                           "transactions --table leaves out included (they are not sent "
                           "again)")
    subscribe.add_argument("--count", type=int, default=0,
                           help="stop after this many transactions (default: never)")
    subscribe.add_argument("--no-ack", action="store_true",
                           help="acknowledge nothing (a look that moves nothing; refused while the "
                           "subscription has a reader)")
    subscribe.add_argument("--from", dest="start", default="",
                           help="move the subscription first: latest, FILE:POS "
                           "(mysql-bin.000003:4), a MariaDB GTID position (0-1-100) or a "
                           "MySQL GTID set (uuid:1-23; uuid:23 means uuid:1-23); stops and "
                           "starts its channel, which runs on where it was when the position "
                           "cannot be set (the manager's admin token: a reader's own token, "
                           "api.readers, may not move it)")
    subscribe.add_argument("--timeout", type=float, default=60.0,
                           help="--from: seconds to wait for the channel to stop and start "
                           "(default 60)")


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
    if args.ack_filtered and (not args.table or args.no_ack):
        raise ConfigError("--ack-filtered acknowledges what --table leaves out: give it with "
                          "--table, and without --no-ack")
    tables = patterns(args.table)
    if tables:  # before anything is read or moved
        check_tables(tables, args.table, targets(client, channel, pipeline), channel)
    if args.start:
        move(client, channel, pipeline, args.start, args.timeout)
    acking = not args.no_ack and (not tables or args.ack_filtered)
    if tables and not acking and not args.no_ack:
        print("setl: --table is a view: nothing is acknowledged (the subscription stays "
              "where it is); --ack-filtered acknowledges what it leaves out too",
              file=sys.stderr)
    printed = 0
    json_lines = args.output == "json"
    # a run that acknowledges nothing is a look: it never takes the subscription's reader's place
    with Subscriber(channel, pipeline, client.addresses, client.access,
                    look=not acking) as feed:
        for batch in feed:
            whole = True  # every transaction of the batch printed (or left out by --table)
            for place, txn in enumerate(batch.transactions):
                lines = _lines(txn, tables, json_lines)
                if not lines:
                    continue
                sys.stdout.write("".join(line + "\n" for line in lines))
                printed += 1
                if args.count and printed >= args.count:
                    whole = place == len(batch.transactions) - 1
                    break
            sys.stdout.flush()  # printed, then acknowledged
            if whole and acking:
                feed.ack(batch)
            if args.count and printed >= args.count:
                return 0
    return 0


def patterns(texts: list[str]) -> list[Pattern]:
    """``--table`` patterns: ``schema.table`` split at its one dot outside backticks; a part
    in backticks is the name itself (``[``, ``*``, ``?`` in it match themselves)."""
    found: list[Pattern] = []
    for text in texts:
        try:
            schema, table = identifiers.split_qualified(text)
        except ConfigError:
            raise ConfigError(
                f"--table {text!r}: give schema.table, each a name or a shell pattern "
                "('shop.orders', 'shop.*', '*.orders'); a name holding a dot goes in "
                "backticks: `my.db`.orders") from None
        found.append((_glob(schema), _glob(table)))
    return found


def _glob(part: str) -> str:
    """A pattern's part as fnmatch takes it: a quoted name matching itself only."""
    return _literal(identifiers.unquote(part)) if identifiers.is_quoted(part) else part


def targets(client: ManagerClient, channel: str, pipeline: str) -> list[Target]:
    """The tables the subscription's pairs write, from its channel's definition."""
    found = codec.from_proto(client.call("GetChannel", manager_pb2.GetChannelRequest(
        name=channel)).channel, Channel)
    chosen = [p for p in found.pipelines if pipeline in ("", p.name)]
    if not chosen:
        raise NotFoundError(f"channel {channel} has no pipeline {pipeline!r} (it has "
                            f"{', '.join(p.name for p in found.pipelines)})")
    return sorted({target for p in chosen for pair in p.pairs for target in _written(pair)},
                  key=lambda target: target[2].replace("`", ""))


def _written(pair: MediaPair) -> set[Target]:
    source, target = pair.source, pair.target

    def known(name: NamePattern) -> list[str | None]:  # None: what a regex matches
        found: list[str | None] = [*name.names()] if name.size else [None]
        return found

    def names(name: NamePattern, schema: str | None, table: str | None
              ) -> list[tuple[str, str]]:  # (shell pattern, as shown)
        if name.kind is not PatternKind.TEMPLATE:
            return [(_literal(each), _shown(each)) for each in name.names()]
        if ("{schema}" in name.text and schema is None) or \
                ("{table}" in name.text and table is None):  # its names come later
            return [("*".join(_literal(part) for part in _PLACEHOLDERS.split(name.text)),
                     name.text)]
        made = name.render(schema or "", table or "")
        return [(_literal(made), _shown(made))]

    found: set[Target] = set()
    templated = PatternKind.TEMPLATE in (target.namespace.kind, target.table.kind)
    for schema, table in itertools.product(known(source.namespace), known(source.table)) \
            if templated else [(None, None)]:  # (else the target names are the source's)
        for (schema_glob, schema_shown), (table_glob, table_shown) in itertools.product(
                names(target.namespace, schema, table), names(target.table, schema, table)):
            found.add((schema_glob, table_glob, f"{schema_shown}.{table_shown}"))
    return found


def _literal(name: str) -> str:
    """A name as a shell pattern that matches it only."""
    return "".join(f"[{char}]" if char in "*?[" else char for char in name)


def _shown(name: str) -> str:
    """A name as ``--table`` takes it: in backticks when it holds a dot, a backtick or what
    a shell pattern means."""
    return identifiers.quote(name) if any(char in name for char in ".`[]*?") else name


def check_tables(tables: list[Pattern], texts: list[str], written: list[Target],
                 channel: str) -> None:
    """Refuse a ``--table`` pattern that matches no table the subscription writes."""
    for (schema, table), text in zip(tables, texts, strict=True):
        if not any(_overlap(schema, there_schema) and _overlap(table, there_table)
                   for there_schema, there_table, _ in written):
            shown = [shown for _, _, shown in written]
            raise ConfigError(
                f"--table {text!r} matches no table of subscription {channel}, which has "
                f"{', '.join(shown[:30]) or 'no pairs'}"
                f"{f' and {len(shown) - 30} more' if len(shown) > 30 else ''}: give their "
                "names as the pairs write them (a renamed table by its target name; names "
                "are case-sensitive; a name holding a dot or [ in backticks)")


def _overlap(first: str, second: str) -> bool:
    """Whether a name exists that both shell patterns match (a class spanning more than
    4096 characters is taken as any character)."""
    a, b = _tokens(first), _tokens(second)
    seen: dict[tuple[int, int], bool] = {}

    def both(i: int, j: int) -> bool:
        if (i, j) not in seen:
            seen[i, j] = _step(a, b, i, j, both)
        return seen[i, j]

    return both(0, 0)


def _step(a: list[str], b: list[str], i: int, j: int, both: Any) -> bool:
    if i == len(a) or j == len(b):
        rest = a[i:] or b[j:]
        return all(token == "*" for token in rest)
    if a[i] == "*":
        return both(i + 1, j) or both(i, j + 1)
    if b[j] == "*":
        return both(i, j + 1) or both(i + 1, j)
    return _one(a[i], b[j]) and both(i + 1, j + 1)


def _one(x: str, y: str) -> bool:
    """Whether a character exists that both one-character parts (?, a class, a character)
    match."""
    if "?" in (x, y):
        return True
    if len(x) == 1 or len(y) == 1:
        return fnmatch.fnmatchcase(x, y) if len(x) == 1 else fnmatch.fnmatchcase(y, x)
    for one, other in ((x, y), (y, x)):
        if not one.startswith("[!"):  # a positive class: one of its characters
            inner = one[1:-1]
            chars = {inner[k] for k in range(len(inner))}
            for low, high in re.findall(r"(.)-(.)", inner):
                if ord(high) - ord(low) > 4096:
                    return True
                chars.update(chr(code) for code in range(ord(low), ord(high) + 1))
            return any(fnmatch.fnmatchcase(char, one) and fnmatch.fnmatchcase(char, other)
                       for char in chars)
    return True  # two negated classes: some character is in neither


def _tokens(glob: str) -> list[str]:
    """A shell pattern's parts: *, ?, a class [...] or one character."""
    found, index = [], 0
    while index < len(glob):
        if glob[index] == "[":
            end = index + 1 + (glob[index + 1:index + 2] == "!")
            end = glob.find("]", end + (glob[end:end + 1] == "]"))
            if end != -1:
                found.append(glob[index:end + 1])
                index = end + 1
                continue
        found.append(glob[index])
        index += 1
    return found


def _lines(txn: subscription_pb2.Transaction, tables: list[Pattern], json_lines: bool
           ) -> list[str]:
    changes = [change for change in txn.changes if not tables or any(
        fnmatch.fnmatchcase(change.schema, schema) and fnmatch.fnmatchcase(change.table, table)
        for schema, table in tables)]
    if txn.ddl:  # shown when a pattern's schema part matches its schema
        if tables and not any(fnmatch.fnmatchcase(txn.ddl_schema, schema)
                              for schema, _ in tables):
            return []
    elif not changes:
        return []
    if json_lines:
        return [dumps(transaction(txn, changes))]
    if txn.ddl:
        return [f"{txn.id} DDL {txn.ddl_schema}: {txn.ddl}"]
    return [f"{txn.id} #{change.index} {change.op} {change.schema}.{change.table} "
            + dumps({"before": row(change.before), "after": row(change.after)}
                    if change.op == "U" else row(change.before if change.op == "D"
                                                 else change.after))
            for change in changes]
