"""Verify of a lake target: a mirrored Delta table compared with the source table it holds.

**Both sides as the lake holds them.** The source's rows go through the pipeline's
Extract/Transform as for a database target, then into the table's Delta types exactly as
Load's workers convert them (:func:`node.target.delta.units.as_arrow`: unsigned BIGINT as a
decimal, TIME as its text, BINARY(n) padded…); the lake's rows are read as they are. A row
is hashed over its values as Arrow gives them to Python (:func:`lake_hash`), so a value
equal in the lake's type hashes equal. A key is known by the source's values; a lake row's
key is matched with them in its Delta form.

**Snapshots and positions.** A table is read at one version. The pipeline's position there
is that of setl's newest commit to it, read *before* the version is loaded, so the rows
read hold at least every transaction up to it (a table that no batch touched for a while
has an older position: its differences are simply re-checked, :mod:`node.verify.settle`).

**A key held twice** (a Delta table has no unique key) is a difference (its rows are
compared as a multiset, :data:`node.verify.readers.Rows`), reported as the others are;
``--repair`` deletes every row of it and writes the source's row again.

**Extra rows** (in the lake, given by no source row) are looked for in each chunk's key
range where the split column's Delta type orders as the source does (numbers, dates and
times); a text or binary split column is ordered by its collation on the source and by
bytes in the lake, so there only the keys the source gives are compared (the report says
so). A change log (``mode: changelog``: every change appended) holds no current rows to
compare: verify leaves it out with the reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from node.extract.chunks import Chunk, SplitKey
from node.target.delta.columns import META_PREFIX, LakeColumn
from node.target.delta.tables import CHANGELOG, LakeFacts, LakeTables
from node.target.delta.units import as_arrow
from node.verify.plan import Target
from node.verify.values import Column, Rows, add_row
from shared import lakes
from shared.errors import SourceError
from shared.model import BinlogPosition, DataSource

Key = tuple[Any, ...]
ORDERED = frozenset(("int8", "int16", "int32", "int64", "uint64", "decimal", "float32",
                     "float64", "date", "datetime", "timestamp"))


class LakeView:
    """A lake location's tables as one verify read sees them: each at the version it had
    when first read, with the pipeline's position in it."""

    def __init__(self, source: DataSource, pipeline_id: str) -> None:
        self.source, self.pipeline_id = source, pipeline_id
        self.lake = lakes.Lake.of(source)
        self._tables: dict[tuple[str, str], tuple[Any, BinlogPosition | None]] = {}

    def position(self, schema: str, table: str) -> BinlogPosition | None:
        return self._open(schema, table)[1]

    def rows(self, schema: str, table: str, columns: Sequence[str], condition: Any
             ) -> list[dict[str, Any]]:
        dataset = self._open(schema, table)[0]
        try:
            return dataset.to_table(columns=list(columns), filter=condition).to_pylist()
        except Exception as exc:  # pyarrow's and delta-rs's errors alike
            raise SourceError(f"verify read failed on lake table {schema}.{table} of "
                              f"{self.source.name}: {exc}") from None

    def _open(self, schema: str, table: str) -> tuple[Any, BinlogPosition | None]:
        found = self._tables.get((schema, table))
        if found is None:
            uri = self.lake.uri(schema, table)
            try:
                delta = self.lake.table(schema, table)
                stamp = lakes.last_stamp(delta, self.pipeline_id)  # first: the rows hold it
                delta.update_incremental()
                dataset = delta.to_pyarrow_dataset()
            except Exception as exc:  # delta-rs's errors are of many kinds
                raise SourceError(f"verify cannot read lake table {schema}.{table} of "
                                  f"{self.source.name} ({uri}): {exc}") from None
            position = stamp.position if stamp is not None and stamp.position.file else None
            found = self._tables[(schema, table)] = (dataset, position)
        return found


class LakePlanner:
    """What verify's plan needs of a pipeline's lake targets: their columns in the lake and
    as Load types them, or why a table is not compared."""

    def __init__(self, compiled: Any, sources: dict[str, DataSource]) -> None:
        self.sources = {name: source for name, source in sources.items()
                        if source.type == "delta"}
        self.tables = LakeTables(compiled) if self.sources else None

    def __contains__(self, datasource: str) -> bool:
        return datasource in self.sources

    def describe(self, address: tuple[str, str, str]
                 ) -> tuple[list[Column], tuple[LakeColumn, ...]] | str | None:
        """The lake table's columns (setl's own left out) and their Load types, why the
        table is not compared, or None when it does not exist (every row is missing)."""
        assert self.tables is not None
        datasource, schema, table = address
        where = f"{datasource}:{schema}.{table}"
        facts: LakeFacts = self.tables.of(address)
        if facts.mode == CHANGELOG:
            return (f"target table {where} is a change log (every change appended, not the "
                    "current rows); read it with Spark or deltalake (docs/lake.md)")
        lake = lakes.Lake.of(self.sources[datasource])
        if not lake.exists(schema, table):  # no Delta table at lake.uri(schema, table)
            return None
        fields = lake.table(schema, table).schema().to_arrow()
        columns = [Column(field.name, "lake", str(field.type)) for field in fields
                   if not field.name.startswith(META_PREFIX)]
        return columns, facts.columns


def blind(target: Target) -> str:
    """Why rows no source row gives are not looked for in a lake table ("": they are, in
    each chunk's key range: its split column orders as on the source)."""
    kinds = {column.name: column.kind for column in target.lake}
    column = target.range_column
    if column is None or kinds.get(column) in ORDERED:
        return ""
    return (f"its split column {column} is {kinds.get(column, 'text')} in the lake, "
            "ordered by bytes there and by its collation on the source")


def lake_hash(row: dict[str, Any], columns: Sequence[str]) -> int:
    """64 bits of BLAKE2b over ``columns`` of a row as Arrow gives its values."""
    digest = hashlib.blake2b(digest_size=8)
    for name in columns:
        value = repr(row.get(name)).encode("utf-8", "surrogatepass")
        digest.update(len(name).to_bytes(2, "little") + name.encode("utf-8", "surrogatepass"))
        digest.update(len(value).to_bytes(4, "little") + value)
    return int.from_bytes(digest.digest(), "little")


def expected(target: Target, found: list[tuple[Key, dict[str, Any]]],
             side: Any) -> None:
    """The lake rows the source's transformed rows make (``found``: key, row), hashed
    into ``side`` (a :class:`node.verify.readers.Side`)."""
    if not found:
        return
    made = as_arrow(LakeFacts(target.lake), [row for _, row in found], target.id).to_pylist()
    for (key, _), row in zip(found, made, strict=True):
        columns = tuple(sorted(name for name in row if name in target.compared))
        side.columns[(key, target.id)] = columns
        add_row(side.expected.setdefault(key, {}), target.id, lake_hash(row, columns))


def _key_columns(target: Target) -> list[LakeColumn]:
    kinds = {column.name: column for column in target.lake}
    return [kinds.get(name) or LakeColumn(name, "string") for name in target.keys]


def lake_keys(target: Target, keys: Sequence[Key]) -> list[Key]:
    """Source keys in their Delta form (a lake key stays as it is)."""
    if not keys:
        return []
    rows = [dict(zip(target.keys, key, strict=True)) for key in keys]
    made = as_arrow(LakeFacts(tuple(_key_columns(target))), rows, target.id).to_pylist()
    return [tuple(row[name] for name in target.keys) for row in made]


def chunk_filter(key: SplitKey, chunk: Chunk, target: Target) -> Any:
    """The pyarrow condition selecting a chunk's rows in the lake (``ordered`` holds)."""
    import pyarrow.compute as pc

    name = target.range_column or key.column
    field = pc.field(name)
    if chunk.nulls:
        return field.is_null()
    column = next(c for c in target.lake if c.name == name)
    bounds = [value for value in (chunk.low, chunk.high) if value is not None]
    converted = as_arrow(LakeFacts((column,)), [{name: value} for value in bounds],
                         target.id).column(0)
    scalars: list[Any] = [converted[i] for i in range(len(bounds))]
    condition = field.is_valid()
    if chunk.low is not None:
        condition = condition & (field >= scalars.pop(0))
    if chunk.high is not None:
        condition = condition & (field < scalars.pop(0))
    return condition


def keys_filter(target: Target, keys: Sequence[Key]) -> Any:
    """The pyarrow condition selecting (at least) the rows of ``keys`` (in Delta form):
    by the first key column; the caller keeps the exact keys."""
    import pyarrow as pa
    import pyarrow.compute as pc

    first = _key_columns(target)[0]
    values = as_arrow(LakeFacts((first,)), [{first.name: key[0]} for key in keys],
                      target.id).column(0)
    return pc.field(first.name).isin(pa.array(values.to_pylist(), values.type))


def read(view: LakeView, target: Target, condition: Any, aliases: dict[Key, Key],
         side: Any, only: set[Key] | None = None) -> dict[Key, Rows]:
    """The lake rows ``condition`` selects, hashed, by source key (``aliases``: Delta form
    → source key; a row no source key has keeps its Delta key; a key of several rows has
    each row's hash, a difference from the source's one row whatever they hold: a Delta
    table has no unique key, and another writer can leave a key twice); ``only``: just
    these Delta keys."""
    names = list(dict.fromkeys([*target.keys, *sorted(target.compared)]))
    own = tuple(sorted(target.compared))
    found: dict[Key, Rows] = {}
    for row in view.rows(target.schema, target.table, names, condition):
        lake_key = tuple(row[name] for name in target.keys)
        if only is not None and lake_key not in only:
            continue
        key = aliases.get(lake_key, lake_key)
        add_row(found, key, lake_hash(row, side.columns.get((key, target.id), own)))
    return found


def chunk_rows(view: LakeView, key: SplitKey, chunk: Chunk, target: Target,
               side: Any) -> dict[Key, Rows]:
    """A chunk's rows in the lake table, every row of its key range."""
    keys = [found for found, tables in side.expected.items() if target.id in tables]
    aliases = dict(zip(lake_keys(target, keys), keys, strict=True))
    return read(view, target, chunk_filter(key, chunk, target), aliases, side)


def key_rows(view: LakeView, target: Target, keys: Sequence[tuple[Key, Key]], side: Any
             ) -> dict[Key, Rows]:
    """The rows of ``keys``: (the key to look up — a source key, the one a source row writes
    where a virtual column writes the key, or the Delta key of a row only the lake has —,
    the key the rows are known by)."""
    found: dict[Key, Rows] = {}
    for start in range(0, len(keys), 500):
        part = list(keys[start:start + 500])
        forms = lake_keys(target, [by for by, _ in part])
        aliases = dict(zip(forms, [known for _, known in part], strict=True))
        found.update(read(view, target, keys_filter(target, forms), aliases, side,
                          set(forms)))
    return found
