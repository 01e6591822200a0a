"""``setl backfill`` and ``setl retl init``: the free door from the command line.

``setl backfill CHANNEL --table schema.table [--where SQL] [--batch N] [--rate N]`` reads the
table's keys (the ones the node reads requests by: the pair's ``key_columns``, else the
table's own key; a table with no key of its own is refused) on the pipeline's source in key
order (keyset pages of ``--batch`` keys) and writes one ``retl.retl_buffer`` request per row:
into the source's own buffer (per-instance free door) or, when the pipeline names a
``free_door`` source, into that central buffer with the pipeline's CHANNEL_ID/PIPELINE_ID.
It is throttled to ``--rate`` requests a second and shows rows done / total, rate and ETA.
The node serves the requests in bounded slices between normal batches, so live replication
goes on.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import pymysql

from manager import render
from manager.client import ManagerClient
from shared import codec, datatypes, identifiers
from shared.endpoint import READ_ISOLATION, READING, connect
from shared.errors import ConfigError, FreeDoorRequestError, SetlError
from shared.identifiers import qualified, quote, short_form, split_qualified, unquote
from shared.model import TWO_WAY_COPY, Channel, DataSource, Pipeline
from shared.retl import SOURCE_DDL, encode_key
from shared.rpc import manager_pb2
from shared.tablekeys import door_key

INSERT = ("INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA, CHANNEL_ID, PIPELINE_ID) "
          "VALUES (%s, 'I', %s, %s, %s)")


def add_commands(commands: Any) -> None:
    backfill = commands.add_parser("backfill", help="copy rows through the free door")
    backfill.add_argument("channel", help="the channel, or 'status' for the counters (a "
                                          "channel named status: give --table)")
    backfill.add_argument("--table", help="schema.table on the pipeline's source")
    backfill.add_argument("--where", default="", help="an SQL condition on the table's rows")
    backfill.add_argument("--batch", type=int, default=10_000, help="keys per page (default 10000)")
    backfill.add_argument("--rate", type=int, default=50_000,
                          help="requests a second at most (default 50000)")
    backfill.add_argument("--pipeline", help="the pipeline (default: the first whose pairs "
                                             "take the table)")
    retl = commands.add_parser("retl", help="the retl system schema")
    init = retl.add_subparsers(dest="action", required=True, metavar="ACTION").add_parser(
        "init", help="create retl.retl_buffer, retl_mark, retl_signal and retl_pending on a "
                     "source (idempotent)")
    init.add_argument("source", help="a source name from the definitions")


def _source(client: ManagerClient, name: str) -> DataSource:
    return codec.from_proto(client.call("GetSource", manager_pb2.GetSourceRequest(name=name)),
                            DataSource)


def retl_init(args: argparse.Namespace, client: ManagerClient) -> int:
    source = _source(client, args.source)
    with connect(source, autocommit=True) as conn, conn.cursor() as cursor:
        for statement in SOURCE_DDL:
            cursor.execute(statement)
    print(f"retl schema ready on {source.name} ({source.host}:{source.port})")
    return 0


def status(args: argparse.Namespace, client: ManagerClient) -> int:
    answer = client.call("Status", manager_pb2.StatusRequest())
    rows = [(p.pipeline_id, p.free_door.requested, p.free_door.loaded, p.free_door.missing,
             p.free_door.rejected, p.free_door.pending)
            for info in answer.channels for p in info.pipelines]
    print(render.table(["PIPELINE", "REQUESTED", "LOADED", "MISSING", "REJECTED", "PENDING"],
                       rows))
    return 0


def _pipeline(channel: Channel, schema: str, table: str, wanted: str | None) -> Pipeline:
    for pipeline in channel.pipelines:
        if wanted and pipeline.name != wanted:
            continue
        if any(p.source.namespace.matches_schema(schema) and p.source.table.matches(table)
               for p in pipeline.pairs):
            return pipeline
    raise SetlError(f"channel {channel.name}: no pipeline{' ' + wanted if wanted else ''} "
                    f"replicates {schema}.{table}; check the pairs or --pipeline")


def backfill(args: argparse.Namespace, client: ManagerClient) -> int:
    try:
        schema, table = map(unquote, split_qualified(args.table or ""))
    except ConfigError:
        raise SetlError("give --table schema.table (a name that holds a dot in backticks: "
                        "`my-db`.`t.1`)") from None
    info = client.call("GetChannel", manager_pb2.GetChannelRequest(name=args.channel))
    channel = codec.from_proto(info.channel, Channel)
    if channel.two_way:  # (its node would leave the requests in the buffer, not taken)
        raise ConfigError(f"channel {args.channel} is two-way, which takes no backfill: "
                          f"{TWO_WAY_COPY}")
    pipeline = _pipeline(channel, schema, table, args.pipeline)
    if client.call("GetSource", manager_pb2.GetSourceRequest(name=pipeline.target)).type == \
            "subscription":
        raise ConfigError(f"channel {args.channel} feeds a subscription, which carries the "
                          "binlog's changes only: nothing is backfilled into it (its reader "
                          "reads the table itself if it needs the rows)")
    central = pipeline.params.free_door_source
    source = _source(client, pipeline.source)
    buffer = _source(client, central) if central else source
    channel_id, pipeline_id = (args.channel, pipeline.name) if central else (None, None)
    # the keys read in the session the node reads them in (a TIMESTAMP in UTC, as the node
    # looks it up), else a source whose time zone is not UTC sent keys the node never found
    with connect(source, init_command=READING, isolation=READ_ISOLATION) as reader, \
            connect(buffer, autocommit=True) as writer:
        keys = _keys(reader, args.channel, pipeline, schema, table)
        with writer.cursor() as cursor:
            for statement in SOURCE_DDL:
                cursor.execute(statement)
        done = _copy_keys(args, reader, writer, schema, table, keys, (channel_id, pipeline_id))
    where = f"central buffer on {buffer.name}" if central else f"retl_buffer on {source.name}"
    print(f"{done} request(s) for {schema}.{table} written to the {where} "
          f"(channel {args.channel}, pipeline {pipeline.name}); follow: setl backfill status")
    return 0


def _keys(reader: Any, channel: str, pipeline: Pipeline, schema: str, table: str
          ) -> tuple[str, ...]:
    """The columns the requests name, the ones the node reads them by: the pair's
    key_columns, else the table's own key; a table with no key of its own is refused."""
    try:
        with reader.cursor() as cursor:
            return door_key(cursor, schema, table, pipeline.key_columns(schema, table))
    except FreeDoorRequestError as exc:
        raise SetlError(f"channel {channel} pipeline {pipeline.name}: {exc}; no request was "
                        "written") from None
    except pymysql.MySQLError as exc:
        raise SetlError(f"backfill of {schema}.{table}: {exc.args[-1] if exc.args else exc}"
                        ) from None


def _expressions(cursor: Any, schema: str, table: str, keys: tuple[str, ...]
                 ) -> tuple[str, str]:
    """The key columns as the node reads them (:func:`shared.datatypes.read_expression`): a
    FLOAT as its double (its text, six digits, is another number: 1234567 read 1234570,
    which no row has, and paging past it skipped the rows in between), a BIT as a number,
    text in an inexact charset as its bytes; the value written is the value the node
    finds. Second, what the pages are ordered and cut by: the columns themselves, which
    their index serves (a FLOAT compares with its exact double, a BIT with its number),
    but the bytes of text in an inexact charset (its text is not what the column holds)."""
    cursor.execute("SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_SET_NAME FROM "
                   "information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                   (schema, table))
    found = {str(name): (str(kind).lower(), charset) for name, kind, charset in cursor.fetchall()}
    read = [datatypes.read_expression(key, *found[key]) if key in found else quote(key)
            for key in keys]
    paged = [quote(key) if found.get(key, ("",))[0] in ("float", "bit") else expression
             for key, expression in zip(keys, read, strict=True)]
    return ", ".join(read), ", ".join(paged)


def _copy_keys(args: argparse.Namespace, reader: Any, writer: Any, schema: str, table: str,
               keys: tuple[str, ...], owner: tuple[str | None, str | None]) -> int:
    name = qualified(schema, table)
    condition = f"({args.where})" if args.where else "TRUE"
    try:
        with reader.cursor() as cursor:
            # the values read as the node reads them, each page starting just after the
            # value the last one ended at
            columns, order = _expressions(cursor, schema, table, keys)
            cursor.execute(f"SELECT COUNT(*) FROM {name} WHERE {condition}")
            total = int(cursor.fetchone()[0])
            done, last, started = 0, None, time.monotonic()
            while True:
                after = f" AND ({order}) > ({', '.join(['%s'] * len(keys))})" if last else ""
                cursor.execute(f"SELECT {columns} FROM {name} WHERE "
                               f"{identifiers.condition(condition)}{after} "
                               f"ORDER BY {order} LIMIT %s", (*(last or ()), args.batch))
                page = cursor.fetchall()
                if not page:
                    break
                with writer.cursor() as out:
                    out.executemany(INSERT, [(short_form(schema, table), encode_key(key), *owner)
                                             for key in page])
                done, last = done + len(page), page[-1]
                _progress(done, total, started)
                time.sleep(max(0.0, done / args.rate - (time.monotonic() - started)))
    except pymysql.MySQLError as exc:
        raise SetlError(f"backfill of {schema}.{table}: {exc.args[-1] if exc.args else exc}"
                        ) from None
    print(file=sys.stderr)
    return done


def _progress(done: int, total: int, started: float) -> None:
    elapsed = max(time.monotonic() - started, 1e-6)
    rate = done / elapsed
    eta = (total - done) / rate if rate and total > done else 0
    print(f"\r{done:,} / {total:,} rows  {rate:,.0f} rows/s  ETA {eta:,.0f} s",
          end="", file=sys.stderr, flush=True)
