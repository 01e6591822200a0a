"""A part's changes as a subscription's protobuf transactions, made in the Spark worker that
ran Extract/Transform: every change, in source order, with its transaction's id and
position, and each value typed as the source holds it (the column's type comes from the
binlog's table map, as a lake's does: :mod:`node.target.delta.columns`).

A part of a subscription's batch holds whole transactions (the planner cuts them so), and
its bytes are the ``transactions`` entries of a ``ChangeBatch``: the node joins the parts'
bytes behind the batch's own fields (protobuf concatenation merges messages).
"""

from __future__ import annotations

import bisect
import datetime
import decimal
import json
from collections.abc import Callable
from typing import Any

from node.changes import ChangeType, Row, TargetChange
from node.jobs import ROW_BITS, JobSpec, Unit
from node.target.delta.columns import LakeColumn, time_text
from node.target.delta.tables import LakeFacts
from shared.errors import LoadError, TransformError
from shared.rpc import model_pb2, subscription_pb2
from shared.textcodecs import python_codec

_OPS = {ChangeType.INSERT: "I", ChangeType.UPDATE: "U", ChangeType.DELETE: "D"}
Setter = Callable[[Any, Any], None]  # (a Value message, a decoded value)


def render(changes: list[TargetChange], spec: JobSpec, big: bool = True) -> list[Unit]:
    """The part's changes as one unit: its transactions' serialized entries."""
    if not changes:
        return []
    ordered = sorted(changes, key=_seq)
    batch = subscription_pb2.ChangeBatch()
    starts = [txn[0] for txn in spec.transactions]
    setters: dict[tuple[str, str, str], dict[str, Setter]] = {}
    current, first_place = None, -1
    for change in ordered:
        place = change.seq >> ROW_BITS
        index = bisect.bisect_right(starts, place) - 1
        if index < 0:
            raise LoadError(f"batch {spec.process_id}: a change of {change.schema}."
                            f"{change.table} is in no transaction of the batch")
        if current is None or spec.transactions[index][0] != first_place:
            first_place, end, gtid, ts_ms = spec.transactions[index]
            current = batch.transactions.add(id=end, commit_ts_ms=ts_ms)
            file, _, pos = end.rpartition(":")
            current.position.CopyFrom(model_pb2.BinlogPosition(file=file, pos=int(pos or 0),
                                                               gtid=gtid))
        name = (change.datasource, change.schema, change.table)
        typed = setters.get(name)
        if typed is None:
            typed = setters[name] = _setters(spec.facts.get(name) or LakeFacts())
        out = current.changes.add(op=_OPS[change.type], schema=change.schema,
                                  table=change.table, index=len(current.changes),
                                  keys=change.keys)
        before = change.before
        if before is None and change.before_key is not None:
            before = dict(zip(change.keys, change.before_key, strict=True))
        if change.type is not ChangeType.INSERT and before is not None:
            _fill(out.before, before, typed, change)
        if change.after is not None:
            _fill(out.after, change.after, typed, change)
    return [Unit(ordered[0].datasource, "", "", 0, ordered[0].seq, [], len(ordered),
                 data=batch.SerializeToString())]


def _seq(change: TargetChange) -> int:
    return change.seq


def _fill(fields: Any, row: Row, typed: dict[str, Setter], change: TargetChange) -> None:
    for name, value in row.items():
        field = fields.add(name=name)
        if value is None:
            field.value.null = True
            continue
        setter = typed.get(name) or _by_value
        try:
            setter(field.value, value)
            if type(value) is not bytes:  # (an Encoded is bytes that names its charset)
                _name_charset(field, value)
        except (TypeError, ValueError, OverflowError) as exc:
            # the same row fails again on every retry: pause at once and say what to do
            raise TransformError(
                f"subscription table {change.schema}.{change.table}, column {name}: value "
                f"{value!r} does not fit its type ({exc}); fix the processor that makes it "
                f"(or the row on the source), or leave the column out of the pair (columns: "
                f"{{exclude: [{name}]}}), then resume the channel") from None


def _name_charset(field: Any, value: Any) -> None:
    """The charset of text served as its bytes: an :class:`Encoded` value's, or a SET's
    whose members are (a transform's set of them)."""
    charset = getattr(value, "charset", None)
    if charset is None and isinstance(value, set | frozenset) and value:
        charset = getattr(next(iter(value)), "charset", None)
    if charset and field.value.WhichOneof("kind") == "binary":
        field.charset = charset


def _setters(facts: LakeFacts) -> dict[str, Setter]:
    return {column.name: _setter(column) for column in facts.columns}


def _setter(column: LakeColumn) -> Setter:
    kind = column.kind
    if kind in ("int8", "int16", "int32", "int64"):
        return _int
    if kind == "uint64":
        return _uint
    if kind in ("decimal", "decimal_text"):
        return _decimal
    if kind == "float32":
        return _float
    if kind == "float64":
        return _double
    if kind == "date":
        return _date
    if kind in ("datetime", "timestamp"):  # with the column's fractional digits, as the
        fsp = column.scale  # source shows it (a reader keying a cache by the text: one key)
        if kind == "datetime":
            return lambda message, value: setattr(message, "datetime", _moment(value, fsp))
        return lambda message, value: setattr(message, "timestamp", _moment(value, fsp))
    if kind == "time":
        fsp = column.scale
        return lambda message, value: setattr(message, "time", time_text(value, fsp))
    if kind == "binary":
        return _binary
    if kind == "binary_fixed":
        size = column.precision
        return lambda message, value: setattr(message, "binary",
                                              _bytes(value).ljust(size, b"\0"))
    if column.members:
        order = {member: number for number, member in enumerate(column.members)}
        return lambda message, value: _text(message, value, order)
    return _text


def _int(message: Any, value: Any) -> None:
    message.int = int(value)


def _uint(message: Any, value: Any) -> None:
    message.uint = int(value)


def _decimal(message: Any, value: Any) -> None:
    """Its digits, never an exponent: a transform's float by its shortest repr (1e-05 →
    0.00001), as the database target's DECIMAL column takes it."""
    if isinstance(value, float):
        value = decimal.Decimal(repr(value))
    message.decimal = format(value, "f") if isinstance(value, decimal.Decimal) else str(value)


def _float(message: Any, value: Any) -> None:
    message.float = float(value)


def _double(message: Any, value: Any) -> None:
    message.double = float(value)


def _date(message: Any, value: Any) -> None:
    message.date = value.isoformat() if isinstance(value, datetime.date) else str(value)


def _moment(value: Any, fsp: int | None = None) -> str:
    """A DATETIME's or TIMESTAMP's text with ``fsp`` fractional digits (None: those its
    value has, for a value without a column: a processor's)."""
    if isinstance(value, datetime.datetime):
        if fsp is None:
            return value.isoformat(sep=" ")
        text = value.isoformat(sep=" ", timespec="seconds")
        return f"{text}.{value.microsecond:06d}"[:len(text) + 1 + fsp] if fsp else text
    text = str(value)  # a zero or partial date, as written (with its digits, or without)
    return f"{text}.{'0' * fsp}" if fsp and len(text) == 19 else text


def _binary(message: Any, value: Any) -> None:
    message.binary = _bytes(value)


def _bytes(value: Any) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _text(message: Any, value: Any, order: dict[Any, int] | None = None) -> None:
    """A text column's string. Bytes are a value in a charset Python has no exact codec for
    (node.extract.decodetypes.encoding: dec8, sjis, …): they go as ``binary``, as the source
    holds them (read as UTF-8 they would be other characters, or fail)."""
    if isinstance(value, set | frozenset):  # a transform's SET value
        value = _set_value(value, order or {})
    if isinstance(value, bytes | bytearray):
        message.binary = bytes(value)
        return
    if isinstance(value, dict | list):  # a transform's JSON value: JSON text, not repr
        value = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    message.text = value if isinstance(value, str) else str(value)


def _set_value(members: set[Any] | frozenset[Any], order: dict[Any, int]) -> str | bytes:
    """A transform's set as the source gives a SET: its members in the column's definition
    order (any the definition lacks after them), joined by commas. Members of a charset kept
    as bytes (Encoded) join as bytes, served as ``binary`` as the source's own values of
    such a SET are; among text, each is decoded by its charset's Python codec."""
    ordered = sorted(members, key=lambda member: (
        order.get(member, len(order)), isinstance(member, bytes | bytearray), member))
    if ordered and all(isinstance(member, bytes | bytearray) for member in ordered):
        return b",".join(bytes(member) for member in ordered)
    return ",".join(_member_text(member) for member in ordered)


def _member_text(member: Any) -> str:
    if not isinstance(member, bytes | bytearray):
        return member if isinstance(member, str) else str(member)
    try:
        return bytes(member).decode(python_codec(getattr(member, "charset", "utf8")),
                                    "replace")
    except LookupError:  # (a charset Python has no codec for)
        return bytes(member).decode("utf-8", "replace")


def _by_value(message: Any, value: Any) -> None:
    """A column its facts do not know (a transform's): by the value's own type."""
    if isinstance(value, bool):
        message.int = int(value)
    elif isinstance(value, int):
        if value >= 1 << 63:
            message.uint = value
        else:
            message.int = value
    elif isinstance(value, decimal.Decimal):
        _decimal(message, value)
    elif isinstance(value, float):
        message.double = value
    elif isinstance(value, bytes | bytearray):
        message.binary = bytes(value)
    elif isinstance(value, datetime.datetime):
        message.datetime = _moment(value)
    elif isinstance(value, datetime.date):
        message.date = value.isoformat()
    elif isinstance(value, datetime.timedelta):
        message.time = time_text(value, 6 if value.microseconds else 0)
    else:
        _text(message, value)


def ddl_transaction(change: TargetChange, name: str, gtid: str, ts_ms: int) -> bytes:
    """A DDL statement as a transaction of its own (made in the node: DDL is rare); ``name``
    its id (``file:pos``, where it ends)."""
    batch = subscription_pb2.ChangeBatch()
    file, _, pos = name.partition("/")[0].rpartition(":")
    batch.transactions.add(id=name, commit_ts_ms=ts_ms, ddl=change.ddl,
                           ddl_schema=change.schema,
                           position=model_pb2.BinlogPosition(file=file, pos=int(pos or 0),
                                                             gtid=gtid))
    return batch.SerializeToString()

