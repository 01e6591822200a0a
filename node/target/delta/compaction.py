"""A streamed lake table's compaction and vacuum on a thread of their own, beside Load.

Compaction bin-packs a table's small files (seconds on a large table); in Load's path every
batch of the table waited for it (a stream's delay p99 grew from 3.5 s to 10.9 s at 1,000
tx/s). Here Load only asks for it. The compaction's commit changes no rows and carries no
``setl.position``: a table's position stays that of its newest commit of setl's that has one
(``shared.lakes.last_stamp``), and it is not an app transaction, so it never moves Delta's
``txn`` version back. delta-rs rebases it past Load's appends; a MERGE that rewrote a file
it compacted wins, and Load compacts that table itself the next time (in its own path, the
only writer, as before). Load's next commit after a compaction loses once and is made again
on the new version (:func:`node.target.delta.commits.commit`).

Vacuum deletes files; Load must never read a table version whose files are gone, nor lose a
file it is writing. So it runs under ``writing(key)`` (the lock Load holds while it writes
the table), and the table Load holds is read again before its next write; none runs once the
loader closed. With ``lake_retain_hours`` of 1 or more it is a full vacuum: the files of a
commit of Load's that lost to the compaction (and was made again) are named by no commit,
and go too once that old. With 0 there is no vacuum at all: every file stays on disk
(:func:`shared.lakes.retention`).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from shared import lakes

log = logging.getLogger("setl.node.target.delta")
CLOSE_WAIT_S = 30.0  # how long a stopping pipeline lets a compaction under way finish
# files no commit names are deleted only when older than this: a file being written (by
# this node, or by a new owner while a fenced one still runs) is never that old
FULL_AFTER_H = 1


class Compactor:
    def __init__(self, pipeline_id: str, retain_hours: int,
                 writing: Callable[[str], threading.Lock]) -> None:
        self.pipeline_id, self.retain_hours, self.writing = pipeline_id, retain_hours, writing
        self._vacuuming = threading.Lock()  # held by a vacuum, and by close()
        self._asked: queue.Queue[tuple[str, Callable[[], Any]] | None] = queue.Queue()
        self._pending: set[str] = set()  # keys asked and not done
        self._done: set[str] = set()  # keys compacted since Load last read the table
        self._lost: set[str] = set()  # keys whose last compaction here failed
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._idle = threading.Condition(self._lock)
        self._closed = False  # the loader stopped: another may write the table now

    def ask(self, key: str, open_table: Callable[[], Any]) -> None:
        """Compact ``key`` (``open_table()`` reads it: its own DeltaTable, not Load's)."""
        with self._lock:
            if key in self._pending:
                return
            self._pending.add(key)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                 name=f"compact-{self.pipeline_id}")
                self._thread.start()
        self._asked.put((key, open_table))

    def lost(self, key: str) -> bool:
        """Whether ``key``'s last compaction here failed (a table whose every batch rewrites
        the files a compaction reads, e.g. a mirror of random updates: Load compacts it in
        its own path, as the only writer, and then tries here again)."""
        return self._taken(self._lost, key)

    def compacted(self, key: str) -> bool:
        """Whether ``key`` was compacted since this was last asked (Load reads it again)."""
        return self._taken(self._done, key)

    def _taken(self, keys: set[str], key: str) -> bool:
        with self._lock:
            found = key in keys
            keys.discard(key)
            return found

    def wait(self, timeout_s: float = CLOSE_WAIT_S) -> bool:
        """Until no compaction is asked or under way; whether that happened in time."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._pending, timeout_s)

    def close(self) -> None:
        with self._vacuuming:  # a compaction under way makes no vacuum after this
            self._closed = True
        self._asked.put(None)
        if self._thread is not None:
            self._thread.join(CLOSE_WAIT_S)

    def _run(self) -> None:
        while (asked := self._asked.get()) is not None:
            key, open_table = asked
            try:
                self._compact(key, open_table())
            except Exception as exc:  # delta-rs' errors: Load compacts it next time
                log.warning("event=lake_compaction_failed pipeline=%s table=%s error=%r",
                            self.pipeline_id, key, exc)
                with self._lock:
                    self._lost.add(key)
            finally:
                with self._idle:
                    self._pending.discard(key)
                    self._idle.notify_all()

    def _compact(self, key: str, table: Any) -> None:
        from deltalake import CommitProperties

        properties = CommitProperties(custom_metadata={lakes.PREFIX + "pipeline":
                                                       self.pipeline_id})
        found = dict(table.optimize.compact(writer_properties=lakes.writer_properties(),
                                            commit_properties=properties))
        hours = lakes.retention(self.retain_hours)
        # no write of Load's reads (or is writing) what vacuum deletes
        with self._vacuuming, self.writing(key):
            if self._closed:
                return
            table.update_incremental()  # a full vacuum deletes what *this* version lacks
            found["vacuumed"] = 0 if hours is None else len(lakes.vacuum(
                table, hours, properties, full=hours >= FULL_AFTER_H))
            with self._lock:
                self._done.add(key)
        log.info("event=lake_table_compacted pipeline=%s table=%s version=%d "
                 "files_added=%s files_removed=%s vacuumed=%s", self.pipeline_id, key,
                 table.version(), found.get("numFilesAdded", 0),
                 found.get("numFilesRemoved", 0), found["vacuumed"])
