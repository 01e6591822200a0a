"""``setl snapshot``: copy a table in a pipeline's stream, and watch or control copies.

    setl snapshot CHANNEL --table schema.table [--where COND] [--pipeline P] [--wait]
    setl snapshot status CHANNEL [--pipeline P] [--wait]
    setl snapshot pause|resume CHANNEL [--pipeline P]
    setl snapshot cancel CHANNEL [--table schema.table] [--pipeline P]

``--wait`` shows a progress bar on stderr until the copies end (exit 1 if one failed:
with ``--table``, if the copy of that table failed; other copies are listed, not judged).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from manager import render
from manager.client import ManagerClient
from shared.errors import ConfigError
from shared.rpc import manager_pb2

ACTIONS = ("status", "pause", "resume", "cancel")
WAIT_POLL_S = 1.0


def add_commands(commands: Any) -> None:
    snapshot = commands.add_parser(
        "snapshot", help="copy a table in a pipeline's stream; status, pause, resume, cancel",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    snapshot.add_argument("what", nargs="+", metavar="[ACTION] CHANNEL",
                          help="CHANNEL to copy a table in it, or status|pause|resume|cancel "
                               "CHANNEL")
    snapshot.add_argument("--table", default="", help="schema.table on the pipeline's source")
    snapshot.add_argument("--where", default="", help="copy only the rows matching this SQL "
                                                      "condition")
    snapshot.add_argument("--pipeline", default="", help="the pipeline (default: the first "
                                                         "whose pairs take the table)")
    snapshot.add_argument("--wait", action="store_true", help="wait until the copies end, "
                                                              "showing progress")


def snapshot(args: argparse.Namespace, client: ManagerClient, output: str) -> int:
    what = list(args.what)
    action = what.pop(0) if what[0] in ACTIONS and len(what) > 1 else "start"
    if len(what) != 1:
        raise ConfigError(f"setl snapshot: expected [ACTION] CHANNEL, got {' '.join(args.what)}"
                          f"; ACTION is one of {', '.join(ACTIONS)}")
    request = manager_pb2.SnapshotRequest(channel=what[0], pipeline=args.pipeline,
                                          action=action, table=args.table, where=args.where)
    answer = client.call("Snapshot", request)
    if answer.message:
        print(answer.message, file=sys.stderr)
    if args.wait and action in ("start", "status"):
        status = manager_pb2.SnapshotRequest(
            channel=what[0], pipeline=answer.pipeline_id.partition(".")[2], action="status")
        answer = _wait(client, status, asked=args.table if action == "start" else "")
    if output == "table":
        print(render.copies(answer.pipeline_id, answer.copies, answer.paused))
    else:
        print(render.structured(answer, output))
    return 1 if any(copy.state == "failed" for copy in _judged(
        answer.copies, args.table if args.wait and action == "start" else "")) else 0


def _judged(copies: Sequence[manager_pb2.TableCopy], asked: str) -> list[manager_pb2.TableCopy]:
    """The copies the exit status is for: with ``--table``, the copy this command asked for
    (the newest of that table: copies are listed as started), not an earlier copy of the
    channel that failed (one a DDL failed says to copy the table again, by this command);
    otherwise all of them."""
    if not asked:
        return list(copies)
    return [copy for copy in copies if copy.table == _plain(asked)][-1:]


def _wait(client: ManagerClient, request: manager_pb2.SnapshotRequest,
          asked: str) -> manager_pb2.SnapshotResponse:
    """Poll until no copy (or the one asked for, once it shows) is copying; a bar on stderr."""
    seen = False
    while True:
        answer = client.call("Snapshot", request)
        copies = [c for c in answer.copies if not asked or c.table == _plain(asked)]
        seen = seen or bool(copies)
        active = [c for c in copies if c.state == "copying"]
        if active:
            print("\r" + render.copy_bar(active), end="", file=sys.stderr, flush=True)
        if seen and not active:
            print("", file=sys.stderr)
            return answer
        time.sleep(WAIT_POLL_S)


def _plain(table: str) -> str:
    return table.replace("`", "")
