"""``setl``: the admin CLI.

    setl apply -f FILE [--dry-run]
    setl channel list | show NAME | start|pause|stop NAME [--wait] | delete NAME
    setl node list
    setl status [--watch]
    setl position show CHANNEL[/PIPELINE] | set CHANNEL/PIPELINE --file F --pos P|--gtid G|--latest
    setl position reset CHANNEL[/PIPELINE] [--replay] [--keyless-duplicates]
    setl backfill CHANNEL --table schema.table | setl retl init SOURCE
    setl check source|target NAME
    setl snapshot CHANNEL --table schema.table [--where C] [--wait] | status|pause|resume|cancel
    setl verify CHANNEL [--table schema.table] [--where COND] [--repair]
    setl subscribe CHANNEL[/PIPELINE] [-o json] [--table PATTERN] [--count N] [--from P]
    setl subscription list | show NAME | delete NAME
    setl sandbox up | down | status

Errors go to stderr as one line with a hint, and the exit code is non-zero.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path
from typing import TextIO

from manager import (
    backfill,
    checkcli,
    lakecli,
    render,
    sandboxcli,
    snapshotcli,
    subscribecli,
    verifycli,
)
from manager.client import ManagerClient, access_from, addresses_from, wait_channel
from shared import confinement, settings
from shared.confinement import CONF
from shared.errors import SetlError
from shared.rpc import manager_pb2, model_pb2
from shared.version import version

EXIT_ERROR, EXIT_INVALID = 1, 2


def _globals(parser: argparse.ArgumentParser, default: object = None) -> None:
    """The options every command takes, before or after its name (``setl channel list -o
    json`` as ``setl -o json channel list``)."""
    def given(value: object) -> object:
        return default if default is argparse.SUPPRESS else value

    parser.add_argument("--manager", default=given(None), help="manager host:port, several "
                        "comma-separated (default: $SETL_MANAGER or 127.0.0.1:7310)")
    parser.add_argument("--token", default=given(None), help="the manager's API token, or "
                        "file:PATH of a file holding it (default: $SETL_TOKEN)")
    parser.add_argument("--ca", default=given(None), help="speak TLS, trusting this CA's "
                        "certificate (PEM) for the manager's (default: $SETL_CA)")
    parser.add_argument("--cert", default=given(None), help="a client certificate (PEM), "
                        "when the manager asks for one (default: $SETL_CERT)")
    parser.add_argument("--key", default=given(None),
                        help="the client certificate's key (default: $SETL_KEY)")
    parser.add_argument("-o", "--output", choices=["table", "json", "yaml"],
                        default=given("table"), help="how answers are printed")
    parser.add_argument("--config", default=given(None), help="a manager or node "
                        "configuration whose 'security' settings say which password files "
                        "and variables this CLI may read (backfill, retl init, check; default: "
                        "$SETL_CONFIG, else conf/node.yaml)")


def _everywhere(parser: argparse.ArgumentParser) -> None:
    """The global options on every subcommand too (their defaults left to the top)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                _globals(sub, argparse.SUPPRESS)
                _everywhere(sub)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="setl", description="setl admin CLI")
    _globals(parser)
    parser.add_argument("--version", action="version", version=f"setl {version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("version", help="this CLI's version")

    apply = commands.add_parser("apply", help="validate and store definitions from YAML")
    apply.add_argument("-f", "--file", required=True, help="YAML file with sources/channels")
    apply.add_argument("--dry-run", action="store_true", help="validate and show, store nothing")

    channel = commands.add_parser("channel", help="list, show and control channels")
    actions = channel.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="every channel with its status")
    actions.add_parser("show", help="show a channel").add_argument(
        "name", help="the channel")
    delete = actions.add_parser("delete", help="delete a stopped channel (its targets keep "
                                "their position rows: a channel made again under the same "
                                "name is told of them)")
    delete.add_argument("name", help="the channel (stopped)")
    delete.add_argument("--purge-positions", action="store_true",
                        help="also delete its pipelines' position rows on the targets")
    for name, until in (("start", "every pipeline runs"), ("pause", "every runner stopped"),
                        ("stop", "every runner stopped")):
        action = actions.add_parser(name, help=f"{name} a channel")
        action.add_argument("name", help="the channel")
        action.add_argument("--wait", action="store_true", help=f"return once {until} (or "
                            "say which did not, and why)")
        action.add_argument("--timeout", type=float, default=120.0,
                            help="seconds --wait waits at most (default 120)")

    source = commands.add_parser("source", help="list, show, switch and delete sources")
    verbs = source.add_subparsers(dest="action", required=True, metavar="ACTION")
    verbs.add_parser("list", help="every source (password references only)")
    verbs.add_parser("show", help="one source").add_argument(
        "name", help="the source")
    verbs.add_parser("delete", help="a source no channel uses").add_argument(
        "name", help="the source")
    switch = verbs.add_parser("switch", help="make another member of a replica-set source "
                              "its primary (a planned switchover): its pipelines load what "
                              "they read, then go on there by GTID")
    switch.add_argument("name", help="the source (one that names hosts:)")
    switch.add_argument("--to", required=True, metavar="HOST:PORT",
                        help="the member that is the primary now (promoted, writable)")

    node = commands.add_parser("node", help="registered nodes")
    node.add_subparsers(dest="action", required=True, metavar="ACTION").add_parser(
        "list", help="the live nodes: id, address, the pipelines each may run and runs")

    status = commands.add_parser("status", help="pipelines: state, owner, position, delay")
    status.add_argument("--watch", action="store_true", help="refresh every --interval seconds")
    status.add_argument("--interval", type=float, default=1.0,
                        help="seconds between refreshes with --watch (default 1)")

    position = commands.add_parser("position", help="where pipelines stand; set where one "
                                   "starts from")
    moves = position.add_subparsers(dest="action", required=True, metavar="ACTION")
    moves.add_parser("show", help="cursor, each target's position row, the source's end"
                     ).add_argument("pipeline", help="CHANNEL or CHANNEL/PIPELINE")
    move = moves.add_parser("set", help="where a stopped pipeline starts from")
    move.add_argument("pipeline", help="CHANNEL/PIPELINE (or CHANNEL of one pipeline)")
    move.add_argument("--file", help="a binlog file of the source")
    move.add_argument("--pos", type=int, default=0, help="a position in --file")
    move.add_argument("--gtid", help="a GTID position instead")
    move.add_argument("--latest", action="store_true", help="the source's position now")
    move.add_argument("--replay", action="store_true", help="earlier than a target holds: "
                      "load it again from there (the target's position row follows)")
    reset = moves.add_parser("reset", help="forget where stopped pipelines stand (cursor, "
                             "position rows, snapshot progress): the next start begins again "
                             "at start: and loads everything from there")
    reset.add_argument("pipeline", help="CHANNEL or CHANNEL/PIPELINE")
    reset.add_argument("--replay", action="store_true", help="start: is earlier than a "
                       "target holds: load it again from there")
    for each in (move, reset):
        each.add_argument("--keyless-duplicates", action="store_true", help="a replay over "
                          "keyless tables (no primary key, no unique NOT NULL key) writes "
                          "their rows again beside the target's, and one into a lake appends its "
                          "change logs' changes again: go ahead (those tables were made to "
                          "hold what they held at the new start)")

    backfill.add_commands(commands)
    checkcli.add_command(commands)
    snapshotcli.add_commands(commands)
    verifycli.add_command(commands)
    subscribecli.add_command(commands)
    subscribecli.add_admin(commands)
    lakecli.add_command(commands)
    sandboxcli.add_command(commands)
    _everywhere(parser)
    return parser


def _print(args: argparse.Namespace, message: object, human: str) -> None:
    print(human if args.output == "table" else render.structured(message, args.output))


def _apply(args: argparse.Namespace, client: ManagerClient) -> int:
    path = Path(args.file)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SetlError(f"{path}: cannot read: {exc.strerror}") from None
    answer = client.call("Apply", manager_pb2.ApplyRequest(yaml=text, file=str(path),
                                                           dry_run=args.dry_run))
    if answer.errors:
        for error in answer.errors:
            print(error, file=sys.stderr)
        print(f"setl: {path}: {len(answer.errors)} error(s); nothing was stored",
              file=sys.stderr)
        return EXIT_INVALID
    suffix = " (dry run: nothing stored)" if args.dry_run else ""
    rows = [(c.kind, c.name, c.action, c.version) for c in answer.changes]
    _print(args, answer, render.table(["KIND", "NAME", "ACTION", "VERSION"], rows) + suffix
           + "".join(f"\nnote: {note}" for note in answer.notes))
    return 0


_STATUS = {"start": "CHANNEL_STATUS_START", "pause": "CHANNEL_STATUS_PAUSE",
           "stop": "CHANNEL_STATUS_STOP"}


def _channel(args: argparse.Namespace, client: ManagerClient) -> int:
    if args.action == "list":
        answer = client.call("ListChannels", manager_pb2.ListChannelsRequest())
        _print(args, answer, render.channels(answer.channels))
    elif args.action == "show":
        info = client.call("GetChannel", manager_pb2.GetChannelRequest(name=args.name))
        _print(args, render.channel_document(info), render.channel_detail(info))
    elif args.action == "delete":
        answer = client.call("DeleteChannel", manager_pb2.DeleteChannelRequest(
            name=args.name, purge_positions=args.purge_positions))
        hint = "" if args.purge_positions or not answer.positions else (
            "\n(a channel made again under this name is refused while these rows are there "
            "and do not fit its start: --purge-positions deletes them)")
        _print(args, answer, "\n".join([f"channel {answer.name} deleted",
                                        *answer.positions]) + hint)
    else:
        status = model_pb2.ChannelStatus.Value(_STATUS[args.action])
        info = client.call("SetChannelStatus",
                           manager_pb2.SetChannelStatusRequest(name=args.name, status=status))
        human = f"channel {args.name} is {render.status_name(info.status)}"
        if args.action == "start":  # where each pipeline begins (fixed now) or resumes
            human += "".join(f"\n  {p.pipeline_id}: from {render.position_text(p.position)}"
                             for p in info.pipelines)
        if args.wait:
            info = wait_channel(client, args.name, args.action, args.timeout)
            human += "\n" + render.pipelines([info])
        _print(args, info, human)
    return 0


def _position(args: argparse.Namespace, client: ManagerClient) -> int:
    channel, _, pipeline = args.pipeline.partition("/")
    request = manager_pb2.PositionsRequest(channel=channel, pipeline=pipeline,
                                           action=args.action)
    if args.action == "set":
        request.to.file, request.to.pos = args.file or "", args.pos
        request.to.gtid = args.gtid or ""
        request.latest = args.latest
    if args.action in ("set", "reset"):
        request.replay, request.keyless_duplicates = args.replay, args.keyless_duplicates
    answer = client.call("Positions", request)
    _print(args, answer, "\n".join([render.positions(answer.pipelines), *answer.notes]))
    return 0


def _source(args: argparse.Namespace, client: ManagerClient) -> int:
    if args.action == "list":
        answer = client.call("ListSources", manager_pb2.ListSourcesRequest())
        _print(args, {"sources": [render.source_data(s) for s in answer.sources]},
               render.sources(answer.sources))
    elif args.action == "show":
        found = client.call("GetSource", manager_pb2.GetSourceRequest(name=args.name))
        _print(args, render.source_data(found), render.sources([found]))
    elif args.action == "switch":
        answer = client.call("SwitchSource", manager_pb2.SwitchSourceRequest(
            name=args.name, to=args.to))
        _print(args, answer, f"source {answer.name}: primary {answer.member} (was "
               f"{answer.previous or '?'}), at GTID {answer.gtid or '?'}; its pipelines go on "
               "there once they have loaded what they read")
    else:
        answer = client.call("DeleteSource", manager_pb2.DeleteSourceRequest(name=args.name))
        _print(args, answer, f"source {answer.name} deleted")
    return 0


def _status(args: argparse.Namespace, client: ManagerClient) -> int:
    while True:
        answer = client.call("Status", manager_pb2.StatusRequest())
        role = "leader" if answer.leader else f"standby (leader: {answer.leader_address or '?'})"
        page = f", page {answer.web_url}" if answer.web_url else ""
        human = (f"manager {answer.manager_address} ({role}), {len(answer.nodes)} node(s)"
                 f"{page}\n" + render.pipelines(answer.channels))
        if answer.alarms:
            human += "\n\n" + render.alarms(answer.alarms)
        if args.watch and args.output == "table":
            print("\033[2J\033[H" + time.strftime("%H:%M:%S ") + human, flush=True)
        else:
            _print(args, answer, human)
        if not args.watch:
            return 0
        time.sleep(args.interval)


class _Printable:
    """A text stream that shows control characters (an ESC of a terminal sequence, say)
    escaped: what the CLI prints comes partly from definitions and servers (descriptions,
    error texts), and must not drive the user's terminal (OSC 52 writes the clipboard)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(printable(text))

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with control characters (but newline, tab, carriage return) escaped."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def main(argv: list[str] | None = None) -> int:
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Printable(out), _Printable(err)  # type: ignore[assignment]
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "version":
            print(f"setl {version()}")
            return 0
        if args.command == "sandbox":
            return sandboxcli.run(args)
        if args.command == "lake":  # on the files themselves: no manager
            return lakecli.run(args)
        if args.command in ("backfill", "retl", "check"):  # they open the database themselves
            config = args.config or os.environ.get("SETL_CONFIG") or \
                (CONF / "node.yaml" if (CONF / "node.yaml").exists() else None)
            confinement.confine(settings.load_security(config))
        client = ManagerClient(addresses_from(args.manager),
                               access=access_from(args.token, args.ca, args.cert, args.key))
        if args.command == "apply":
            return _apply(args, client)
        if args.command == "channel":
            return _channel(args, client)
        if args.command == "source":
            return _source(args, client)
        if args.command == "position":
            return _position(args, client)
        if args.command == "backfill":
            # "status" without --table is the counters; a channel named status gives --table
            run = backfill.status if args.channel == "status" and not args.table \
                else backfill.backfill
            return run(args, client)
        if args.command == "retl":
            return backfill.retl_init(args, client)
        if args.command == "check":
            return checkcli.run(args, client)
        if args.command == "snapshot":
            return snapshotcli.snapshot(args, client, args.output)
        if args.command == "verify":
            return verifycli.run(args, client)
        if args.command == "subscribe":
            return subscribecli.run(args, client)
        if args.command == "subscription":
            return subscribecli.admin(args, client)
        if args.command == "node":
            answer = client.call("ListNodes", manager_pb2.ListNodesRequest())
            _print(args, answer, render.nodes(answer.nodes))
            return 0
        return _status(args, client)
    except SetlError as exc:
        print(f"setl: {exc}", file=sys.stderr)
        return verifycli.EXIT_ERROR if args.command == "verify" else EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
