"""Load into a lake: each table's part of a batch in one Delta commit with the batch's
position (see :mod:`node.target.delta`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from node import sqllex
from node.changes import Batch, ChangeType, TargetChange
from node.cursor import Cursor
from node.ddlsession import moving_past
from node.jobs import PartResult, Unit, in_order
from node.target.delta import columns, commits, units, writes
from node.target.delta.commits import Stamp
from node.target.delta.compaction import Compactor
from node.target.delta.ddl import cascades, filled_column, taken
from node.target.delta.writes import held_schema, null_key
from shared import gtid, lakes
from shared.errors import ConfigError, LoadError, PositionConflictError
from shared.model import BinlogPosition, DataSource, PipelineParams

log = logging.getLogger("setl.node.target.delta")
COMMIT_THREADS = 4  # tables of a batch committed at once


def table_key(datasource: str, schema: str, table: str) -> str:
    """A lake table's name among a pipeline's targets (each table keeps its own position)."""
    return f"{datasource}:{schema}.{table}"


class LakeLoader:
    """Writes batches of one pipeline into lake tables; a commit per table per batch."""

    def __init__(self, pipeline_id: str, targets: dict[str, DataSource],
                 params: PipelineParams, epoch: int = 0,
                 stop: threading.Event | None = None, run: str = "") -> None:
        self.pipeline_id, self.targets, self.params = pipeline_id, targets, params
        self.epoch, self.run = epoch, run
        self.stop = stop or threading.Event()
        self.written: dict[str, BinlogPosition] = {}
        self._tables: dict[str, Any] = {}  # table key → its DeltaTable, as last read
        self._fenced: set[str] = set()  # tables this owner's epoch stamped (claim, commit)
        self._commits: dict[str, int] = {}  # table key → commits since its compaction
        self._writing: dict[str, threading.Lock] = {}  # table key → held while it is written
        self._guard = threading.Lock()  # (or vacuumed)
        self._pool: ThreadPoolExecutor | None = None  # a batch's tables committed at once
        self.compactor = Compactor(pipeline_id, params.lake_retain_hours, self.writing)
        # each target's location and resolved options (a refused location or credential
        # stops the start, saying why)
        self.lakes = {name: lakes.Lake.of(target) for name, target in targets.items()}

    def close(self) -> None:
        self.compactor.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._tables.clear()

    def writing(self, key: str) -> threading.Lock:
        """The lock held while table ``key`` is written, or vacuumed."""
        with self._guard:
            found = self._writing.get(key)
            if found is None:
                found = self._writing[key] = threading.Lock()
            return found

    # -- start --------------------------------------------------------------------------
    def claim(self) -> dict[str, Cursor | None]:
        """Fence every table of the pipeline's lakes with an empty commit of this owner's
        epoch, then read back the position each holds."""
        found: dict[str, Cursor | None] = {}
        for name, lake in self.lakes.items():
            for schema, table in lake.tables():
                key = table_key(name, schema, table)
                found[key] = self._claim(key, lake.table(schema, table))
        return found

    def _claim(self, key: str, table: Any) -> Cursor | None:
        self._tables[key] = table
        stamp = commits.last_stamp(table, self.pipeline_id)
        if stamp is None:
            if table.transaction_version(commits.app_id(self.pipeline_id)) is not None:
                raise PositionConflictError(
                    f"pipeline {self.pipeline_id}: lake table {key} holds batches of this "
                    "pipeline, but the commits saying up to which position are gone from its "
                    "log (over 1,000 commits of other writers since, or its log was cleaned): "
                    "what it holds cannot be told. Stop the channel, move this table away, "
                    "and copy it again (setl snapshot)")
            return None  # a table of the location this pipeline never wrote
        stamp = self._fence(key, table, stamp)
        self._fenced.add(key)
        log.info("event=target_claimed pipeline=%s target=%s epoch=%d position=%s "
                 "process_id=%d", self.pipeline_id, key, self.epoch, stamp.position,
                 stamp.process_id)
        cursor = commits.cursor(stamp)
        if cursor is not None:
            self.written[key] = cursor.position
        return cursor

    def _fence(self, key: str, table: Any, found: Stamp) -> Stamp:
        """An empty commit of this owner's epoch that keeps the table's position and run (an
        older owner's commit after it is refused: :func:`commits.commit`), made on the
        table's newest stamp: that stamp, with this owner's epoch."""
        stamp = Stamp(self.pipeline_id, found.run, self.epoch, found.process_id,
                      found.position)
        made = self._write(key, stamp, lambda props: writes.append(table, None, props),
                           keeps=True)
        return made or stamp

    def _fence_held(self, key: str, table: Any) -> None:
        """Fence a table this owner found holding its batch already, and neither claimed
        nor wrote (an older owner made it after the claim, and wrote past this batch): that
        owner's next commit to it is refused, as after a claim."""
        if key in self._fenced:
            return
        found = commits.last_stamp(table, self.pipeline_id)
        if found is not None and found.epoch < self.epoch:
            self._fence(key, table, found)
            log.info("event=target_fenced pipeline=%s target=%s epoch=%d found_epoch=%d "
                     "position=%s reason=written_after_claim", self.pipeline_id, key,
                     self.epoch, found.epoch, found.position)
        self._fenced.add(key)

    def take_over(self, name: str, found: int) -> list[int] | None:
        """A lake keeps no connections to ask: a newer epoch on a table while this node holds
        the pipeline is a ZooKeeper whose history went back; write above it (every commit
        stays conditional on the version read, so two writers never both commit)."""
        self.epoch = found + 1
        return None

    # -- batches --------------------------------------------------------------------------
    def load(self, batch: Batch, changes: list[TargetChange]) -> int:
        """A DDL batch: new tables and columns are taken (they arrive with their rows); any
        other statement on a lake table stops with what to do."""
        for change in changes:
            if change.type is not ChangeType.DDL:
                raise ConfigError(f"pipeline {self.pipeline_id}: a two-way channel cannot "
                                  "write a lake; give the lake a one-way channel")
            past = ("move the pipeline past this statement: "
                    f"{moving_past(self.pipeline_id, change.session)}")
            ran = (f"pipeline {self.pipeline_id} processId {batch.process_id}, position "
                   f"{batch.end}: the source ran {change.ddl.strip()[:200]!r} on "
                   f"{change.schema}.{change.table}")
            if cascades(sqllex.statement_code(change.ddl)):
                raise LoadError(
                    f"{ran}, a foreign key whose ON DELETE or ON UPDATE changes the rows of "
                    "its table: those changes are not in the binlog and a lake table cannot "
                    "redo them, so it would keep rows the source no longer has. Make the key "
                    "RESTRICT on the source, or leave the table or its parent out of the "
                    f"pipeline (if its parent is not in it, nothing is lost); then {past}")
            if taken(change.ddl) or not self.params.ddl_sync:
                # without ddl_sync only an ALTER TABLE comes (node.ddl.extract_ddl): the lake
                # follows its new columns, and other clauses are not followed (DDL docs)
                self._refuse_filled(change, ran, past)
                continue
            raise LoadError(
                f"{ran}; a lake table takes new tables and ADD COLUMN only. Change the Delta "
                "table to match by hand (or copy the table again into an empty location), "
                f"then {past}")
        return 0

    def _refuse_filled(self, change: TargetChange, ran: str, past: str) -> None:
        """Stop at an ADD COLUMN that gives a mirrored lake table's rows a value (a DEFAULT,
        NOT NULL): the rows it holds would read NULL there, the source's that value, and no
        change in the binlog writes them. A change log's earlier changes had no such column
        (NULL is true of them); a table with no rows yet has none to differ."""
        found = filled_column(change.ddl)
        lake = self.lakes.get(change.datasource)
        if found is None or lake is None or not lake.exists(change.schema, change.table):
            return
        table = lake.table(change.schema, change.table)
        if units.CHANGELOG_META[0] in held_schema(table).names or not table.file_uris():
            return
        column, how = found
        channel = self.pipeline_id.split(".", 1)[0]
        raise LoadError(
            f"{ran}: column {column} is added with {how}, so every row the source holds reads "
            "a value there, while the rows the mirrored lake table holds would read NULL (a "
            "Delta column added later is NULL in the rows written before it, and the binlog "
            f"has no change of them). Either {past}, then copy the table again (setl "
            f"snapshot {channel} --table <its source table>: the copy writes every row with "
            "the column's value); or add the column to the lake table yourself with the "
            "source's value in every row it holds (a Delta UPDATE), then move the pipeline "
            "past this statement as said. An ADD COLUMN without a default (NULL) is taken "
            "as it comes")

    def load_units(self, batch: Batch, results: list[PartResult],
                   redo: Callable[[], list[PartResult]] | None = None) -> int:
        """Each table's unit committed with the batch's position; a table that holds the
        batch already (its position is at or past the batch's end) is left as it is."""
        return self.load_many([(batch, results)])

    def load_many(self, batches: list[tuple[Batch, list[PartResult]]]) -> int:
        """Consecutive batches in one commit per table, with the last one's position (a
        mirror's rows merged across them, a change log's appended in order): under load a
        lake spends its time on commits, not rows. A table that holds a batch already is
        given only the batches past its position."""
        by_table: dict[str, list[tuple[Batch, Unit]]] = {}
        for batch, results in batches:
            for unit in in_order(results):
                if unit.datasource not in self.targets:
                    raise LoadError(f"pipeline {self.pipeline_id} processId "
                                    f"{batch.process_id}: unknown target data source "
                                    f"{unit.datasource}")
                key = table_key(unit.datasource, unit.schema, unit.table)
                held = self.written.get(key)
                if held is None or gtid.compare(held, batch.end) < 0:
                    by_table.setdefault(key, []).append((batch, unit))
        if not self.params.dry_run:
            self._apply_all(by_table)
        return sum(unit.rows for found in by_table.values() for _, unit in found)

    def _apply_all(self, by_table: dict[str, list[tuple[Batch, Unit]]]) -> None:
        """Each table's commit, several tables at once (each is a Delta table of its own,
        with its own position; delta-rs works outside the GIL): a batch of four tables' MERGEs
        one after the other left a core idle. An error stops the batch once every table's
        commit has ended (made or not: none goes on behind a retry), as a kill between two
        tables' commits would."""
        if len(by_table) == 1:
            [(key, found)] = by_table.items()
            self._apply(key, self.targets[found[0][1].datasource], found)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(COMMIT_THREADS,
                                            thread_name_prefix=f"lake-{self.pipeline_id}")
        # the smallest batches first: a table of a few new rows (an append) does not wait
        # for a thread behind the MERGEs of large mirrors (each about its table's size)
        order = sorted(by_table.items(), key=lambda item: sum(
            len(unit.data) for _, unit in item[1]))
        done = [self._pool.submit(self._apply, key, self.targets[found[0][1].datasource],
                                  found) for key, found in order]
        errors = [error for future in done if (error := future.exception()) is not None]
        if errors:
            raise errors[0]

    def _apply(self, key: str, target: DataSource, found: list[tuple[Batch, Unit]]) -> None:
        last, unit, start = found[-1][0], found[0][1], found[0][0].start
        rows = units.joined([units.read_ipc(unit.data) for _, unit in found], unit.keys)
        stamp = Stamp(self.pipeline_id, self.run, self.epoch, last.process_id, last.end)
        table = self._table(key, target, unit, rows)
        rows, column, why = columns.conformed(rows, held_schema(table))
        if column:
            raise LoadError(
                f"pipeline {self.pipeline_id} processId {last.process_id}, position "
                f"{last.end}, lake table {key}: column {column} is {why} (its type changed "
                "on the source). A Delta column keeps its type, and delta-rs would cast the "
                "values into it, changing them. Recreate the lake table with the new type "
                "(stop the channel, move the table's directory away, start it and copy the "
                "table: setl snapshot), or leave the column out of the pair (columns: "
                f"{{exclude: [{column}]}}) and apply the definition: the pipeline stays at "
                "this batch until then")
        if units.DELETE_FLAG in rows.column_names:
            empty = null_key(rows, unit.keys)
            if empty:  # never matched again: its updates would add rows, its delete none
                raise ConfigError(
                    f"pipeline {self.pipeline_id} processId {last.process_id}, position "
                    f"{last.end}, lake table {key}: a row's key column {empty} is NULL, and a "
                    f"mirror merges rows by key ({', '.join(unit.keys)}): a NULL key never "
                    "matches, so the row could never be updated or deleted there. Give the "
                    "pair key_columns that are NOT NULL, or 'mode: changelog'")
            made = self._write(key, stamp,
                               lambda props: writes.merge(table, rows, unit.keys, props),
                               start=start)
        else:
            made = self._write(key, stamp, lambda props: writes.append(table, rows, props),
                               start=start)
        self.written[key] = last.end
        if made is None:  # the table holds the batch already (another life of this owner's
            self._fence_held(key, table)  # commit, an older owner's): nothing was written
            return
        self._fenced.add(key)
        count = self._commits[key] = self._commits.get(key, 0) + 1
        if self.params.lake_compact_every and count >= self.params.lake_compact_every:
            self._commits[key] = 0
            lake = self.lakes[unit.datasource]
            if self.compactor.lost(key):
                self._compact(key, table, stamp)
            else:
                self.compactor.ask(key, lambda: lake.table(unit.schema, unit.table))

    def _compact(self, key: str, table: Any, stamp: Stamp) -> None:
        """Compaction and vacuum in Load's path (each a commit carrying the table's
        position, as every commit of setl's does)."""
        found: dict[str, Any] = {}
        self._write(key, stamp, lambda props: found.update(lakes.maintain(
            table, lakes.retention(self.params.lake_retain_hours), props)), keeps=True)
        log.info("event=lake_table_compacted pipeline=%s table=%s version=%d in_load=true "
                 "files_added=%s files_removed=%s vacuumed=%s", self.pipeline_id, key,
                 table.version(), found.get("numFilesAdded", 0),
                 found.get("numFilesRemoved", 0), found.get("vacuumed", 0))

    def _table(self, key: str, target: DataSource, unit: Unit, rows: Any) -> Any:
        """The table's DeltaTable, made on its first rows (partitioned as its pair says)."""
        found = self._tables.get(key)
        if found is not None:
            return found
        lake = self.lakes[unit.datasource]
        if lake.exists(unit.schema, unit.table):
            found = lake.table(unit.schema, unit.table)
        else:
            schema = rows.schema
            if units.DELETE_FLAG in schema.names:
                schema = schema.remove(schema.get_field_index(units.DELETE_FLAG))
            found = lake.create(unit.schema, unit.table, schema,
                                partition_by=units.partition_by(rows) or None,
                                name=f"{unit.schema}.{unit.table}",
                                configuration=columns.table_properties(schema),
                                commit_properties=self._made())
            log.info("event=lake_table_created pipeline=%s table=%s uri=%s", self.pipeline_id,
                     key, lake.uri(unit.schema, unit.table))
        self._tables[key] = found
        return found

    def _made(self) -> Any:
        """A new table's first commit: stamped with this owner's epoch and no position, so
        a newer owner's claim fences it before anything is written to it."""
        from deltalake import CommitProperties

        empty = BinlogPosition("", 0)
        return CommitProperties(custom_metadata=Stamp(self.pipeline_id, self.run, self.epoch,
                                                      0, empty).metadata())

    def _write(self, key: str, stamp: Stamp, write: Callable[[Any], None],
               keeps: bool = False, start: BinlogPosition | None = None) -> Stamp | None:
        """One commit to table ``key`` (:func:`commits.commit`) of batches from ``start``:
        the stamp made, or None where the table holds the batch already."""
        try:
            with self.writing(key):
                table = self._tables[key]
                if self.compactor.compacted(key):  # its vacuum may have deleted files the
                    table.update_incremental()  # version held here reads
                return commits.commit(table, key, stamp, write, keeps, start)
        except (ConfigError, LoadError, PositionConflictError):
            raise
        except Exception as exc:  # delta-rs' and Arrow's errors: the batch stops, named
            where = "" if keeps else f"processId {stamp.process_id}, position " \
                f"{stamp.position}, "
            raise LoadError(f"pipeline {self.pipeline_id} {where}lake table {key}: {exc}"
                            ) from exc

