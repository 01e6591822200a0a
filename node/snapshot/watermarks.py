"""A snapshot window between its watermarks (:class:`node.snapshot.controller.Snapshots`):
what it reads and where its reads stand, and the rows of ``retl.retl_signal`` that open
(``L``), close (``H``) or abandon (``A``) it. Both come back through the binlog, where Select
keeps the window inside one batch (:mod:`node.select.selector`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pymysql

from node.extract.reads import Read
from node.snapshot.windowreads import Work, label
from shared.endpoint import connect
from shared.errors import SourceError
from shared.model import DataSource
from shared.retl import SIGNAL_TABLE

log = logging.getLogger("setl.node.snapshot")
WINDOWS_IN_FLIGHT = 2  # windows read and waiting for their batch at once


@dataclass
class Window:
    id: int
    work: list[Work]
    reads: list[Read] | None = None
    batch: int = 0  # the processId of the batch that closed it

    def drop_stopped(self, pipeline_id: str) -> None:
        """Leave out the work, and its reads, of copies failed since it was read
        (:func:`stopped`)."""
        assert self.reads is not None
        kept = [(work, read) for work, read in zip(self.work, self.reads, strict=True)
                if not stopped(work)]
        if len(kept) < len(self.work):
            log.warning("event=snapshot_reads_dropped pipeline=%s window=%d "
                        "chunks=%s reason=the copy failed at a DDL",
                        pipeline_id, self.id, ",".join(
                            label(work) for work in self.work if stopped(work)))
            self.work = [work for work, _ in kept]
            self.reads = [read for _, read in kept]


def stopped(work: Work) -> bool:
    """Whether a chunk's copy failed (a DDL took its table away): it is read no more."""
    return work.copy is not None and work.copy.state == "failed"


def signal(source: DataSource, pipeline_id: str, kind: str, window_id: int) -> None:
    """Write a watermark of the window: a row of ``retl.retl_signal`` on the source."""
    try:
        with connect(source, autocommit=True) as conn, conn.cursor() as cursor:
            cursor.execute(f"INSERT INTO {'.'.join(SIGNAL_TABLE)} (PIPELINE_ID, WINDOW_ID, "
                           "KIND) VALUES (%s, %s, %s)", (pipeline_id, window_id, kind))
    except pymysql.MySQLError as exc:
        raise SourceError(f"pipeline {pipeline_id}: cannot write a watermark to "
                          f"{'.'.join(SIGNAL_TABLE)} on {source.name}: "
                          f"{exc.args[-1] if exc.args else exc}; the pipeline's user needs "
                          "INSERT on it (setl retl init creates it)") from None
