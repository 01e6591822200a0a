"""A subscription's transactions as JSON, as ``setl subscribe -o json`` prints them.

A transaction is an object of its id, position, commit time and changes (or its DDL); a
change's images are objects of its columns' typed values (:func:`value`): integers and
floats as numbers (a FLOAT by the shortest digits that are the same float32), DECIMAL,
dates, times and text as the exact strings the message holds, binary as upper-case hex,
with the charsets of text served as bytes beside them (:func:`charsets`).
"""

from __future__ import annotations

import json
import math
import re
import struct
from typing import Any

from shared.rpc import subscription_pb2

# characters JSON may hold as they are which the CLI's terminal guard (cli.printable) would
# rewrite as ``\xNN`` — no JSON escape: the line would not parse, and the batch is
# acknowledged once printed (DEL, C1 controls, latin1's 0x81/0x8D/…); and U+2028/U+2029,
# which JavaScript's parsers took for line ends
_UNPRINTED = re.compile("[\x7f-\x9f\u2028\u2029]")


def dumps(found: Any) -> str:
    """``found`` as one line of JSON whose text is as the source's (not ASCII-escaped), with
    the characters a terminal must not get as ``\\u`` escapes: the same value to a JSON
    reader, nothing the terminal guard rewrites."""
    return _UNPRINTED.sub(lambda match: f"\\u{ord(match.group()):04x}",
                          json.dumps(found, ensure_ascii=False))


def transaction(txn: subscription_pb2.Transaction,
                changes: Any = None) -> dict[str, Any]:
    """A transaction as JSON: its changes' values as :func:`value` gives them."""
    found: dict[str, Any] = {
        "id": txn.id, "file": txn.position.file, "pos": txn.position.pos,
        "gtid": txn.position.gtid, "commit_ts_ms": txn.commit_ts_ms}
    if txn.ddl:
        found.update(ddl=txn.ddl, schema=txn.ddl_schema)
        return found
    found["changes"] = [
        {"index": change.index, "op": change.op, "schema": change.schema,
         "table": change.table, "keys": list(change.keys),
         **({"before": row(change.before)} if change.op != "I" else {}),
         **({"after": row(change.after)} if change.op != "D" else {}),
         **({"charsets": named} if (named := charsets(change)) else {})}
        for change in (txn.changes if changes is None else changes)]
    return found


def charsets(change: subscription_pb2.RowChange) -> dict[str, str]:
    """The charsets of a change's text served as bytes (hex in ``before``/``after``), by
    column: what to decode them by."""
    return {field.name: field.charset for field in (*change.before, *change.after)
            if field.charset}


def row(fields: Any) -> dict[str, Any]:
    """A change's image as JSON: its columns' values (:func:`value`) by name."""
    return {field.name: value(field.value) for field in fields}


def value(message: subscription_pb2.Value) -> Any:
    """A typed value as JSON: numbers as numbers, binary as upper-case hex, the rest (DECIMAL,
    dates, times, text) as the exact strings the message holds."""
    kind = message.WhichOneof("kind")
    if kind is None or kind == "null":
        return None
    found = getattr(message, kind)
    if kind == "float":
        return float32(found)
    return found.hex().upper() if kind == "binary" else found


def float32(found: float) -> float:
    """A FLOAT's value by the shortest digits that are the same float32 (0.1, not the
    0.10000000149011612 it is as a double)."""
    if not math.isfinite(found):
        return found
    exact = struct.pack("<f", found)
    for digits in range(1, 10):
        shortest = float(f"{found:.{digits}g}")
        try:
            if struct.pack("<f", shortest) == exact:
                return shortest
        except OverflowError:  # rounded past float32's largest: more digits
            continue
    return found
