"""The in-memory model (Otter's, kept): frozen dataclasses built once by the loader.

DataSource → DataMedia (namespace + table pattern) → MediaPair (source media → target media)
→ Pipeline (one direction) → Channel (one pipeline, or two for a two-way channel).
The protobuf messages in ``proto/model.proto`` mirror these field for field.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from shared.patterns import NamePattern, PatternKind
from shared.secrets import SecretRef


class ChannelStatus(enum.Enum):
    START = "START"
    PAUSE = "PAUSE"
    STOP = "STOP"


class ColumnMode(enum.Enum):
    INCLUDE = "INCLUDE"  # only the listed columns (all when the list is empty)
    EXCLUDE = "EXCLUDE"  # every column but the listed ones


class StartupMode(enum.Enum):
    LATEST = "LATEST"  # start at the source's current binlog end
    POSITION = "POSITION"  # start at start_position (file/pos)
    GTID = "GTID"  # start at start_position.gtid
    SNAPSHOT = "SNAPSHOT"  # copy every paired table (lock-free, in the stream), then stream


class ShardAlgorithm(enum.Enum):
    MODULO = "MODULO"  # slot = value % slots
    QUOTIENT = "QUOTIENT"  # slot = value // table_balance_size % slots


# why a two-way channel copies no rows (start: snapshot, setl snapshot, backfill, repair)
TWO_WAY_COPY = (
    "a copy into one side of a two-way channel cannot tell the rows it read from that "
    "side's own newer writes that have not come over yet, and would write the older rows "
    "over them. Copy with a one-way channel while the other side takes no writes, then "
    "start the two-way channel at the copy's end (setl position set)")

@dataclass(frozen=True)
class TlsOptions:
    """TLS to a database (files on the node's machine). With a CA the server's certificate
    is verified; ``verify_identity`` also checks that it names the host."""

    ca: str = ""
    cert: str = ""  # a client certificate and its key, when the server asks for one
    key: str = ""
    verify_identity: bool = False


@dataclass(frozen=True)
class DataSource:
    """A database endpoint. The password is a reference, never a clear value."""

    name: str
    host: str
    port: int = 3306
    user: str = "root"
    password: SecretRef | None = None
    type: str = "mysql"
    charset: str = "utf8mb4"
    tls: TlsOptions | None = None  # None: TLS when the server offers it, unverified
    # a replica set: its members as host:port (host/port is the one in use, at first the
    # first member); the primary is the writable member (read_only) or the first that
    # answers (order); a lost primary is waited for switch_after_s before setl switches
    hosts: tuple[str, ...] = ()
    primary: str = "read_only"
    switch_after_s: int = 10
    # a lake target (type delta): where its tables are (a directory, or an object-store URL
    # delta-rs takes), a table per target schema.table under it; ``storage``: the object
    # store's options as key=value, each value a secret reference or plain text
    location: str = ""
    storage: tuple[str, ...] = ()


@dataclass(frozen=True)
class DataMedia:
    """A schema (namespace) and table pattern on one data source."""

    datasource: str
    namespace: NamePattern
    table: NamePattern

    def __str__(self) -> str:
        return f"{self.datasource}:{self.namespace}.{self.table}"

    @property
    def one_table(self) -> tuple[str, str, str] | None:
        """(datasource, schema, table) when the patterns name one table, else None."""
        if self.namespace.kind is not PatternKind.SINGLE or \
                self.table.kind is not PatternKind.SINGLE:
            return None
        return self.datasource, self.namespace.literal, self.table.literal


@dataclass(frozen=True)
class ColumnPair:
    """A source column and the target column it is written to (a rename when they differ)."""

    source: str
    target: str


@dataclass(frozen=True)
class ColumnGroup:
    """Columns always sent together: a change to one sends all of them."""

    columns: tuple[str, ...]


@dataclass(frozen=True)
class VirtualColumn:
    """A target column absent from the source; exactly one of the three fills it."""

    name: str
    value: str | None = None
    expression: str | None = None
    processor: str | None = None


@dataclass(frozen=True)
class ShardRule:
    """Route rows to the shard named by ``column`` over the target patterns."""

    column: str
    algorithm: ShardAlgorithm = ShardAlgorithm.MODULO
    table_balance_size: int = 1


@dataclass(frozen=True)
class LookupJoin:
    """Columns of another source table added to each row, found by key (N:1 table merge)."""

    table: str  # schema.table on the pipeline's source
    by: str  # this row's column holding the other table's key value
    key: str  # the other table's key column
    columns: tuple[str, ...] = ()  # the columns to add
    missing: str = "drop"  # no such row: drop the change, or keep it as it is


@dataclass(frozen=True)
class MediaPair:
    """Source media → target media with its column mapping and options."""

    source: DataMedia
    target: DataMedia
    push_weight: int = 0
    column_mode: ColumnMode = ColumnMode.INCLUDE
    columns: tuple[str, ...] = ()
    column_pairs: tuple[ColumnPair, ...] = ()
    column_groups: tuple[ColumnGroup, ...] = ()
    processor: str | None = None
    virtual_columns: tuple[VirtualColumn, ...] = ()
    shard: ShardRule | None = None
    key_columns: tuple[str, ...] = ()
    fan_out: bool = False
    joins: tuple[LookupJoin, ...] = ()
    merge_part: bool = False  # writes only its columns of a wide row: a delete clears them
    # a lake target's table: "mirror" (the source's current rows) or "changelog" (every
    # change appended), and the columns it is partitioned by
    mode: str = ""
    partition_by: tuple[str, ...] = ()

    def settings_apart(self, other: MediaPair) -> list[str]:
        """The settings in which two pairs differ, their targets (and the order they are
        written in) aside: the pairs of one shard route must agree, the route runs the first
        one's for every slot."""
        return [f.name for f in dataclasses.fields(self) if f.name not in (
            "target", "push_weight") and getattr(self, f.name) != getattr(other, f.name)]


@dataclass(frozen=True)
class BinlogPosition:
    """A binlog position: file/pos of the server ``server`` names, with the GTID state after
    its transaction when known (MariaDB's per-domain position: what any member of a replica
    set can resume from). ``server`` is ``server_id@hostname:port`` of the binlog's writer
    ("" unknown: the source's). How two compare: :func:`shared.gtid.compare`."""

    file: str = ""
    pos: int = 0
    gtid: str = ""
    server: str = ""

    def order(self) -> tuple[int, str, int]:
        """The position's place in binlog order: the file by its number (past .999999 the
        server counts on with more digits), then the offset."""
        stem, _, number = self.file.rpartition(".")
        return (int(number), stem, self.pos) if number.isdigit() else (0, self.file, self.pos)

    def __str__(self) -> str:
        text = f"{self.file}:{self.pos}" if self.file else ""
        if self.gtid:
            text = f"{text} gtid={self.gtid}".strip()
        return text or "(none)"


@dataclass(frozen=True)
class PipelineParams:
    """Tuning and behaviour of one pipeline; every field has a sane default."""

    parallelism: int = 5
    batch_size: int = 20_000  # a catch-up's batches: large enough to amortise a Spark job
    # a caught-up pipeline's batches: 100 → 50 ms took the 1,000 tx/s delay p99 from 312 to
    # 196 ms (bench.peers --scenarios delay, peers-20261125-091854)
    batch_timeout_ms: int = 50
    load_batch_size: int = 1000
    ddl_sync: bool = False
    skip_load_exception: bool = False
    dry_run: bool = False
    max_retries: int = 5
    startup: StartupMode = StartupMode.LATEST
    start_position: BinlogPosition | None = None
    # the central free door: the source holding the retl_buffer this pipeline serves
    # (rows with its CHANNEL_ID/PIPELINE_ID); "" = only the per-instance free door
    free_door_source: str = ""
    free_door_slice: int = 5000  # buffer requests served per batch at most
    # a merged table's upserts of a batch go as LOAD DATA … REPLACE from this many rows on,
    # where the table allows it (node.target.mysql.loaddata); 0: always INSERT … ON DUPLICATE KEY
    load_data_min_rows: int = 500
    snapshot_chunk_size: int = 8192  # rows a snapshot reads in one chunk
    snapshot_parallelism: int = 4  # chunks read at once, in one watermark window
    # copies' rows are not written to the target's binlog (sql_log_bin = 0;
    # node.target.mysql.copies)
    snapshot_skip_binlog: bool = False
    # a lake table is compacted (small files bin-packed) after this many commits (0: never),
    # then its files removed longer ago than lake_retain_hours are deleted from disk
    # (vacuumed; lake_retain_hours 0: never vacuumed, every file stays)
    lake_compact_every: int = 100
    lake_retain_hours: int = 168
    # write MySQL target tables that have triggers: each fires for every row setl writes
    # (native row replication fires none), so what a source trigger wrote would come
    # twice; off, such a table stops the pipeline (node.extract.job)
    fire_target_triggers: bool = False
    # write MySQL target tables whose engine does not roll back (MyISAM, Aria): a batch's
    # rows are seen before its position commits, and written again after a crash; off,
    # such a table stops the pipeline (node.extract.job)
    write_non_transactional: bool = False


@dataclass(frozen=True)
class Pipeline:
    """One direction of a channel: source → target with its pairs and candidate nodes.

    One node owns a running pipeline and runs its Select, the driver of its Extract/Transform
    jobs (Spark spreads their tasks over its workers) and its Load; ``nodes`` are the nodes
    that may be that owner (the others stand by)."""

    name: str
    source: str
    target: str
    pairs: tuple[MediaPair, ...]
    nodes: tuple[int, ...] = ()
    params: PipelineParams = field(default_factory=PipelineParams)

    def is_candidate(self, node_id: int) -> bool:
        """Whether a node may run this pipeline (no list means every node may)."""
        return not self.nodes or node_id in self.nodes

    def key_columns(self, schema: str, table: str) -> tuple[str, ...]:
        """The ``key_columns`` of the pair that takes a source table (of its first pair when
        several fan out), as the node reads them; () for none."""
        found = pairs_taking(self.pairs, schema, table, lambda pair: pair)
        return found[0].key_columns if found else ()


Item = TypeVar("Item")


def pairs_taking(items: Iterable[Item], schema: str, table: str,
                 pair: Callable[[Item], MediaPair]) -> tuple[Item, ...]:
    """The pairs a source table feeds: every fan-out pair that matches it, else the most
    specific match (by its table's pattern, then its schema's; the first of equals).
    ``pair`` is how an item gives its pair (a compiled pair's)."""
    matching = [item for item in items if pair(item).source.namespace.matches_schema(schema)
                and pair(item).source.table.matches(table)]
    fan_out = tuple(item for item in matching if pair(item).fan_out)
    if fan_out or not matching:
        return fan_out
    return (max(matching, key=lambda item: (pair(item).source.table.specificity,
                                            pair(item).source.namespace.specificity)),)


@dataclass(frozen=True)
class Channel:
    """One pipeline (one-way) or two (two-way)."""

    name: str
    pipelines: tuple[Pipeline, ...]
    description: str = ""
    # the channel's entry as its YAML wrote it, as JSON: `setl channel show -o yaml` gives it
    # back, so the output applies again as it is
    definition: str = ""

    @property
    def two_way(self) -> bool:
        return len(self.pipelines) == 2

    def pipeline(self, name: str) -> Pipeline:
        for pipeline in self.pipelines:
            if pipeline.name == name:
                return pipeline
        raise KeyError(name)

    def pipeline_id(self, pipeline: Pipeline) -> str:
        """The id a pipeline goes by everywhere: ``channel.pipeline``."""
        return f"{self.name}.{pipeline.name}"


@dataclass(frozen=True)
class Definitions:
    """What one YAML file (or the whole store) defines."""

    sources: tuple[DataSource, ...] = ()
    channels: tuple[Channel, ...] = ()
