"""Lake targets' locations and object-store options, as definitions give them.

A lake target (``type: delta``) names a ``location``: a local directory (an absolute path)
or an S3 URL (``s3://``, also an S3-compatible store; other object stores are refused by
name). Its tables are ``<location>/<schema>/<table>``. ``storage`` holds the object store's
options (delta-rs' names: ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``…); an option that is a
credential is a secret reference (``${SETL_…}`` or ``file:…``), resolved by :class:`Lake`
where the lake is read or written, and only for the store's endpoint the machine's rules
bind it to (which options pass, and where: :mod:`shared.lakestore`). A table's commits
carry setl's stamp (:class:`Stamp`): where it stands.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared.errors import ConfigError, DatabaseHostError, LoadError, SourceError
from shared.lakestore import (
    endpoint_url,
    location_problem,
    option,
    options,
    support_problem,
)
from shared.model import BinlogPosition

PREFIX = "setl."  # setl's commit metadata on a lake table
_PLAIN = re.compile(r"[A-Za-z0-9_$-][A-Za-z0-9_$.-]*")


def path_name(name: str) -> str:
    """A schema or table name as one directory name: as it is when it is plain, else each
    character outside ``[A-Za-z0-9_$.-]`` (and a leading dot) as ``@`` and its four hex
    digits, as MariaDB names its own files (``a/b`` → ``a@002fb``). An ``@`` is encoded too,
    so every name has one directory and back."""
    if _PLAIN.fullmatch(name):
        return name
    return "".join(char if ((char.isascii() and (char.isalnum() or char in "_$-")) or
                            (char == "." and at)) else
                   "".join(f"@{unit:04x}" for unit in _units(char))
                   for at, char in enumerate(name))


def _units(char: str) -> list[int]:
    data = char.encode("utf-16-be")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


def name_of(directory: str) -> str:
    """The schema or table name a directory of :func:`path_name` holds."""
    if "@" not in directory:
        return directory
    units, out, at = bytearray(), [], 0
    while at < len(directory):
        if directory[at] == "@":
            units += bytes.fromhex(directory[at + 1:at + 5])
            at += 5
            continue
        if units:
            out.append(units.decode("utf-16-be"))
            units = bytearray()
        out.append(directory[at])
        at += 1
    if units:
        out.append(units.decode("utf-16-be"))
    return "".join(out)


def table_uri(location: str, schema: str, table: str) -> str:
    """Where a target table's Delta table is under its location."""
    return f"{location.rstrip('/')}/{path_name(schema)}/{path_name(table)}"


@functools.cache
def writer_properties() -> Any:
    """How setl writes a lake table's Parquet files (appends, a MERGE's rewrites,
    compaction): ZSTD at level 1. A mirror's MERGE of updates to random keys rewrites every
    file one of them is in (about its table, whatever the batch), so its cost is mostly
    decompressing and compressing; against delta-rs' default (Snappy), a MERGE of 300 keys
    into 100k sysbench rows took 137-159 ms of CPU instead of 209-215, an append of the
    same rows 170-234 instead of 195-242, and the files were 45% smaller (9.2 MB instead
    of 16.8 MB). Every reader of Delta (Spark, delta-rs, Polars, DuckDB) reads ZSTD."""
    from deltalake import WriterProperties

    return WriterProperties(compression="ZSTD", compression_level=1)


def maintain(table: Any, retain_hours: int | None, properties: Any = None
             ) -> dict[str, Any]:
    """Compact a table's small files, then vacuum what was removed over ``retain_hours``
    ago (None: no vacuum); what each did."""
    done = dict(table.optimize.compact(writer_properties=writer_properties(),
                                       commit_properties=properties))
    done["vacuumed"] = 0 if retain_hours is None else len(vacuum(table, retain_hours,
                                                                 properties))
    return done


def retention(lake_retain_hours: int) -> int | None:
    """A pipeline's ``lake_retain_hours`` as :func:`maintain` takes it: 0 means never
    vacuum (None), not "delete removed files at once"."""
    return lake_retain_hours if lake_retain_hours > 0 else None


def vacuum(table: Any, retain_hours: int, properties: Any = None, full: bool = False
           ) -> list[str]:
    """Delete the files the table removed over ``retain_hours`` ago; their names. ``full``:
    also files no commit names (a commit that failed left them) — only where nothing
    writes the table meanwhile: a file being written is one no commit names yet."""
    return table.vacuum(retention_hours=retain_hours, dry_run=False,
                        enforce_retention_duration=False, commit_properties=properties,
                        full=full)


class Lake:
    """A lake target's location with its object store's options, resolved where the lake is
    read or written: each credential's reference only if the machine's rules let it go to
    the store's endpoint (``security.credentials``), as a database password to its host."""

    def __init__(self, location: str, storage: Iterable[str] = (), name: str = "") -> None:
        from shared import confinement

        where = f"{'lake target ' + name + ': ' if name else ''}"
        problem = support_problem(location) or location_problem(location)
        if problem is not None:
            raise ConfigError(f"{where}{problem}")
        problem = confinement.current().lake_problem(location)  # the node's rules count
        if problem is not None:
            raise DatabaseHostError(f"{where}{problem}")
        self.location = location[len("file://"):] if location.startswith("file://") \
            else location
        self.local = self.location.startswith("/")
        self.storage = tuple(storage)
        self.options = options(self.storage, location, name)

    @classmethod
    def of(cls, source: Any) -> Lake:
        """The lake of a ``type: delta`` data source."""
        return cls(source.location, source.storage, source.name)

    def uri(self, schema: str, table: str) -> str:
        return table_uri(self.location, schema, table)

    def table(self, schema: str, table: str) -> Any:
        from deltalake import DeltaTable

        return DeltaTable(self.uri(schema, table), storage_options=self.options or None)

    def exists(self, schema: str, table: str) -> bool:
        from deltalake import DeltaTable

        return DeltaTable.is_deltatable(self.uri(schema, table),
                                        storage_options=self.options or None)

    def create(self, schema: str, table: str, arrow_schema: Any, **kwargs: Any) -> Any:
        from deltalake import DeltaTable

        return DeltaTable.create(self.uri(schema, table), arrow_schema, mode="ignore",
                                 storage_options=self.options or None, **kwargs)

    def tables(self) -> list[tuple[str, str]]:
        """The (schema, table) of every Delta table under the location."""
        if self.local:
            return _local_tables(self.location)
        return self._store_tables()

    def _store_tables(self) -> list[tuple[str, str]]:
        from pyarrow import fs

        store, root = self._filesystem(), self.location.split("://", 1)[1].rstrip("/")
        found = []
        try:
            for schema in store.get_file_info(fs.FileSelector(root, allow_not_found=True)):
                if schema.type != fs.FileType.Directory:
                    continue
                for table in store.get_file_info(fs.FileSelector(schema.path)):
                    if table.type == fs.FileType.Directory and store.get_file_info(
                            f"{table.path}/_delta_log").type != fs.FileType.NotFound:
                        found.append((name_of(schema.base_name), name_of(table.base_name)))
        except OSError as exc:
            raise SourceError(f"cannot list the tables of lake {self.location}: {exc}"
                              ) from None
        return sorted(found)

    def _filesystem(self) -> Any:
        """pyarrow's S3 filesystem with the options delta-rs is given."""
        from pyarrow import fs

        named = {option(key): value for key, value in self.options.items()}
        settings: dict[str, Any] = {}
        parts = endpoint_url(self.options)
        if parts is not None:
            netloc = parts["host"] + (f":{parts['port']}" if parts["port"] else "")
            settings.update(endpoint_override=netloc, scheme=parts["scheme"].lower())
        for key, name in (("access_key_id", "access_key"), ("secret_access_key", "secret_key"),
                          ("session_token", "session_token"), ("region", "region")):
            if named.get(key):
                settings[name] = named[key]
        return fs.S3FileSystem(**settings)


def _local_tables(location: str) -> list[tuple[str, str]]:
    found = []
    if not os.path.isdir(location):
        return found
    for schema in sorted(os.listdir(location)):
        folder = os.path.join(location, schema)
        if not os.path.isdir(folder):
            continue
        for table in sorted(os.listdir(folder)):
            if os.path.isdir(os.path.join(folder, table, "_delta_log")):
                found.append((name_of(schema), name_of(table)))
    return found


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


def app_id(pipeline_id: str) -> str:
    return f"setl:{pipeline_id}"


NEAR = 20  # commits read first for a table's stamp (each commit of setl's checks it)
RESTAMP_TRIES = 5  # a position move's commit that lost to another writer is made again


def last_stamp(table: Any, pipeline_id: str, depth: int = 1000) -> Stamp | None:
    """The newest commit of setl's for the pipeline in the table's history (None: none),
    looked for in its newest commits first (reading 1,000 takes ~25 ms on a local disk)."""
    for limit in (min(NEAR, depth), depth):
        found = table.history(limit)
        for commit in found:
            stamp = Stamp.of(commit)
            if stamp is not None and stamp.pipeline == pipeline_id:
                return stamp
        if len(found) < limit:
            return None  # the whole history was read
    return None


def restamp(lake: Lake, pipeline_id: str, run: str, position: BinlogPosition | None
            ) -> list[str]:
    """Every table of a stopped pipeline under a lake location given another run, and with
    ``position`` a new position (an empty one: nothing loaded, so the next start loads
    from the pipeline's start again): an empty commit each. The tables changed.

    Each commit takes the epoch above the table's newest (as a position row's move does),
    so a writer of the pipeline still running somewhere (a node that lost ZooKeeper but
    not its process) is fenced at its next commit; and it is made on the version whose
    stamp it read (no retry inside delta-rs: a commit that lost is read and made again)."""
    import pyarrow as pa
    from deltalake import CommitProperties, write_deltalake
    from deltalake.exceptions import CommitFailedError

    changed = []
    for schema, table in lake.tables():
        delta = lake.table(schema, table)
        for _ in range(RESTAMP_TRIES):
            found = last_stamp(delta, pipeline_id)
            if found is None:
                break
            stamp = Stamp(pipeline_id, run, found.epoch + 1, found.process_id,
                          found.position if position is None else position)
            try:
                write_deltalake(delta, pa.schema(delta.schema().to_arrow()).empty_table(),
                                mode="append", commit_properties=CommitProperties(
                                    custom_metadata=stamp.metadata(), max_commit_retries=0))
            except CommitFailedError:
                delta.update_incremental()
                continue
            changed.append(f"{schema}.{table}")
            break
        else:
            raise LoadError(f"lake table {schema}.{table}: {RESTAMP_TRIES} commits in a row "
                            "lost to other writers while its position was moved; stop what "
                            "writes it (is the channel stopped everywhere?), then try again")
    return changed



def position_of(lake: Lake, pipeline_id: str) -> tuple[BinlogPosition, int, int] | None:
    """Where a lake stands for a pipeline: the earliest position of its tables (each holds
    every transaction up to it), the highest processId and owner epoch; None: no table
    holds any."""
    from shared import gtid

    stamps = [stamp for schema, table in lake.tables()
              if (stamp := last_stamp(lake.table(schema, table), pipeline_id)) is not None
              and stamp.position.file]
    if not stamps:
        return None
    earliest = gtid.earliest([stamp.position for stamp in stamps])
    return earliest, max(s.process_id for s in stamps), max(s.epoch for s in stamps)
