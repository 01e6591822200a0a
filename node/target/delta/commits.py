"""One lake table's commits: each carries setl's position and is checked, on the version it
is made on, against the newest stamp there (see :mod:`node.target.delta`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from node.cursor import Cursor
from shared import gtid
from shared.errors import FencedError, LoadError
from shared.lakes import Stamp, app_id, last_stamp
from shared.model import BinlogPosition

__all__ = ["Stamp", "app_id", "commit", "cursor", "last_stamp"]

log = logging.getLogger("setl.node.target.delta")
TRIES = 5  # a commit that lost to a writer of the same epoch (another tool) is made again


def cursor(stamp: Stamp) -> Cursor | None:
    """Where a table's stamp says it stands (None: nothing loaded)."""
    if not stamp.position.file:
        return None
    return Cursor(stamp.position, stamp.process_id, run=stamp.run)


def commit(table: Any, name: str, stamp: Stamp, write: Callable[[Any], None],
           keeps: bool = False, start: BinlogPosition | None = None) -> Stamp | None:
    """Make one commit with ``write(properties)`` on the version ``table`` holds, checked
    against the newest stamp of the pipeline there; the stamp committed, or None where the
    table holds ``stamp``'s batch already (nothing is committed: a row never goes back).

    Each attempt reads the newest stamp first: one of a newer owner fences this writer
    (:class:`FencedError`). The read sees the log as it is (``history`` lists the store,
    not the version held), and a commit finds no newer version or fails (no retry inside
    delta-rs): so a commit made was checked against the stamp of the version it follows.
    A failed one (another tool committed: an OPTIMIZE, a reader's maintenance; or a newer
    owner) is checked again on the version read again. ``keeps``: a commit of no batch
    (a fence, a compaction) that keeps the newest stamp's run and position, never
    skipped."""
    from deltalake import CommitProperties, Transaction
    from deltalake.exceptions import CommitFailedError

    for attempt in range(1, TRIES + 1):
        found = last_stamp(table, stamp.pipeline)
        made = checked(name, stamp, found, keeps, start)
        if made is None:
            log.info("event=lake_batch_held pipeline=%s table=%s position=%s held=%s",
                     stamp.pipeline, name, stamp.position, found and found.position)
            return None
        properties = CommitProperties(
            custom_metadata=made.metadata(), max_commit_retries=0,
            app_transactions=[Transaction(app_id(made.pipeline), max(made.process_id, 0))])
        try:
            write(properties)
            return made
        except CommitFailedError as exc:
            table.update_incremental()
            log.info("event=lake_commit_lost pipeline=%s table=%s attempt=%d reason=%r",
                     stamp.pipeline, name, attempt, str(exc))
    raise LoadError(f"lake table {name}: {TRIES} commits in a row "
                    "lost to other writers; stop what else writes the table, then resume")


def checked(name: str, stamp: Stamp, found: Stamp | None, keeps: bool,
            start: BinlogPosition | None = None) -> Stamp | None:
    """The stamp to commit over ``found`` (the table's newest): ``stamp``, or for a commit
    that ``keeps`` the position, ``found``'s with ``stamp``'s epoch; None when ``found``
    holds ``stamp``'s batch. Raises :class:`FencedError` when ``found`` is a newer owner's,
    and :class:`LoadError` when ``found``'s position lies inside the batches being written
    (after ``start``, before their end): an older owner wrote the table after this one's
    claim, which did not see it (it was made later), so Select did not cut there. Writing
    them would write that older owner's last batch again (a change log's rows twice); the
    retry claims the table (fencing that owner) and cuts at its position, as the MySQL
    target does (:func:`node.target.mysql.owners.applied`)."""
    if found is None:
        return stamp
    if found.epoch > stamp.epoch:  # whatever its run: ``setl position set/reset`` moves
        # the epoch on (shared.lakes.restamp), a later life's claim takes one above the
        # newest it finds (node.start.claim): a writer of an older epoch is a stale owner
        raise FencedError(f"pipeline {stamp.pipeline}: lake table {name} is written by a "
                          f"newer owner (epoch {found.epoch} > {stamp.epoch}); this node "
                          "lost the pipeline and stops", name, found.epoch)
    if keeps:
        return Stamp(stamp.pipeline, found.run, stamp.epoch, found.process_id,
                     found.position)
    ours = same_run(found, stamp)  # (another life's position says nothing of this one's)
    if ours and holds(found, stamp):
        return None
    if ours and start is not None and inside(found, start):
        raise LoadError(
            f"pipeline {stamp.pipeline}: lake table {name} holds the source's transactions "
            f"up to {found.position} (owner epoch {found.epoch}), inside the batches being "
            f"written ({start} to {stamp.position}): an older owner wrote it after this "
            "one claimed the lake, and writing them would add part of them twice, so the "
            "load stops. Its retry claims the table (the older owner is fenced) and goes on "
            "from its position; if this repeats, stop the channel and start it again")
    return stamp


def same_run(found: Stamp, stamp: Stamp) -> bool:
    """Whether two stamps are of one life of the pipeline (a stamp without one: taken for
    it, as before runs were written)."""
    return not found.run or not stamp.run or found.run == stamp.run


def inside(found: Stamp, start: BinlogPosition) -> bool:
    """Whether a table stamped ``found`` holds a position past ``start`` (batches that start
    there, and end past it: :func:`holds` said no). A batch without a start (the first one
    after a start without a position) has no inside."""
    if not found.position.file or not (start.file or start.gtid):
        return False
    return gtid.compare(found.position, start) > 0


def holds(found: Stamp, stamp: Stamp) -> bool:
    """Whether a table stamped ``found`` holds the batch ``stamp`` ends (its position is at
    or past the batch's end; an empty position holds nothing)."""
    return bool(found.position.file) and gtid.compare(found.position, stamp.position) >= 0
