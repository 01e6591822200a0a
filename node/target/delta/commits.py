"""One lake table's commits: each carries setl's position, conditional on the version its
writer last read (see :mod:`node.target.delta`)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from node.cursor import Cursor
from shared.errors import FencedError, LoadError
from shared.model import BinlogPosition

log = logging.getLogger("setl.node.target.delta")
PREFIX = "setl."
TRIES = 5  # a commit that lost to a writer of the same epoch (another tool) is made again


@dataclass
class Stamp:
    """What a commit of setl's says of itself (``setl.*`` commit metadata)."""

    pipeline: str
    run: str
    epoch: int
    process_id: int
    position: BinlogPosition

    def metadata(self) -> dict[str, str]:
        where = self.position
        return {PREFIX + "pipeline": self.pipeline, PREFIX + "run": self.run,
                PREFIX + "epoch": str(self.epoch), PREFIX + "process_id": str(self.process_id),
                PREFIX + "position": json.dumps({"file": where.file, "pos": where.pos,
                                                 "gtid": where.gtid, "server": where.server})}

    @classmethod
    def of(cls, commit: dict[str, Any]) -> Stamp | None:
        if PREFIX + "position" not in commit:
            return None
        where = json.loads(commit[PREFIX + "position"])
        return cls(str(commit[PREFIX + "pipeline"]), str(commit.get(PREFIX + "run", "")),
                   int(commit[PREFIX + "epoch"]), int(commit[PREFIX + "process_id"]),
                   BinlogPosition(where["file"], int(where["pos"]), where.get("gtid", ""),
                                  where.get("server", "")))

    def cursor(self) -> Cursor | None:
        if not self.position.file:
            return None
        return Cursor(self.position, self.process_id, run=self.run)


def app_id(pipeline_id: str) -> str:
    return f"setl:{pipeline_id}"


def last_stamp(table: Any, pipeline_id: str, depth: int = 1000) -> Stamp | None:
    """The newest commit of setl's for the pipeline in the table's history (None: none)."""
    for commit in table.history(depth):
        stamp = Stamp.of(commit)
        if stamp is not None and stamp.pipeline == pipeline_id:
            return stamp
    return None


def commit(table: Any, name: str, stamp: Stamp, write: Callable[[Any], None]) -> None:
    """Make one commit with ``write(properties)`` on the version ``table`` was read at.

    A commit that finds a newer version fails (no retry inside delta-rs): the table is read
    again, and when a newer owner's commit is there this writer is fenced; else (another
    tool committed: an OPTIMIZE, a reader's maintenance) it is made again on the new
    version."""
    from deltalake import CommitProperties, Transaction
    from deltalake.exceptions import CommitFailedError

    for attempt in range(1, TRIES + 1):
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
    raise LoadError(f"pipeline {stamp.pipeline}: lake table {name}: {TRIES} commits in a row "
                    "lost to other writers; stop what else writes the table, then resume")
