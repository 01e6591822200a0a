"""Where a pipeline stands: the cursor in ZooKeeper, and where a (re)start resumes.

The cursor is the position and processId of the last batch loaded on every target,
published after Load committed, coalesced: a hint that may lag. The truth is each target's
position row (``retl.retl_position``), written in the same transaction as the data, at
source-transaction granularity. A start therefore resumes from the targets' rows
(:func:`resume`), and Select cuts its batches at every row ahead of the start, so no batch
straddles a row: a batch is either wholly on a target already (skipped there) or wholly
not (written). A prefix of a loaded batch is never replayed — a replayed keyless insert is
a duplicate row, a replayed unique-key swap a conflict.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NoNodeError

from shared import gtid, positions, zk
from shared.errors import CursorMovedError, PositionConflictError
from shared.model import BinlogPosition
from shared.positions import Cursor
from shared.zk import ZkPaths

log = logging.getLogger("setl.node.pipeline")

__all__ = ["Cursor", "CursorMovedError", "CursorPublisher", "CursorStore", "Resume", "resume"]


@dataclass(frozen=True)
class Resume:
    """Where Select begins after a (re)start, and how it cuts the stretch it reads again."""

    start: Cursor  # its position, and the last processId any target or the hint has seen
    cuts: tuple[BinlogPosition, ...] = ()  # targets' rows past the start, in binlog order
    behind: tuple[str, ...] = ()  # targets whose row is behind where the cursor saw them


def resume(pipeline_id: str, hint: Cursor, rows: dict[str, Cursor | None]) -> Resume:
    """Resume from ``hint`` (the ZooKeeper cursor) and the targets' position ``rows`` (None,
    or a row without a file: nothing loaded there yet).

    Every transaction at or before the hint is on every target it names (every target when
    it names none: an older hint, or one an operator set), so such a target is at
    ``max(row, hint)``, and one it does not name at its row; Select starts at the least of
    those (never past a transaction some target lacks), and each row past the start is a
    cut. A hint without a file (a GTID start) defers to the rows
    of the targets that have one; a target with nothing loaded is at the hint all the same.
    processIds go on after the highest one any target holds, so a write after a restart
    never reuses a number already written (two-way marks rely on it).

    A row behind where the hint saw that target (it lost committed transactions: restored,
    failed over to a lagging replica) is replayed from (never a gap); a row of another life
    of the pipeline, or a target that lost its row, refuses the start."""
    written = {name: row for name, row in rows.items() if row is not None and row.position.file}
    _refuse_foreign(pipeline_id, hint, rows, written)
    process_id = max([hint.process_id, *(row.process_id for row in written.values())])
    if not written:
        return Resume(Cursor(hint.position, process_id, run=hint.run))
    behind = tuple(sorted(name for name, row in written.items() if name in hint.targets
                          and gtid.compare(row.position, hint.targets[name]) < 0))
    if hint.position.file:
        # a hint that names its targets vouches for those only: one it does not name (left
        # out of the pipeline for a while, or no batch of its reached it) is where its row is
        at = [row.position if name in behind or (hint.targets and name not in hint.targets)
              else gtid.latest((row.position, hint.position)) for name, row in written.items()]
        if len(written) < len(rows):  # a target with nothing loaded is at the hint
            at.append(hint.position)
    else:
        at = [row.position for row in written.values()]
        if len(written) < len(rows) and hint.position.gtid:  # (the GTID start, by state)
            at.append(hint.position)  # a target with nothing loaded is at the hint
    start = gtid.earliest(at)
    cuts: list[BinlogPosition] = []
    for position in sorted(at, key=gtid.order_key):
        if gtid.compare(position, start) > 0 and \
                not (cuts and gtid.compare(position, cuts[-1]) == 0):
            cuts.append(position)
    return Resume(Cursor(start, process_id, run=hint.run), tuple(cuts), behind)


def _refuse_foreign(pipeline_id: str, hint: Cursor, rows: dict[str, Cursor | None],
                    written: dict[str, Cursor]) -> None:
    for name, row in rows.items():
        held = hint.targets.get(name)
        if held is not None and name not in written:
            raise PositionConflictError(
                f"pipeline {pipeline_id}: target {name} has no position row for it, though "
                f"it held the source's transactions up to {held} (restored from an older "
                "backup, or its retl schema dropped?): what it holds cannot be told. Stop "
                f"the channel, set where it goes on (setl position set "
                f"{pipeline_id.replace('.', '/')} --latest), start it, then copy the paired "
                "tables to that target again (setl snapshot)")
        if row is None or name not in written or not hint.run or not row.run or \
                row.run == hint.run:
            continue
        if (row.position.file, row.position.pos) == (hint.position.file, hint.position.pos) \
                and gtid.same_server(row.position, hint.position):
            continue  # started exactly where the target is: nothing skipped, nothing again
        where = pipeline_id.replace(".", "/")
        raise PositionConflictError(
            f"pipeline {pipeline_id}: target {name} holds the source's transactions up to "
            f"{row.position} for an earlier life of this pipeline (the channel was deleted "
            "and made again, or ZooKeeper lost its data), and this one starts at "
            f"{hint.position}: going on would skip or repeat rows. Stop the channel, then "
            f"to go on from where the target is: setl position set {where} --file "
            f"{row.position.file} --pos {row.position.pos}; to start at {hint.position} "
            f"instead: setl position set {where} --file {hint.position.file} --pos "
            f"{hint.position.pos} --replay (or delete the target's row: DELETE FROM "
            f"retl.retl_position WHERE pipeline_id = '{pipeline_id}')")


class CursorStore:
    """A runner's cursor in ZooKeeper. It writes over the cursor it read or wrote last, and
    only over that one: a cursor set meanwhile by someone else (``setl position set`` while
    this runner was still stopping, its ZooKeeper session lost) is never overwritten with
    this runner's older one — the save raises :class:`CursorMovedError` instead."""

    def __init__(self, client: KazooClient, paths: ZkPaths, pipeline_id: str) -> None:
        self.client, self.path, self.pipeline_id = client, paths.cursor(pipeline_id), pipeline_id
        self._version: int | None = None  # of the cursor read or written last (None: none)
        self._lost: bytes | None = None  # a write whose answer never came (it may have landed)

    def load(self) -> Cursor | None:
        try:
            data, stat = self.client.get(self.path)
        except NoNodeError:
            self._version = None
            return None
        self._version = stat.version
        return Cursor.from_json(data) if data else None

    def save(self, cursor: Cursor) -> None:
        """Write ``cursor`` over the one this runner read or wrote last. A write of its own
        whose answer was lost (the connection dropped after ZooKeeper applied it) is found
        and taken for its own, not for someone else's move (the cursor froze, the runner
        logging it moved five times a second)."""
        data = cursor.to_json()
        try:
            self._version = self._write(data)
        except BadVersionError:
            raise self._moved(cursor) from None
        except KazooException:  # no answer: written or not, the next write finds out
            self._lost = data
            raise
        self._lost = None

    def _write(self, data: bytes) -> int:
        """``data`` written over the version this runner knows (:func:`shared.zk.write_over`)."""
        return zk.write_over(self.client, self.path, data, self._version, self._lost)

    def first(self, cursor: Cursor) -> Cursor:
        """``cursor`` stored as the first unless one is there; the one stored, whose version
        this runner writes over from now on."""
        stored, _, self._version = positions.store_first(self.client, self.path, cursor)
        return stored

    def _moved(self, cursor: Cursor) -> CursorMovedError:
        return CursorMovedError(
            f"pipeline {self.pipeline_id}: its cursor in ZooKeeper was set by someone else "
            f"(setl position set or reset; or a node that lost the pipeline to this one, "
            f"publishing as it stopped) since this runner read it; its own "
            f"({cursor.position}) is not written over it, now or later (each try is "
            "refused and logged). Nothing to do: the targets were moved with it, which fences "
            "this runner: its next batch is refused there and it stops; the next start goes "
            "on from the cursor set")


class CursorPublisher:
    """Publishes the newest cursor off the load path: at most every ``interval_s``, from a
    thread of its own. The cursor is a restart hint (the target's position row decides), so
    a cursor that lags by a few batches costs a replay that Load skips, never a row.

    It writes only while ``owns()`` says this node still holds the pipeline: an owner that
    lost it (frozen, its session gone, another node took over) and publishes once more as it
    stops would land over the cursor the new owner read, whose every save from then on is
    refused as someone else's move (the cursor froze at the old owner's, logged five times
    a second)."""

    def __init__(self, store: CursorStore, interval_s: float = 0.2,
                 on_error: Callable[[Exception], None] = lambda exc: None,
                 owns: Callable[[], bool] = lambda: True) -> None:
        self.store, self.interval_s, self.on_error = store, interval_s, on_error
        self.owns = owns
        self._newest: Cursor | None = None
        self._published: Cursor | None = None
        self._changed = threading.Condition()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cursor-publisher", daemon=True)
        self._thread.start()

    def publish(self, cursor: Cursor) -> None:
        with self._changed:
            self._newest = cursor
            self._changed.notify()

    def close(self, timeout_s: float = 5.0) -> None:
        """Publish the newest cursor (waiting at most ``timeout_s``) and stop."""
        with self._changed:
            self._closed.set()
            self._changed.notify()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            with self._changed:
                while self._newest is self._published and not self._closed.is_set():
                    self._changed.wait()
                cursor, closing = self._newest, self._closed.is_set()
            if cursor is not None and cursor is not self._published:
                try:
                    # another node's now (or ZooKeeper cannot say: tried again next time)
                    if not self.owns():
                        log.log(logging.INFO if closing else logging.DEBUG,
                                "event=cursor_not_published pipeline=%s cursor=%s "
                                "reason=not_the_owner", self.store.pipeline_id, cursor.position)
                    else:
                        self.store.save(cursor)
                        self._published = cursor
                except Exception as exc:  # kazoo errors: the next publish tries again
                    self.on_error(exc)
            if closing:
                return
            self._closed.wait(self.interval_s)  # coalesce: what comes meanwhile goes next
