"""A part's target changes as Arrow, a unit per lake table: the Delta target's form, made
in the Spark worker that ran Extract/Transform (bytes in, Arrow IPC bytes out).

- ``mirror``: the changes merged per key — each key ends the batch holding its last image,
  or deleted (an update that changes the key deletes the old one) — as rows with a
  ``_setl_delete`` flag; Load applies them with one MERGE. A key deleted and then written
  again in the batch (a free-door ``D`` request, verify's repair) goes as its delete (every
  lake row of the key removed, a duplicate too) and its row with the flag NULL: inserted,
  matching none.
- ``changelog``: every change in source order, with ``_setl_op`` (I, U, D),
  ``_setl_position`` and ``_setl_gtid`` (its transaction's end), ``_setl_commit_ts``,
  ``_setl_txn`` (the transaction's id: its end position), ``_setl_seq`` (its order in the
  transaction), the row (a delete: the row it removed) and ``_setl_before`` (an update's or
  delete's before image).
"""

from __future__ import annotations

import bisect
import datetime
from collections.abc import Sequence
from operator import attrgetter, itemgetter
from typing import Any

from node.changes import ChangeType, Row, TargetChange
from node.jobs import ROW_BITS, JobSpec, Unit
from node.target.delta.columns import LakeColumn, arrow_type, converter
from node.target.delta.tables import CHANGELOG, LakeFacts
from shared.errors import ConfigError, LoadError

DELETE_FLAG = "_setl_delete"
CHANGELOG_META = ("_setl_op", "_setl_position", "_setl_gtid", "_setl_commit_ts", "_setl_txn",
                  "_setl_seq")
BEFORE = "_setl_before"
PARTITION_KEY = "setl.partition_by"
_OPS = {ChangeType.INSERT: "I", ChangeType.UPDATE: "U", ChangeType.DELETE: "D"}


def render(changes: list[TargetChange], spec: JobSpec, big: bool = True) -> list[Unit]:
    """The changes of each lake table as one Arrow IPC stream."""
    tables: dict[tuple[str, str, str], list[TargetChange]] = {}
    for change in sorted(changes, key=_seq):  # (in seq order mostly: one pass)
        tables.setdefault((change.datasource, change.schema, change.table), []).append(change)
    units = []
    for name, group in tables.items():
        facts = spec.facts.get(name) or LakeFacts()
        where = f"{name[1]}.{name[2]}"
        if facts.mode == CHANGELOG:
            table = changelog(group, facts, spec.transactions, where)
        else:
            table = mirror(group, facts, where)
        first = group[0]
        units.append(Unit(*name, first.push_weight, first.seq, [], len(group), facts.keys,
                          data=ipc(table, facts.partition_by)))
    return units


def inserted(name: tuple[str, str, str], push_weight: int, keys: tuple[str, ...],
             rows: list[Row], runs: Sequence[tuple[int, int]], spec: JobSpec) -> Unit | None:
    """The unit :func:`render` makes of a lake table's changes when the part only inserts
    into it, made from the inserted rows as their pair maps them (in source order, merged by
    ``keys``) and each rows event's place in the batch and rows: no change made of each row.
    None where a key is inserted twice (a key that is not unique on the source: the merge
    keeps its last row) or there is no row."""
    import pyarrow as pa

    facts = spec.facts.get(name) or LakeFacts()
    where = f"{name[1]}.{name[2]}"
    count = len(rows)
    first = next((place << ROW_BITS for place, found in runs if found), None)
    if first is None or count != sum(found for _, found in runs):
        return None
    if facts.mode == CHANGELOG:
        table = _inserts_logged(rows, runs, facts, spec.transactions, where)
    else:
        if len(keys) == 1:
            key = keys[0]
            distinct = len({row[key] for row in rows})
        else:
            distinct = len(set(zip(*[[row[key] for row in rows] for key in keys],
                                   strict=True)))
        if not keys or distinct != count:
            return None
        table = as_arrow(facts, rows, where).append_column(
            DELETE_FLAG, pa.array([False] * count, pa.bool_()))
    return Unit(*name, push_weight, first, [], count, facts.keys,
                data=ipc(table, facts.partition_by))


def _inserts_logged(rows: list[Row], runs: Sequence[tuple[int, int]], facts: LakeFacts,
                    transactions: Sequence[tuple[int, str, str, int]], where: str) -> Any:
    """:func:`changelog` of inserts only: the transaction found per rows event."""
    import pyarrow as pa

    starts = [txn[0] for txn in transactions]
    of_txn: list[int] = []
    seqs: list[int] = []
    for place, found in runs:
        at = bisect.bisect_right(starts, place) - 1
        if at < 0:  # before the first transaction: none known
            at, first = len(transactions), 0
        else:
            first = starts[at]
        start = (place - first) << ROW_BITS
        of_txn += [at] * found
        seqs += range(start, start + found)
    columns = _columns(facts, rows)
    arrays = [_array(column, _values(rows, column.name), where) for column in columns]
    count = len(rows)
    return _logged(pa.array(["I"] * count, pa.string()), of_txn, seqs, transactions,
                   columns, arrays, pa.array([True] * count, pa.bool_()), None)


_seq = attrgetter("seq")  # a change's order in the batch (a C call per change)


def mirror(changes: Sequence[TargetChange], facts: LakeFacts, where: str) -> Any:
    """Each key's last image, or its delete, as rows flagged ``_setl_delete`` (a key deleted
    before its last image: its delete, then its image flagged NULL)."""
    state: dict[tuple[Any, ...], Row | None] = {}
    cleared: set[tuple[Any, ...]] = set()  # keys deleted, then written again
    for change in changes:
        keys = change.keys
        if not keys:
            raise ConfigError(f"lake table {where} has no key to mirror its rows by (a "
                              "primary key, or a unique key over NOT NULL columns); give its "
                              "pair 'mode: changelog'")
        if change.type is ChangeType.DELETE:
            state[change.before_key] = None  # type: ignore[index]
            continue
        after = change.after or {}
        key = tuple(after[name] for name in keys)
        if change.before_key is not None and change.before_key != key:
            state[change.before_key] = None
        if key in state and state[key] is None:
            cleared.add(key)
        state[key] = after
    keys = changes[0].keys if changes else facts.keys
    rows: list[Row] = []
    deleted: list[bool | None] = []
    for key, row in state.items():
        if row is None or key in cleared:
            rows.append(dict(zip(keys, key, strict=True)))
            deleted.append(True)
        if row is not None:
            rows.append(row)
            deleted.append(None if key in cleared else False)
    import pyarrow as pa

    return as_arrow(facts, rows, where).append_column(DELETE_FLAG, pa.array(deleted, pa.bool_()))


def as_arrow(facts: LakeFacts, rows: list[Row], where: str) -> Any:
    """Rows as the lake table holds them: each value in its column's Delta type."""
    import pyarrow as pa

    columns = _columns(facts, rows)
    return pa.Table.from_arrays([_array(column, _values(rows, column.name), where)
                                 for column in columns],
                                names=[column.name for column in columns])


def changelog(changes: Sequence[TargetChange], facts: LakeFacts,
              transactions: Sequence[tuple[int, str, str, int]], where: str) -> Any:
    """Every change in source order with where it came from."""
    import pyarrow as pa

    starts = [txn[0] for txn in transactions]
    none = len(transactions)  # (a change before the first transaction: none known)
    # … but one before the batch's first event (a delete asked in a watermark window that
    # opens the batch) is the batch's first transaction's, in front of its changes
    at, first, following = 0 if starts and not starts[0] else none, 0, \
        starts[0] if starts else _NEVER
    of_txn: list[int] = []
    seqs: list[int] = []
    ops: list[str] = []
    absent: list[bool] = []
    rows: list[Row] = []
    befores: list[Row] = []  # (_NO_BEFORE where a change has none: every value None)
    insert, update, delete = ChangeType.INSERT, ChangeType.UPDATE, ChangeType.DELETE
    for change in changes:  # in seq order: each transaction's changes one run
        seq = change.seq
        if seq >> ROW_BITS >= following:
            at = bisect.bisect_right(starts, seq >> ROW_BITS) - 1
            first = starts[at]
            following = starts[at + 1] if at + 1 < none else _NEVER
        of_txn.append(at)
        seqs.append(seq - (first << ROW_BITS))
        before = change.before
        if before is None and change.before_key is not None:
            before = dict(zip(change.keys, change.before_key, strict=True))
        after = change.after
        rows.append(after if after is not None else before or {})
        kind = change.type
        if kind is insert or before is None:
            befores.append(_NO_BEFORE)
            absent.append(True)
        else:
            befores.append(before)
            absent.append(False)
        ops.append("I" if kind is insert else "U" if kind is update else
                   "D" if kind is delete else _OPS[kind])
    columns = _columns(facts, rows)
    arrays = [_array(column, _values(rows, column.name), where) for column in columns]
    mask = pa.array(absent, pa.bool_())
    if mask.true_count == len(absent):  # inserts only: no before image
        before_arrays = None
    else:
        before_arrays = [_array(column, _values(befores, column.name), where)
                         for column in columns]
    return _logged(pa.array(ops, pa.string()), of_txn, seqs, transactions, columns, arrays,
                   mask, before_arrays)


class _Absent(dict):  # type: ignore[type-arg]
    """A row with no column: each value None (a change log's insert has no before image)."""

    def __missing__(self, key: str) -> None:
        return None


_NO_BEFORE = _Absent()


def _values(rows: Sequence[Row], name: str) -> list[Any]:
    """Column ``name``'s values in ``rows`` (None where a row has no such column): one C
    call a value where every row has it."""
    try:
        return list(map(itemgetter(name), rows))
    except KeyError:
        return [row.get(name) for row in rows]


def _logged(ops: Any, of_txn: list[int], seqs: list[int],
            transactions: Sequence[tuple[int, str, str, int]], columns: list[LakeColumn],
            arrays: list[Any], absent: Any, before_arrays: list[Any] | None) -> Any:
    """A change log's table: each change's op, its transaction's meta (``of_txn``: its
    index in ``transactions``, or past them: none known), its order in the transaction,
    its row and its before image (``before_arrays`` None: none has one)."""
    import pyarrow as pa

    names = [column.name for column in columns]
    fields = [pa.field(column.name, array.type) for column, array in zip(columns, arrays,
                                                                           strict=True)]
    if before_arrays is None:
        before_arrays = [pa.nulls(len(absent), field.type) for field in fields]
    before = pa.StructArray.from_arrays(before_arrays, fields=fields, mask=absent)
    index = pa.array(of_txn, pa.int32())
    ends = pa.array([txn[1] for txn in transactions] + [""], pa.string()).take(index)
    meta = [ops, ends,
            pa.array([txn[2] for txn in transactions] + [""], pa.string()).take(index),
            pa.array([_stamp(txn[3]) for txn in transactions] + [None],
                     pa.timestamp("us", tz="UTC")).take(index),
            ends, pa.array(seqs, pa.int64())]
    return pa.Table.from_arrays([*meta, *arrays, before],
                                names=[*CHANGELOG_META, *names, BEFORE])


_NEVER = 1 << 62  # past every place


def _stamp(ts_ms: int) -> datetime.datetime | None:
    return datetime.datetime.fromtimestamp(ts_ms / 1000, datetime.UTC) if ts_ms else None


def joined(tables: list[Any], keys: Sequence[str]) -> Any:
    """Several batches' rows of one table as one: a change log's one after the other; a
    mirror's merged again, each key's row of the latest batch kept (each batch's rows are
    merged per key already, so the last one says how the key ends) — after its key's delete
    (flagged NULL, as :func:`mirror` makes them) where an earlier row deleted the key."""
    if len(tables) == 1:
        return tables[0]
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = pa.concat_tables(tables, promote_options="default")
    if DELETE_FLAG not in rows.column_names:  # one chunk: written as one file, in order
        return rows.combine_chunks()  # (delta-rs wrote two chunks' rows second first)
    order, cleared = "_setl_order", "_setl_cleared"
    places = pa.array(range(rows.num_rows), pa.int64())
    flag = rows.column(DELETE_FLAG)
    numbered = rows.append_column(order, places).append_column(cleared, pc.if_else(
        pc.fill_null(flag, False), places, pa.scalar(None, pa.int64())))
    found = numbered.group_by(list(keys), use_threads=False).aggregate(
        [(order, "max"), (cleared, "max")])
    last, deleted = found[f"{order}_max"], found[f"{cleared}_max"]
    again = pc.fill_null(pc.less(deleted, last), False)  # deleted, then written again
    picks = pa.concat_arrays([last.combine_chunks(),
                              pc.filter(deleted, again).combine_chunks()])
    marks = pa.concat_arrays([again.combine_chunks(),
                              pa.array([False] * (len(picks) - len(last)), pa.bool_())])
    ordering = pc.sort_indices(picks)  # in the order they came
    picked = rows.take(pc.take(picks, ordering))
    written = pc.if_else(pc.take(marks, ordering), pa.scalar(None, pa.bool_()),
                         picked.column(DELETE_FLAG))
    return picked.set_column(picked.schema.get_field_index(DELETE_FLAG), DELETE_FLAG, written)


def _columns(facts: LakeFacts, rows: list[Row]) -> list[LakeColumn]:
    """The table's columns, and after them any a row has that its facts do not know (a
    transform's: strings)."""
    columns = list(facts.columns)
    known = {column.name for column in columns}
    for row in rows:
        if len(row) > len(known) or not known.issuperset(row):
            for name in row:
                if name not in known:
                    known.add(name)
                    columns.append(LakeColumn(name, "string"))
    return columns


def _array(column: LakeColumn, values: list[Any], where: str) -> Any:
    import pyarrow as pa

    if column.kind == "string":  # text as the source's bytes: checked as UTF-8 by Arrow at
        try:  # once (a value Arrow does not take, a SET's members, goes the way below)
            return pa.array(values, pa.binary()).cast(pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            pass
    convert = converter(column)
    try:  # (a conversion's error too: bytes that are not UTF-8 text, named below)
        return pa.array(values if convert is None else [convert(value) for value in values],
                        arrow_type(column))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
        bad = next((value for value in values if value is not None and
                    not _fits(value, column)), None)
        raise LoadError(_refusal(column, bad, where, exc)) from None


def _fits(value: Any, column: LakeColumn) -> bool:
    import pyarrow as pa

    convert = converter(column)
    try:
        pa.array([value if convert is None else convert(value)], arrow_type(column))
        return True
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return False


def _refusal(column: LakeColumn, value: Any, where: str, exc: Exception) -> str:
    if isinstance(value, str) and column.kind in ("date", "datetime", "timestamp"):
        return (f"lake table {where}, column {column.name}: the source holds {value!r}, a "
                "zero or partial date that a Delta date or timestamp cannot hold (setl never "
                "writes NULL in its place). Leave the column out of the pair (columns: "
                f"{{exclude: [{column.name}]}}) and apply the definition, or write the table "
                "into a database target: the pipeline stays at this transaction until then")
    if isinstance(value, bytes | bytearray) and column.kind == "string":
        return (f"lake table {where}, column {column.name}: the source gives the bytes "
                f"{bytes(value)[:40]!r}, which are not UTF-8 text (a charset setl cannot "
                "decode); leave the column out of the pair (columns: {exclude: "
                f"[{column.name}]}}) and apply the definition, or convert it on the source "
                "(ALTER TABLE … MODIFY … CHARACTER SET utf8mb4): the pipeline stays at this "
                "transaction until then")
    return (f"lake table {where}, column {column.name} ({column.kind}): value {value!r} "
            f"does not fit ({exc}); leave the column out of the pair or fix the row on the "
            "source, then resume the channel")


def ipc(table: Any, partition_by: Sequence[str] = ()) -> bytes:
    """The rows as an Arrow IPC stream; the table's partition columns ride in the schema's
    metadata (the loader makes the table on its first rows)."""
    import pyarrow as pa

    if partition_by:
        table = table.replace_schema_metadata({PARTITION_KEY: ",".join(partition_by)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def partition_by(rows: Any) -> list[str]:
    found = (rows.schema.metadata or {}).get(PARTITION_KEY.encode(), b"").decode()
    return [name for name in found.split(",") if name]


def read_ipc(data: bytes) -> Any:
    import pyarrow as pa

    return pa.ipc.open_stream(data).read_all()
