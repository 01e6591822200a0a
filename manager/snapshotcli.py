"""``setl snapshot``: copy a table in a pipeline's stream, and watch or control copies.

    setl snapshot CHANNEL --table schema.table [--where COND] [--pipeline P] [--wait]
    setl snapshot status CHANNEL [--pipeline P] [--wait]
    setl snapshot pause|resume CHANNEL [--pipeline P]
    setl snapshot cancel CHANNEL [--table schema.table] [--pipeline P]

``--wait`` shows a progress bar on stderr until the copies end (exit 1 if one failed:
with ``--table``, if the copy this command asked for failed, once the node has taken the
request and the copy ended; earlier copies of the table, and other copies, are listed, not
judged).
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
    judged = list(answer.copies)  # without --wait: every copy listed
    if args.wait and action in ("start", "status"):
        status = manager_pb2.SnapshotRequest(
            channel=what[0], pipeline=answer.pipeline_id.partition(".")[2], action="status")
        asked = _plain(args.table) if action == "start" else ""
        before = [copy for copy in answer.copies if copy.table == asked]
        answer, mine = _wait(client, status, asked, before)
        judged = [mine] if mine is not None else list(answer.copies)
    if output == "table":
        print(render.copies(answer.pipeline_id, answer.copies, answer.paused))
    else:
        print(render.structured(answer, output))
    return 1 if any(copy.state == "failed" for copy in judged) else 0


def _new_copy(copies: Sequence[manager_pb2.TableCopy], asked: str,
              before: Sequence[manager_pb2.TableCopy]) -> manager_pb2.TableCopy | None:
    """The copy of ``asked`` this command asked for, once the node has taken the request
    (None until then): a copy of that table newer than every one listed when it was asked
    (``before``). Finished copies stay listed for days, an earlier one that failed among
    them (one a DDL failed says to copy the table again, by this command), and the request
    shows only once the node has split the table and saved it: the newest copy listed is not
    the one asked for until there are more copies of the table than those of ``before``
    still listed. Copies are listed as started, so the new one is the last of the table; a
    finished copy does not change (found again by its fields), but may be dropped from the
    list meanwhile (the oldest, past :data:`node.snapshot.state.KEPT_S` or the newest
    ``KEPT_FINISHED``); one under way stays listed."""
    now = [copy for copy in copies if copy.table == asked]
    unmatched = list(now)
    still = 0
    for old in before:
        if old.state == "copying":
            still += 1
        elif old in unmatched:
            unmatched.remove(old)
            still += 1
    return now[-1] if len(now) > still else None


def _wait(client: ManagerClient, request: manager_pb2.SnapshotRequest, asked: str,
          before: Sequence[manager_pb2.TableCopy]
          ) -> tuple[manager_pb2.SnapshotResponse, manager_pb2.TableCopy | None]:
    """Poll until no copy is copying, a bar on stderr; with ``asked`` (a table), until the
    copy of it asked for (:func:`_new_copy`) has shown and ended, and return that copy too
    (the one the exit status is for: other copies are listed, not judged)."""
    while True:
        answer = client.call("Snapshot", request)
        mine = _new_copy(answer.copies, asked, before) if asked else None
        copies = ([mine] if mine is not None else []) if asked else list(answer.copies)
        active = [c for c in copies if c.state == "copying"]
        if active:
            print("\r" + render.copy_bar(active), end="", file=sys.stderr, flush=True)
        if copies and not active:
            print("", file=sys.stderr)
            return answer, mine
        time.sleep(WAIT_POLL_S)


def _plain(table: str) -> str:
    return table.replace("`", "")
