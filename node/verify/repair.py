"""``--repair``: every key verify confirmed different becomes a free-door request, so the fix
travels inside the pipeline's ordered stream (never a direct write to the target that could
race it and put an old row over a newer one).

- A key whose row the source has (missing or different on a target): ``I`` — the owning
  pipeline reads the row as it is then and loads it in order.
- A key with a row on a target where the source gives none (extra): ``D`` — deleted on the
  target by key (on every slot of a shard route). Written before the ``I`` requests, so a
  row in the wrong slot is deleted there and then written in its own.
- A key a target table holds more than once (a lake table, which has no unique key): ``D``
  and ``I`` — every row of the key deleted, then the source's written (an ``I`` alone would
  update each of them).

A table with no key of its own (no primary key, no unique key over NOT NULL columns) is not
repaired, whatever its pair's ``key_columns``: the free door refuses it (its rows replicate
by their whole image, and a row copied by key would be written beside the target's copy).

Requests go to the central buffer when the pipeline has ``free_door:``, else to the
source's own ``retl.retl_buffer``; they are served when their rows have left the buffer
(deleted once their batch is loaded).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pymysql

from node.extract.chunks import SplitKey
from node.extract.freedoor import create_retl
from node.verify.readers import Key
from node.verify.settle import Seen, kinds
from shared.endpoint import connect
from shared.errors import FreeDoorRequestError, SetlError, VerifyError
from shared.model import DataSource
from shared.retl import encode_key
from shared.tablekeys import door_key

INSERT = ("INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA, CHANNEL_ID, PIPELINE_ID) "
          "VALUES ")
PER_STATEMENT = 1000


@dataclass(frozen=True)
class Buffer:
    """Where a pipeline's free-door requests go."""

    source: DataSource
    channel: str | None  # set for the central buffer
    pipeline: str | None

    @property
    def name(self) -> str:
        return (f"central buffer on {self.source.name}" if self.channel
                else f"retl_buffer on {self.source.name}")


def requests_for(confirmed: dict[Key, Seen]) -> list[tuple[str, Key]]:
    """The requests that mend confirmed keys: deletes first, then copies."""
    deletes = [key for key, seen in confirmed.items()
               if any(kind == "extra" for kind, _ in kinds(seen)) or twice(seen)]
    copies = [key for key, seen in confirmed.items() if seen.expected]
    return [("D", key) for key in deletes] + [("I", key) for key in copies]


def refusal(source: DataSource, key_columns: tuple[str, ...], table: SplitKey) -> str | None:
    """Why the free door cannot mend a table's rows by the key verify compared them by
    (``key_columns``: its pair's): the table has no key of its own, or its key changed
    since (a request would name other columns than the node reads it by)."""
    try:
        with connect(source) as conn, conn.cursor() as cursor:
            columns = door_key(cursor, table.schema, table.table, key_columns)
    except FreeDoorRequestError as exc:
        return str(exc)
    except pymysql.MySQLError as exc:
        raise VerifyError(f"repair of {table.name}: cannot read its key on {source.name}: "
                          f"{exc.args[-1] if exc.args else exc}") from None
    if columns != table.columns:
        return (f"its rows were compared by ({', '.join(table.columns)}), and the free door "
                f"reads them by ({', '.join(columns)}) now (its key changed meanwhile); run "
                "verify again")
    return None


def twice(seen: Seen) -> bool:
    """Whether a target table holds the key more than once."""
    return any(len(rows) > 1 for _, rows in seen.actual)


def write(buffer: Buffer, full_name: str, requests: list[tuple[str, Key]]) -> list[range]:
    """Write the requests in one transaction; the ranges of buffer ids they got."""
    ranges = []
    try:
        with connect(buffer.source) as conn, conn.cursor() as cursor:
            create_retl(cursor)  # only where missing: no DDL in the binlog otherwise
            conn.begin()
            for start in range(0, len(requests), PER_STATEMENT):
                part = requests[start:start + PER_STATEMENT]
                cursor.execute(INSERT + ", ".join(["(%s, %s, %s, %s, %s)"] * len(part)),
                               [value for kind, key in part for value in
                                (full_name, kind, encode_key(key), buffer.channel,
                                 buffer.pipeline)])
                first = int(cursor.lastrowid)  # one statement's ids are consecutive
                ranges.append(range(first, first + len(part)))
            conn.commit()
    except pymysql.MySQLError as exc:
        raise VerifyError(f"repair of {full_name}: cannot write free-door requests to the "
                          f"{buffer.name}: {exc.args[-1] if exc.args else exc}") from None
    return ranges


def wait_served(buffer: Buffer, ranges: list[range], timeout_s: float,
                cancelled: Callable[[], bool], sleep: Callable[[float], None] = time.sleep
                ) -> None:
    """Until every request has left the buffer (its batch loaded); VerifyError after
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    left = -1
    try:
        with connect(buffer.source, autocommit=True) as conn, conn.cursor() as cursor:
            while True:
                left = 0
                for ids in ranges:
                    cursor.execute("SELECT COUNT(*) FROM retl.retl_buffer WHERE ID BETWEEN "
                                   "%s AND %s", (ids.start, ids.stop - 1))
                    left += int(cursor.fetchone()[0])
                if not left or cancelled() or time.monotonic() > deadline:
                    break
                sleep(0.2)
    except (pymysql.MySQLError, SetlError) as exc:
        raise VerifyError(f"repair: cannot follow the requests in the {buffer.name}: "
                          f"{exc.args[-1] if exc.args else exc}") from None
    if left:
        raise VerifyError(f"repair: {left} free-door request(s) in the {buffer.name} were not "
                          f"served within {timeout_s:.0f} s; is the pipeline running and "
                          "caught up? (setl status, setl backfill status)")
