"""The ``retl`` system schema setl keeps on sources and targets, in one place.

- ``retl_position`` (targets): each pipeline's applied position and owner epoch, written in the
  same transaction as the data (exactly-once effect, fencing).
- ``retl_mark`` (both sides of a two-way channel): one row per pipeline, touched inside every
  load transaction; the reverse pipeline's Select drops transactions that carry its channel's
  mark, so changes do not ping-pong.
- ``retl_buffer`` (sources): the free door's backfill requests (docs/free-door-and-snapshots.md).
- ``retl_pending`` (sources): per-instance requests each pipeline saw and has not served yet.
- ``retl_signal`` (sources): the low and high watermarks a pipeline writes around the rows
  it reads for a snapshot or a free-door request; they come back to it through the binlog,
  which places the rows read in its ordered stream (docs/free-door-and-snapshots.md).
"""

from __future__ import annotations

import base64
import datetime
import json
from decimal import Decimal
from typing import Any

from shared.errors import FreeDoorRequestError as Bad

SCHEMA = "retl"

POSITION_DDL = """CREATE TABLE IF NOT EXISTS retl.retl_position (
  pipeline_id VARCHAR(191) NOT NULL PRIMARY KEY,
  process_id BIGINT NOT NULL,
  binlog_file VARCHAR(255) NOT NULL,
  binlog_pos BIGINT NOT NULL,
  gtid VARCHAR(1024) NOT NULL DEFAULT '',
  owner_epoch BIGINT NOT NULL DEFAULT 0,
  updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  run VARCHAR(64) NOT NULL DEFAULT '',
  source_server VARCHAR(255) NOT NULL DEFAULT ''
) ENGINE=InnoDB"""
# columns position rows made by older versions lack ('' = unknown): the pipeline's run,
# the server whose binlog file/pos the row names
POSITION_COLUMNS = {"run": "VARCHAR(64) NOT NULL DEFAULT ''",
                    "source_server": "VARCHAR(255) NOT NULL DEFAULT ''"}


def upgrade_position_table(cursor: Any) -> None:
    """Add the columns an older ``retl_position`` lacks (DDL: commits on its own)."""
    cursor.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                   "'retl' AND TABLE_NAME = 'retl_position'")
    have = {str(row[0]).lower() for row in cursor.fetchall()}
    for name, kind in POSITION_COLUMNS.items():
        if name not in have:
            cursor.execute(f"ALTER TABLE retl.retl_position ADD COLUMN {name} {kind}")

MARK_DDL = """CREATE TABLE IF NOT EXISTS retl.retl_mark (
  CHANNEL_ID VARCHAR(191) NOT NULL,
  PIPELINE_ID VARCHAR(191) NOT NULL,
  PROCESS_ID BIGINT NOT NULL DEFAULT 0,
  GMT_MODIFIED TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (CHANNEL_ID, PIPELINE_ID)
) ENGINE=InnoDB"""

TARGET_DDL = (f"CREATE DATABASE IF NOT EXISTS {SCHEMA}", POSITION_DDL, MARK_DDL)


def loop_comment(channel: str) -> str:
    """What a two-way channel's DDL carries at its start when setl runs it on a target: a
    DDL commits on its own, so no ``retl_mark`` row can share its transaction; the opposite
    pipeline knows its own channel's DDL by this comment (kept in the binlog) and drops it."""
    return f"/* setl-loop {json.dumps(channel)} */ "

BUFFER_DDL = """CREATE TABLE IF NOT EXISTS retl.retl_buffer (
  ID BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  TABLE_ID INT NOT NULL DEFAULT 0,
  FULL_NAME VARCHAR(512) NOT NULL,
  TYPE CHAR(1) NOT NULL,
  PK_DATA TEXT NOT NULL,
  GMT_CREATE TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  GMT_MODIFIED TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
    ON UPDATE CURRENT_TIMESTAMP(6),
  CHANNEL_ID VARCHAR(191) NULL,
  PIPELINE_ID VARCHAR(191) NULL,
  KEY by_pipeline (CHANNEL_ID, PIPELINE_ID, ID)
) ENGINE=InnoDB"""

SIGNAL_DDL = """CREATE TABLE IF NOT EXISTS retl.retl_signal (
  ID BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  PIPELINE_ID VARCHAR(191) NOT NULL,
  WINDOW_ID BIGINT UNSIGNED NOT NULL,
  KIND CHAR(1) NOT NULL,
  GMT_CREATE TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB"""

# per-instance requests a pipeline has seen in its stream and not yet served, copied before
# the batch that carried them can load: another pipeline of the same source may serve a
# request and delete its buffer row first, and a restart must still find it (SEQ: the order
# the pipeline saw them in)
PENDING_DDL = """CREATE TABLE IF NOT EXISTS retl.retl_pending (
  SEQ BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  PIPELINE_ID VARCHAR(191) NOT NULL,
  ID BIGINT UNSIGNED NOT NULL,
  FULL_NAME VARCHAR(512) NOT NULL,
  TYPE CHAR(1) NOT NULL,
  PK_DATA TEXT NOT NULL,
  UNIQUE KEY by_request (PIPELINE_ID, ID),
  KEY by_pipeline (PIPELINE_ID, SEQ)
) ENGINE=InnoDB"""

SOURCE_DDL = (f"CREATE DATABASE IF NOT EXISTS {SCHEMA}", BUFFER_DDL, MARK_DDL, SIGNAL_DDL,
              PENDING_DDL)
SOURCE_TABLES = ("retl_buffer", "retl_mark", "retl_signal", "retl_pending")
BUFFER_TABLE = (SCHEMA, "retl_buffer")
SIGNAL_TABLE = (SCHEMA, "retl_signal")
PENDING_TABLE = (SCHEMA, "retl_pending")
MARK_TABLE = (SCHEMA, "retl_mark")
INTENT_TABLE = (SCHEMA, "retl_ddl")  # a target's DDL intents (node/target/mysql/ddlapply.py)


def encode_key(values: tuple[Any, ...] | list[Any]) -> str:
    """A row's key values as ``PK_DATA``: a JSON array in key column order. Numbers and
    strings are JSON numbers and strings, DECIMAL a string, dates and times ISO strings,
    binary values ``{"base64": "..."}``."""
    return json.dumps([_plain(value) for value in values], ensure_ascii=False)


def decode_key(text: str) -> list[Any]:
    """``PK_DATA`` back to key values (binary as bytes); raises :class:`FreeDoorRequestError`."""
    try:
        values = json.loads(text)
    except ValueError as exc:
        raise Bad(f"PK_DATA is not JSON ({exc.args[0]}): {text[:100]!r}") from None
    if not isinstance(values, list) or not values:
        raise Bad("PK_DATA must be a non-empty JSON array of key values, got "
                                   f"{text[:100]!r}")
    decoded = []
    for value in values:
        if isinstance(value, dict):
            if set(value) != {"base64"} or not isinstance(value["base64"], str):
                raise Bad(f'PK_DATA: an object must be {{"base64": ...}}, got {value!r}')
            try:
                value = base64.b64decode(value["base64"], validate=True)
            except ValueError:
                raise Bad(f"PK_DATA: bad base64 {value['base64'][:60]!r}") from None
        elif isinstance(value, list) or value is None:
            raise Bad(f"PK_DATA: a key value cannot be {json.dumps(value)}")
        decoded.append(value)
    return decoded


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return {"base64": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat(sep=" ") if isinstance(value, datetime.datetime) \
            else value.isoformat()
    if isinstance(value, datetime.timedelta):
        return time_text(value)
    return value


def time_text(value: datetime.timedelta) -> str:
    """A TIME value as MariaDB reads it back, ``[-]HH:MM:SS[.ffffff]`` with hours past 24
    (``str()`` gives ``1 day, 2:00:00`` and ``-1 day, 23:00:00``, which it reads as others)."""
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    seconds, fraction = divmod(micros, 1_000_000)
    text = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return f"{text}.{fraction:06d}" if fraction else text
