"""The ``retl`` system schema setl keeps on sources and targets, in one place.

- ``retl_position`` (targets): each pipeline's applied position and owner epoch, written in the
  same transaction as the data (exactly-once effect, fencing).
- ``retl_mark`` (both sides of a two-way channel): one row per pipeline, touched inside every
  load transaction; the reverse pipeline's Select drops transactions that carry its channel's
  mark, so changes do not ping-pong.
- ``retl_buffer`` (sources): the free door's backfill requests (see the README, Free door).
"""

from __future__ import annotations

SCHEMA = "retl"

POSITION_DDL = """CREATE TABLE IF NOT EXISTS retl.retl_position (
  pipeline_id VARCHAR(191) NOT NULL PRIMARY KEY,
  process_id BIGINT NOT NULL,
  binlog_file VARCHAR(255) NOT NULL,
  binlog_pos BIGINT NOT NULL,
  gtid VARCHAR(1024) NOT NULL DEFAULT '',
  owner_epoch BIGINT NOT NULL DEFAULT 0,
  updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB"""

MARK_DDL = """CREATE TABLE IF NOT EXISTS retl.retl_mark (
  CHANNEL_ID VARCHAR(191) NOT NULL,
  PIPELINE_ID VARCHAR(191) NOT NULL,
  PROCESS_ID BIGINT NOT NULL DEFAULT 0,
  GMT_MODIFIED TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (CHANNEL_ID, PIPELINE_ID)
) ENGINE=InnoDB"""

TARGET_DDL = (f"CREATE DATABASE IF NOT EXISTS {SCHEMA}", POSITION_DDL, MARK_DDL)
