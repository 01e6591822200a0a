"""One lake table's commits: each carries setl's position, conditional on the version its
writer last read (see :mod:`node.target.delta`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from node.cursor import Cursor
from shared.errors import FencedError, LoadError
from shared.lakes import Stamp, app_id, last_stamp

__all__ = ["Stamp", "app_id", "commit", "cursor", "last_stamp"]

log = logging.getLogger("setl.node.target.delta")
TRIES = 5  # a commit that lost to a writer of the same epoch (another tool) is made again


def cursor(stamp: Stamp) -> Cursor | None:
    """Where a table's stamp says it stands (None: nothing loaded)."""
    if not stamp.position.file:
        return None
    return Cursor(stamp.position, stamp.process_id, run=stamp.run)


def commit(table: Any, name: str, stamp: Stamp | Callable[[], Stamp],
           write: Callable[[Any], None]) -> None:
    """Make one commit with ``write(properties)`` on the version ``table`` was read at.

    A commit that finds a newer version fails (no retry inside delta-rs): the table is read
    again, and when a newer owner's commit is there this writer is fenced; else (another
    tool committed: an OPTIMIZE, a reader's maintenance) it is made again on the new
    version. A callable ``stamp`` (a fence, which keeps the table's position) is asked again
    for each attempt, after the table was read again."""
    from deltalake import CommitProperties, Transaction
    from deltalake.exceptions import CommitFailedError

    made = stamp
    for attempt in range(1, TRIES + 1):
        stamp = made() if callable(made) else made
        properties = CommitProperties(
            custom_metadata=stamp.metadata(), max_commit_retries=0,
            app_transactions=[Transaction(app_id(stamp.pipeline), max(stamp.process_id, 0))])
        try:
            write(properties)
            return
        except CommitFailedError as exc:
            table.update_incremental()
            found = last_stamp(table, stamp.pipeline)
            if found is not None and found.epoch > stamp.epoch and \
                    (not found.run or not stamp.run or found.run == stamp.run):
                raise FencedError(f"pipeline {stamp.pipeline}: lake table {name} is written "
                                  f"by a newer owner (epoch {found.epoch} > {stamp.epoch}); "
                                  "this node lost the pipeline and stops", name,
                                  found.epoch) from None
            log.info("event=lake_commit_lost pipeline=%s table=%s attempt=%d reason=%r",
                     stamp.pipeline, name, attempt, str(exc))
    raise LoadError(f"lake table {name}: {TRIES} commits in a row "
                    "lost to other writers; stop what else writes the table, then resume")
