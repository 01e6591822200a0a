"""``setl lake optimize LOCATION``: a lake's tables compacted and vacuumed by hand, on the
machine that sees the location (a node does it itself every ``lake_compact_every``
commits). It runs beside a running channel: its commits carry no position, and the node's
next commit to a table it touched is made again on the new version."""

from __future__ import annotations

import argparse
from pathlib import Path

from shared import lakes, lakestore
from shared.errors import ConfigError

EXIT_OK = 0


def add_command(commands: argparse._SubParsersAction) -> None:
    lake = commands.add_parser("lake", help="maintain a lake target's Delta tables")
    actions = lake.add_subparsers(dest="action", required=True, metavar="ACTION")
    optimize = actions.add_parser("optimize", help="compact each table's small files, then "
                                  "delete files removed longer ago than --retain-hours")
    optimize.add_argument("location", help="the lake target's location (a directory, or "
                          "s3://bucket/path)")
    optimize.add_argument("--storage", action="append", default=[], metavar="KEY=VALUE",
                          help="an object store option, as the target's storage gives it (a "
                          "credential by reference: ${SETL_NAME} or file:/path); again for "
                          "more")
    optimize.add_argument("--table", action="append", default=[], metavar="SCHEMA.TABLE",
                          help="only this table (again for more); default: every table")
    optimize.add_argument("--retain-hours", type=int, default=168,
                          help="keep removed files this long for time travel (default 168)")


def run(args: argparse.Namespace) -> int:
    location = args.location if "://" in args.location else str(Path(args.location).absolute())
    for option in args.storage:
        key, _, value = option.partition("=")
        problem = lakestore.storage_problem(key, value) if value else f"{option!r}: write KEY=VALUE"
        if problem is not None:
            raise ConfigError(f"--storage {problem}")
    lake = lakes.Lake(location, args.storage)
    found = lake.tables()
    wanted = {tuple(name.split(".", 1)) for name in args.table}
    unknown = wanted - set(found)
    if unknown:
        raise ConfigError(f"{location} has no Delta table {'.'.join(sorted(unknown)[0])}; "
                          f"it has {', '.join('.'.join(t) for t in found) or 'none'}")
    for schema, table in found:
        if wanted and (schema, table) not in wanted:
            continue
        delta = lake.table(schema, table)
        done = lakes.maintain(delta, args.retain_hours)
        print(f"{schema}.{table}: {done.get('numFilesRemoved', 0)} files compacted into "
              f"{done.get('numFilesAdded', 0)}, {done['vacuumed']} removed files deleted; "
              f"version {delta.version()}")
    return EXIT_OK
