"""``setl verify CHANNEL``: are the targets still equal to the source, through the channel's
own mappings? With ``--repair``, differing rows are sent through the free door.

    setl verify shop [--pipeline forward] [--table shop.orders] [--where "id < 1000"]
                     [--chunk-size 10000] [--rate 50000] [--columns a,b] [--repair]

A progress bar goes to stderr while it runs; the result is a table per pipeline (or
``-o json``). Exit code 0 when every table is verified and equal, 1 when differences remain
(a target table that does not exist is one: every source row is missing there), 2 on an
error (nothing could be verified, a database or the pipeline failed), 3 when no difference
was found but some keys could not be compared (*unsettled*: the pipeline stayed behind, or
writers kept the rows busy, through every re-check), 4 when no difference was found in the
tables verified but some tables were not verified (*incomplete*: the report says which and
why). 3 and 4 are not proven equal.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import yaml

from manager import render
from manager.client import ManagerClient
from shared.rpc import manager_pb2

EXIT_EQUAL, EXIT_DIFFERENT, EXIT_ERROR, EXIT_UNSETTLED, EXIT_INCOMPLETE = 0, 1, 2, 3, 4
SHOWN = 20  # differing keys listed per table in the human output


def add_command(commands: Any) -> None:
    verify = commands.add_parser(
        "verify", help="compare source and target tables through the channel's mappings",
        description="Compare each table a channel's pipelines replicate with its targets, "
        "chunk by chunk, through the pipeline's own Extract/Transform; rows that change "
        "while it runs are re-checked once the pipeline has loaded them, never reported as "
        "differences. Exit code 0: every table verified and equal, 1: differences remain "
        "(a missing target table is one), 2: error, 3: no difference found but some keys "
        "could not be compared in time (run it again), 4: no difference found but some "
        "tables were not verified (the report says why).")
    verify.add_argument("channel", help="the channel whose targets to compare")
    verify.add_argument("--pipeline", default="", help="one pipeline (default: every one)")
    verify.add_argument("--table", default="", help="schema.table on the source (default: "
                        "every table the pipeline's pairs take)")
    verify.add_argument("--where", default="", help="an SQL condition on the source rows")
    verify.add_argument("--chunk-size", type=int, default=10_000, help="rows a chunk")
    verify.add_argument("--rate", type=int, default=0, help="source rows read a second at "
                        "most (default: no limit)")
    verify.add_argument("--columns", default="", help="compare only these source columns "
                        "(comma-separated); lets pairs with a processor be verified")
    verify.add_argument("--compare", choices=["auto", "rows"], default="auto",
                        help="auto: the databases hash rows of pairs that only rename and "
                        "choose columns; rows: every row through Extract/Transform")
    verify.add_argument("--repair", action="store_true", help="send differing rows through "
                        "the free door, then check them again")
    verify.add_argument("--settle-timeout", type=int, default=120, help="seconds to wait for "
                        "the pipeline to load past a read before re-checking (default 120)")


def run(args: argparse.Namespace, client: ManagerClient) -> int:
    if args.chunk_size < 1 or args.rate < 0:
        print("setl: --chunk-size must be positive and --rate 0 or more", file=sys.stderr)
        return EXIT_ERROR
    request = manager_pb2.VerifyRequest(
        channel=args.channel, pipeline=args.pipeline, table=args.table, where=args.where,
        chunk_size=args.chunk_size, rate=args.rate, repair=args.repair,
        columns=[c.strip() for c in args.columns.split(",") if c.strip()],
        compare=args.compare, settle_timeout_s=args.settle_timeout)
    bar = ProgressBar()
    reports = []
    for message in client.stream("Verify", request):
        if message.HasField("report"):
            reports.append(message.report)
        else:
            bar.show(message)
    bar.done()
    code = exit_code(reports)
    if args.output == "table":
        print(human(reports))
    else:
        data = {"reports": [render.as_data(report) for report in reports], "exit_code": code}
        print(json.dumps(data, indent=2, sort_keys=True) if args.output == "json"
              else yaml.safe_dump(data, sort_keys=False).rstrip())
    return code


def exit_code(reports: list[manager_pb2.VerifyReport]) -> int:
    tables = [t for report in reports for t in report.tables]
    if not tables:
        return EXIT_ERROR  # nothing was verified (the report says why)
    left = [t.remaining if t.remaining >= 0 else t.differing_keys for t in tables]
    if any(left):
        return EXIT_DIFFERENT
    if any(t.unsettled for t in tables):  # a key never compared in time may differ
        return EXIT_UNSETTLED
    # a table left out (no key, only processor pairs, a change log) may differ: not "equal"
    return EXIT_INCOMPLETE if any(report.skipped for report in reports) else EXIT_EQUAL


def human(reports: list[manager_pb2.VerifyReport]) -> str:
    rows, lines = [], []
    for report in reports:
        for t in report.tables:
            rows.append((report.pipeline_id, t.table, t.method, f"{t.rows:,}", t.chunks,
                         t.missing, t.extra, t.different, f"{t.seconds:.2f} s",
                         f"{t.rows_per_second:,.0f}"))
    out = [render.table(["PIPELINE", "TABLE", "METHOD", "ROWS", "CHUNKS", "MISSING", "EXTRA",
                         "DIFFERENT", "TIME", "ROWS/S"], rows)] if rows else []
    for report in reports:
        for t in report.tables:
            for d in t.differences[:SHOWN]:
                lines.append(f"  {d.kind:<9} {t.table} key {d.key} on {d.target}")
            listed = len(t.differences)  # none: a missing target table (its note says)
            if listed > SHOWN or 0 < listed < t.differing_keys:
                lines.append(f"  … {t.differing_keys} differing key(s) in {t.table} "
                             "(all of them with -o json, up to 1,000)")
            if t.unsettled:
                lines.append(f"  {t.table}: {t.unsettled} key(s) not compared in time (the "
                             "pipeline stayed behind, or writers kept the rows busy, in every "
                             "re-check): run verify again when it has caught up")
            lines += [f"  note: {t.table}: {note}" for note in t.notes]
            if t.remaining >= 0:
                lines.append(f"  repair: {t.table}: {t.repaired} free-door request(s) to the "
                             f"{report.buffer}; {t.remaining} key(s) still differ after it")
        lines += [f"  not verified: {s.table}: {s.reason}" for s in report.skipped]
    code = exit_code(reports)
    skipped = sum(len(report.skipped) for report in reports)
    verdict = {EXIT_EQUAL: "equal", EXIT_ERROR: "nothing verified",
               EXIT_DIFFERENT: "differences remain",
               EXIT_UNSETTLED: "no difference found, but not proven equal: unsettled keys",
               EXIT_INCOMPLETE: f"no difference found in the tables verified, but not proven "
                                f"equal: {skipped} table(s) not verified"}[code]
    return "\n".join(out + lines + [verdict])


class ProgressBar:
    """One line on stderr, redrawn at most every 0.2 s."""

    def __init__(self, width: int = 24) -> None:
        self.width, self.drawn, self.shown = width, 0.0, False
        self.table, self.started = "", time.monotonic()

    def show(self, message: manager_pb2.VerifyProgress) -> None:
        now = time.monotonic()
        if (message.pipeline_id, message.table) != self.table:
            self.table, self.started = (message.pipeline_id, message.table), now
        if now - self.drawn < 0.2 and message.chunks_done < message.chunks_total:
            return
        self.drawn, self.shown = now, True
        share = message.chunks_done / message.chunks_total if message.chunks_total else 0
        filled = int(share * self.width)
        rate = message.rows_done / max(now - self.started, 1e-6)
        line = (f"{message.pipeline_id} {message.table} {message.phase} "
                f"[{'#' * filled}{'.' * (self.width - filled)}] {share:4.0%} "
                f"{message.chunks_done}/{message.chunks_total} chunks "
                f"{message.rows_done:,}/{message.rows_total:,} rows {rate:,.0f} rows/s")
        print(f"\r{line[:160]:<160}", end="", file=sys.stderr, flush=True)

    def done(self) -> None:
        if self.shown:
            print(file=sys.stderr, flush=True)

