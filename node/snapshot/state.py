"""What a pipeline's snapshots are and how far they got, kept in ZooKeeper.

``pipelines/{pid}/snapshot`` holds one JSON document: the tables being (or that were)
copied, each with how many chunks it has and which of them have their rows on the target;
the chunks' bounds, split once when the copy starts, are written then, once, apart
(``pipelines/{pid}/snapshot-plans/{copy id}``, :mod:`node.snapshot.plans`), so the document
written after every window stays small whatever the tables' size. A chunk counts as done
only once the batch that carried its rows is loaded, so after a crash, a kill -9 or a
move to another node the copy goes on with the chunks not done — done ones are not read
again. ``snapshot-requests/`` holds the tables asked for (``setl snapshot``, ``start:
snapshot``, a table added to a running channel), and ``snapshot-control`` whether copying
is paused. The cursor and the target's position row decide the stream as ever; this is
only the copy's progress.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from node.extract.chunks import Chunk, SplitKey
from node.snapshot import plans
from node.snapshot.plans import PlanMissing, bound, unbound
from node.snapshot.progress import progress
from shared import zk
from shared.catalog import call
from shared.errors import CoordinationError, FencedError
from shared.model import BinlogPosition
from shared.snapshotctl import SnapshotControl
from shared.zk import ZkPaths

log = logging.getLogger("setl.node.snapshot")

STORED_EVERY_S = 2.0  # how stale the progress of copies not running may be
KEPT_S = 7 * 86_400  # a finished copy stays in the saved state (and status) this long
KEPT_FINISHED = 50  # and only the newest ones this many
STATE_BYTES = 1_040_000  # the most a save sends: ZooKeeper refuses a request past its
# jute.maxbuffer (1 MiB by default, with the path and header) by dropping the connection
# (the node's session, cursor and leadership with it), and did so at every try. A copy's
# progress is a few hundred bytes (its chunks are in its plan): thousands of copies at once
FAILED_SHOWN_S = 86_400  # a failed copy is the pipeline's last error this long (or until
# the table is copied again)


@dataclass
class TableCopy:
    """One table's copy: its chunks and which of them are on the target."""

    id: str  # unique per copy: the same table copied again is another copy
    schema: str
    table: str
    where: str
    key: SplitKey
    chunks: list[Chunk]
    rows: int  # as counted (or estimated) when split
    done: set[int] = field(default_factory=set)
    read_rows: int = 0  # rows put on the target (read and not overtaken by the stream)
    state: str = "copying"  # copying | done | cancelled | failed
    error: str = ""
    started: float = field(default_factory=time.time)
    finished: float = 0.0
    request: str = ""  # the request it was started for (znode@asked): taken once only
    chunk_count: int = 0  # of a finished copy saved without its chunks' bounds
    again: str = ""  # a failed copy's table under the name to copy it by (renamed), if not its own
    # the source's binlog end (file, pos, server) read just before the table was split (None:
    # not known, a copy saved by an older setl): a DDL logged at or before it ran before the
    # copy read anything, so the copy reads the table that has the name after it
    planned_at: BinlogPosition | None = None
    # its chunks' bounds are in a plan znode of their own (node.snapshot.plans), not in the
    # progress document (False: a copy saved inline by an older setl, saved so until done)
    apart: bool = False

    @property
    def total(self) -> int:
        return len(self.chunks) or self.chunk_count

    def to_json(self) -> dict[str, Any]:
        """What changes as the copy goes: the done chunks as ranges, rows, state, and how
        many chunks there are. A copy planned apart (:attr:`apart`) goes without its chunks
        (``"plan": true``: in their plan znode); a copy saved inline by an older setl goes
        on so (its done chunks as unbounded ``[null, null, false]``, as an older setl reads
        them), by one look at ``done`` (Load's thread adds to it meanwhile: a chunk saved so
        and not done would be read as the whole table). A finished copy goes without its
        chunks either way (status needs only how many)."""
        copying = self.state == "copying"
        done = set(self.done)
        saved = {"id": self.id, "schema": self.schema, "table": self.table,
                 "where": self.where, "key": asdict(self.key), "rows": self.rows,
                 "read_rows": self.read_rows, "state": self.state, "error": self.error,
                 "started": self.started, "finished": self.finished, "done": _ranges(done),
                 "request": self.request, "total": self.total,
                 **({"again": self.again} if self.again else {}),
                 **({"planned_at": [self.planned_at.file, self.planned_at.pos,
                                    self.planned_at.server]} if self.planned_at else {})}
        if copying and self.apart:
            return {**saved, "plan": True}  # (no "chunks": an older setl says it cannot
            # read the state, and copies nothing, rather than copy a copy with no chunks)
        return {**saved, "chunks": [[None, None, False] if c.index in done else
                                    [bound(c.low), bound(c.high), c.nulls]
                                    for c in self.chunks] if copying else []}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TableCopy:
        key = SplitKey(**{**data["key"], "columns": tuple(data["key"]["columns"])})
        apart = bool(data.get("plan"))  # (its chunks read by SnapshotStore.load)
        chunks = [] if apart else [Chunk(index, unbound(low), unbound(high), bool(nulls))
                                   for index, (low, high, nulls) in enumerate(data["chunks"])]
        return cls(data["id"], data["schema"], data["table"], data["where"], key, chunks,
                   int(data["rows"]), _unranged(data["done"]), int(data["read_rows"]),
                   data["state"], data.get("error", ""), float(data["started"]),
                   float(data["finished"]), str(data.get("request", "")),
                   0 if chunks else int(data.get("total", 0)), str(data.get("again", "")),
                   _position(data.get("planned_at")), apart)


def _position(saved: Any) -> BinlogPosition | None:
    return BinlogPosition(str(saved[0]), int(saved[1]), "", str(saved[2])) if saved else None


def ran_before_planned(copy: TableCopy, ran: BinlogPosition | None) -> bool:
    """Whether a DDL whose binlog position (after it) is ``ran`` was logged at or before
    ``copy`` was planned (:attr:`TableCopy.planned_at`): both known and of one server's
    binlog, compared by file number, then offset. Anything else (not known, another
    server's binlog after a switchover) is taken for after."""
    at = copy.planned_at
    return at is not None and ran is not None and bool(at.server) and \
        at.server == ran.server and ran.order() <= at.order()


def pruned(copies: list[TableCopy], now: float) -> list[TableCopy]:
    """The copies to keep: every copy under way, and the finished ones of the last
    :data:`KEPT_S`, at most the newest :data:`KEPT_FINISHED` (what ``setl snapshot status``
    shows; the logs keep the rest)."""
    finished = sorted((copy for copy in copies if copy.state != "copying"
                       and now - copy.finished <= KEPT_S),
                      key=lambda copy: copy.finished, reverse=True)[:KEPT_FINISHED]
    kept = {id(copy) for copy in finished}
    return [copy for copy in copies if copy.state == "copying" or id(copy) in kept]


def failed_problem(pipeline_id: str, copies: list[TableCopy], now: float) -> str:
    """The pipeline's last error for copies that failed in the last :data:`FAILED_SHOWN_S`
    and whose table was not copied again since ("" for none)."""
    failed = [copy for copy in copies if copy.state == "failed"
              and now - copy.finished <= FAILED_SHOWN_S
              and not any(other.started > copy.started and f"{other.schema}.{other.table}" in
                          (f"{copy.schema}.{copy.table}", copy.again) for other in copies)]
    if not failed:
        return ""
    channel = pipeline_id.partition(".")[0]
    last = failed[-1]
    why = last.error.removeprefix(f"pipeline {pipeline_id}: ")
    # (an error that says what to copy, a table renamed while copied, says it alone)
    again = "" if f"setl snapshot {channel} --table" in why else (
        f"; once fixed, copy it again: setl snapshot {channel} --table "
        f"{last.schema}.{last.table}")
    return (f"pipeline {pipeline_id}: the copy of {last.schema}.{last.table} failed: "
            f"{why}" + (f" (and {len(failed) - 1} more failed copies)"
                               if len(failed) > 1 else "")
            + f"; see setl snapshot status {channel}{again}")


def _ranges(done: set[int]) -> str:
    """Chunk indexes as ``0-120,125``: a copy of a large table keeps its state small."""
    parts, ordered = [], sorted(done)
    start = previous = None
    for index in ordered:
        if start is None:
            start = previous = index
        elif index == previous + 1:  # type: ignore[operator]
            previous = index
        else:
            parts.append(f"{start}-{previous}" if start != previous else f"{start}")
            start = previous = index
    if start is not None:
        parts.append(f"{start}-{previous}" if start != previous else f"{start}")
    return ",".join(parts)


def _unranged(text: str) -> set[int]:
    found: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return found


class SnapshotStore(SnapshotControl):
    """The snapshot znodes of one pipeline: the copies' state, the tables asked for. A save
    writes over the state this runner loaded or saved last, and only over that one (as
    :class:`node.cursor.CursorStore` does): a state another owner saved meanwhile is never
    overwritten with this one's (its copies would be lost). A load writes the state back as
    read, so whoever loaded it before (an old owner, a stopped attempt whose thread is
    still splitting a table or loading a window) is fenced from then on; each attempt of a
    runner has a store of its own for that (node.pipeline)."""

    def __init__(self, client: KazooClient, paths: ZkPaths, pipeline_id: str) -> None:
        super().__init__(client, paths, pipeline_id)
        self.path = paths.snapshot(pipeline_id)
        self.plans_path = paths.snapshot_plans(pipeline_id)
        self._planned: set[str] = set()  # copy ids whose plans are (or may be) written
        self._fresh: set[str] = set()  # written by this runner, not saved in the state yet
        self._named: set[str] = set()  # the plans the state saved last needs
        self._stored: tuple[float, list[dict[str, object]]] = (-STORED_EVERY_S, [])
        self._version: int | None = None  # of the state loaded or saved last (None: none)
        self._lost: bytes | None = None  # a save whose answer never came (it may have landed)
        self._saved: tuple[int, int] = (0, 0)  # the state's czxid and mzxid as last saved
        self._saving = threading.Lock()  # saves come from Load's thread and the copies'

    def stored_progress(self) -> list[dict[str, object]]:
        """The copies' progress as last saved, for a runner whose copies are not running
        (it is starting, or starting again): read at most every :data:`STORED_EVERY_S`, the
        last reading kept while ZooKeeper does not answer."""
        at, found = self._stored
        now = time.monotonic()
        if now - at >= STORED_EVERY_S:
            try:
                found = progress(self._read()[0])
            except (KazooException, CoordinationError):  # (said by the runner's load)
                pass
            self._stored = (now, found)
        return found

    def load(self) -> list[TableCopy]:
        """The copies as saved, with the chunks of those copying read from their plans;
        this runner's saves write over the version read. A copy whose plan is missing or
        not whole fails, saying what to do (it is never read as a copy of the whole table;
        the stream and the other copies go on)."""
        copies, self._version = self._claim()
        self._planned = plans.names(self.client, self.plans_path)
        self._named = {copy.id for copy in copies if copy.state == "copying" and copy.apart}
        for copy in copies:
            if copy.state == "copying" and copy.apart:
                self._plan_of(copy)
        return copies

    def _claim(self) -> tuple[list[TableCopy], int | None]:
        """The state read and written back as it is: whoever loaded it before (a stopped
        attempt of this runner whose thread still plans or loads, an old owner) saves over
        an older version from now on, and is fenced, even before this runner's first save
        (its save would land otherwise, and this runner's be fenced, its copies stopped)."""
        while True:
            try:
                data, stat = self.client.get(self.path)
            except NoNodeError:
                return [], None
            copies = self._parse(data)
            try:
                return copies, self.client.set(self.path, data, version=stat.version).version
            except (BadVersionError, NoNodeError):  # saved (or deleted) meanwhile: again
                continue

    def _plan_of(self, copy: TableCopy) -> None:
        path = self.plan_path(copy.id)
        try:
            chunks = plans.read(self.client, path)
            if len(chunks) != copy.chunk_count:
                raise PlanMissing(f"{path} holds {len(chunks)} chunks, the copy has "
                                  f"{copy.chunk_count}")
        except PlanMissing as exc:
            channel = self.pipeline_id.partition(".")[0]
            copy.state, copy.finished = "failed", time.time()
            copy.error = str(CoordinationError(
                f"pipeline {self.pipeline_id}: the copy of {copy.schema}.{copy.table} cannot "
                f"go on: its chunks' plan in ZooKeeper is not there or not whole ({exc}; "
                "deleted by hand, or by another setl release). The chunks not done are not "
                f"copied; copy the table again: setl snapshot {channel} --table "
                f"{copy.schema}.{copy.table}"))
            log.error("event=snapshot_plan_missing pipeline=%s table=%s.%s copy=%s error=%s",
                      self.pipeline_id, copy.schema, copy.table, copy.id, exc)
            return
        copy.chunks = chunks

    def plan_path(self, copy_id: str) -> str:
        return f"{self.plans_path}/{plans.name(copy_id)}"

    def write_plan(self, copy: TableCopy) -> None:
        """Write a copy's chunks, once, before the state names it (a crash between leaves a
        plan no state names, deleted after a later save, never a copy without its chunks).
        CoordinationError when ZooKeeper does not take it."""
        with self._saving:  # (Load's thread saves, and drops plans, meanwhile)
            self._fresh.add(copy.id)
            self._planned.add(copy.id)
        try:
            parts = call("write a copy's chunks", plans.write, self.client,
                         self.plan_path(copy.id), copy.chunks)
        except NodeExistsError:
            self.forget(copy)
            raise CoordinationError(
                f"pipeline {self.pipeline_id}: a plan of copy {copy.id} is in ZooKeeper "
                "already (another runner planned the table at the same time); it is planned "
                "again") from None
        except (KazooException, CoordinationError) as exc:  # (half written: goes after a
            self.forget(copy)  # later save)
            if isinstance(exc, CoordinationError):
                raise
            raise CoordinationError(
                f"pipeline {self.pipeline_id}: the chunks of copy {copy.id} could not be "
                f"written to ZooKeeper ({type(exc).__name__}: the pipeline's state deleted "
                "meanwhile?); the copy is planned again") from None
        log.info("event=snapshot_planned pipeline=%s copy=%s chunks=%d parts=%d",
                 self.pipeline_id, copy.id, len(copy.chunks), parts)

    def forget(self, copy: TableCopy) -> None:
        """A copy planned and not saved: its plan goes after a later save."""
        with self._saving:
            self._fresh.discard(copy.id)

    def _read(self) -> tuple[list[TableCopy], int | None]:
        try:
            data, stat = self.client.get(self.path)
        except NoNodeError:
            return [], None
        return self._parse(data), stat.version

    def _parse(self, data: bytes) -> list[TableCopy]:
        try:
            return [TableCopy.from_json(item) for item in json.loads(data or b"[]")]
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # (a status read
            # raising anything else stopped the node: every node taking the pipeline)
            raise CoordinationError(
                f"pipeline {self.pipeline_id}: its table copies' state in ZooKeeper "
                f"({self.path}) cannot be read ({type(exc).__name__}: {exc}): written by "
                "another setl release, or by hand. The pipeline cannot start with it. Move "
                "it aside (zkCli: get it, keep the text, delete the znode); the copies under "
                "way are then lost: ask them again with setl snapshot CHANNEL --table "
                "schema.table") from None

    def save(self, copies: list[TableCopy]) -> None:
        """Write ``copies`` over the state this runner loaded or saved last. FencedError
        when another owner saved (or ``setl position reset`` deleted it) meanwhile."""
        with self._saving:
            data = json.dumps([copy.to_json() for copy in copies]).encode()
            if len(data) > STATE_BYTES:  # (not sent: _lost stays as it was)
                raise CoordinationError(
                    f"pipeline {self.pipeline_id}: its table copies' state would take "
                    f"{len(data) // 1024} KB in ZooKeeper, more than the {STATE_BYTES // 1024} "
                    f"KB it takes in one write ({len(copies)} copies, "
                    f"{sum(copy.state == 'copying' for copy in copies)} under way); copies "
                    "asked for wait until those under way finish: ask fewer tables at once")
            try:
                written = self._write(data)
            except BadVersionError:
                raise FencedError(
                    f"pipeline {self.pipeline_id}: its table copies' state in ZooKeeper was "
                    "written by someone else (a newer owner of the pipeline, this runner's "
                    "next attempt, or setl position reset) since this runner read it; it is "
                    "not written over, and this runner's copies stop. Nothing to do: the "
                    "owner that wrote it goes on with the copies") from None
            except KazooException:  # no answer: written or not, the next save finds out
                self._lost = data
                raise
            self._lost = None
            self._version, self._saved = written.version, (written.czxid, written.mzxid)
            self._drop_plans(copies)

    def _drop_plans(self, copies: list[TableCopy]) -> None:
        """The plans the state just saved no longer needs (their copies finished, pruned or
        cancelled; orphans of a runner that stopped between a plan and its save), but those
        this runner wrote and has not saved yet, and only plans made before that save
        (:meth:`_saved_at`): a plan made after it is a newer owner's (one that loaded this
        save, planned a copy and saved it, or is about to), whatever pause came between
        this save and this drop. One made before it is named by this save or by nobody: an
        owner that loaded an older state cannot save any more (this save fences it)."""
        named = {copy.id for copy in copies if copy.state == "copying" and copy.apart}
        self._fresh -= named
        if named != self._named:  # (a copy started or ended: looked for those of others
            try:  # too, e.g. an old owner's plan written after this runner's load)
                self._planned |= plans.names(self.client, self.plans_path)
            except KazooException as exc:
                log.warning("event=snapshot_plans_unlisted pipeline=%s error=%r",
                            self.pipeline_id, exc)
                return
            self._named = named
        dropped = sorted(self._planned - named - self._fresh)
        saved_at = self._saved_at() if dropped else None
        if saved_at is None:
            return
        for copy_id in dropped:
            try:
                made = self.client.exists(self.plan_path(copy_id))
                if made is None:  # gone already
                    self._planned.discard(copy_id)
                    continue
                if made.czxid > saved_at:  # a newer owner's (kept: not this runner's to drop)
                    log.info("event=snapshot_plan_kept pipeline=%s copy=%s reason=newer_owner",
                             self.pipeline_id, copy_id)
                    self._planned.discard(copy_id)
                    continue
                plans.delete(self.client, self.plan_path(copy_id))
            except KazooException as exc:  # deleted after a later save
                log.warning("event=snapshot_plan_not_deleted pipeline=%s copy=%s error=%r",
                            self.pipeline_id, copy_id, exc)
                continue
            self._planned.discard(copy_id)

    def _saved_at(self) -> int | None:
        """The zxid of this runner's save, where the state is still the version it saved
        (None: another owner saved since, or ZooKeeper does not answer; nothing dropped,
        the plans not needed go after a later save, this one's or the next owner's)."""
        try:
            stat = self.client.exists(self.path)
        except KazooException as exc:
            log.warning("event=snapshot_plans_not_dropped pipeline=%s error=%r",
                        self.pipeline_id, exc)
            return None
        if stat is None or (stat.version, stat.czxid, stat.mzxid) != \
                (self._version, *self._saved):  # (czxid: not deleted and made again since)
            return None
        return int(stat.mzxid)

    def _write(self, data: bytes) -> ZnodeStat:
        """``data`` over the version this runner knows (:func:`shared.zk.written_over`)."""
        return zk.written_over(self.client, self.path, data, self._version, self._lost)
