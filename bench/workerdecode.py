"""The workers' row decoder alone, per row, against today's fastest path in Select.

    python -m bench.decode --worker [--seconds 10] [--repeat 5] [--smoke]

On a sandbox of its own, for sysbench's tables in utf8mb4 and in latin1: ``prepare``
(multi-row inserts) then ``oltp_write_only`` at full rate for ``--seconds`` (single-row
inserts, updates and deletes). Select's BinlogReader reads that stretch once, keeping each
rows event's packet and table map. Then, in this process with nothing else running, the
packets are decoded ``--repeat`` times each way, the ways taking turns (the best run
counts):

- *after*: ``node.extract.decode.decode_rows`` (the worker's decoder; schemas made once and
  pickled as a worker gets them);
- *before*, two ways: ``node.select.fastrows``' ``FastRows(...).images()`` alone (the
  decoding proper), and Select's whole fastrows path from a packet to its rows (the packet
  factory's rows branch, then ``images()``); the library's reading of the packet off the
  socket is in neither.

Both must give the same rows. Reports CPU µs per row by kind of event and the speed-ups.
"""

from __future__ import annotations

import gc
import pickle
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bench.peers import DB, Peers
from node.extract import decode
from node.select import fastrows
from node.select.binlog import BinlogReader
from shared.model import BinlogPosition, DataSource
from shared.secrets import SecretRef

KINDS = {23: "insert", 24: "update", 25: "delete", 30: "insert", 31: "update", 32: "delete"}


@dataclass
class Event:
    data: bytes
    table: Any  # the library's Table
    checksum: bool
    rows: int
    kind: str  # "insert (prepare)", "insert", "update", "delete"


@contextmanager
def capturing(into: list[tuple[bytes, Any, bool]]) -> Iterator[None]:
    """Keep each rows event Select's reader turns into row changes: packet, map, checksum."""
    original = BinlogReader._rows

    def rows(self: BinlogReader, event: Any) -> Any:
        data = event.data if isinstance(event, fastrows.FastRows) else event.packet.packet._data
        stream = self._stream
        into.append((bytes(data), stream.table_map[decode.table_id(data)],
                     stream._BinLogStreamReader__use_checksum))
        return original(self, event)
    BinlogReader._rows = rows  # type: ignore[method-assign]
    try:
        yield
    finally:
        BinlogReader._rows = original  # type: ignore[method-assign]


def _position(peers: Peers) -> BinlogPosition:
    file, pos = peers.source.rows("SHOW MASTER STATUS")[0][:2]
    return BinlogPosition(str(file), int(pos))


def _read(source: DataSource, start: BinlogPosition, end: BinlogPosition,
          server_id: int) -> None:
    reader = BinlogReader(source, server_id, start, lambda schema, table: schema == DB,
                          lambda schema: schema == DB)
    reader.begin()
    try:
        while True:
            txn = reader.take(30.0)
            if txn is None:
                raise RuntimeError(f"the reader stopped before {end}")
            if (txn.end.file, txn.end.pos) >= (end.file, end.pos):
                return
    finally:
        reader.stop()


def capture(peers: Peers, charset: str, size: int, seconds: float, server_id: int
            ) -> list[Event]:
    """sysbench's prepare and run on tables of ``charset``, as rows events."""
    peers.source.execute(f"DROP DATABASE IF EXISTS {DB}")
    peers.source.execute(f"CREATE DATABASE {DB} CHARACTER SET {charset}")
    start = _position(peers)
    peers.sysbench("--tables=2", f"--table-size={size}", "prepare")
    prepared = _position(peers)
    peers.sysbench("--tables=2", f"--table-size={size}", f"--time={seconds:.0f}", "--rate=0",
                   "--threads=2", "run")
    end = _position(peers)
    server = peers.servers["source"]
    peers.box.trust_secret()
    source = DataSource("source", "127.0.0.1", server.port, "setl",
                        SecretRef(f"file:{peers.box.secret_file}"))
    raw: list[tuple[bytes, Any, bool]] = []
    with capturing(raw):
        _read(source, start, end, server_id)
    events = []
    for data, table, checksum in raw:
        kind = KINDS[data[5]]
        if kind == "insert" and decode.next_position(data) <= prepared.pos:
            kind = "insert (prepare)"
        rows = len(decode.decode_rows(decode.TableSchema.of(table), data, checksum))
        events.append(Event(data, table, checksum, rows, kind))
    return events


def _after(events: list[Event]) -> Callable[[], None]:
    schemas: dict[int, decode.TableSchema] = {}
    for event in events:  # one schema per table map, pickled as a worker receives it
        if id(event.table) not in schemas:
            schemas[id(event.table)] = pickle.loads(pickle.dumps(
                decode.TableSchema.of(event.table)))
    work = [(schemas[id(e.table)], e.data, e.checksum) for e in events]
    decode_rows = decode.decode_rows

    def run() -> None:  # rows made and dropped, as a worker streams them on
        for schema, data, checksum in work:
            decode_rows(schema, data, checksum)
    return run


def _before(events: list[Event]) -> Callable[[], None]:
    work = []
    for event in events:
        plan = fastrows.plan(event.table)
        if plan is None:
            raise RuntimeError(f"{event.table.schema}.{event.table.table} is not a table "
                               "node.select.fastrows reads")
        kind = fastrows._KINDS[event.data[5]]
        work.append((fastrows._CLASSES[kind], event.data, event.table, plan,
                     decode.event_timestamp(event.data), event.checksum,
                     event.data[5] in (30, 31, 32)))
    def run() -> None:
        for cls, data, table, plan, ts, checksum, v2 in work:
            cls(data, table, plan, ts, checksum, v2).images()
    return run


def _path(events: list[Event]) -> Callable[[], None]:
    """Select's whole fastrows path from a packet to its rows: the packet factory's rows
    branch (table map, post-header, header, the event object), then ``images()``."""
    table_map = {decode.table_id(e.data): e.table for e in events}
    work = [(e.data, e.data[5], fastrows._KINDS[e.data[5]], e.checksum) for e in events]
    rows, allowed = fastrows._rows, fastrows.EVENTS

    def run() -> None:
        for data, type_code, kind, checksum in work:
            rows(data, type_code, kind, table_map, checksum, allowed, None, None, None, None,
                 None).event.images()
    return run


def best_us_per_row(runs: dict[str, Callable[[], None]], rows: int, repeat: int
                    ) -> dict[str, float]:
    """CPU µs per row of each way's least disturbed of ``repeat`` runs, the ways taking
    turns (CPU time of this process: the machine may be busy with others)."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, run in runs.items():
            gc.collect()
            began = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - began)
    return {name: seconds / rows * 1e6 for name, seconds in best.items()}


def same(events: list[Event]) -> bool:
    """Whether both ways give the same rows for every event."""
    for event in events:
        plan = fastrows.plan(event.table)
        kind = fastrows._CLASSES[fastrows._KINDS[event.data[5]]]
        theirs = kind(event.data, event.table, plan, 0, event.checksum,
                      event.data[5] in (30, 31, 32)).images()
        if decode.decode_rows(decode.TableSchema.of(event.table), event.data,
                              event.checksum) != theirs:
            return False
    return True


def measure(events: list[Event], charset: str, repeat: int) -> list[dict[str, Any]]:
    """Per kind of event: µs per row before and after, after checking both give the same."""
    results = []
    for kind in ("insert (prepare)", "insert", "update", "delete", "all"):
        chosen = [e for e in events if kind in ("all", e.kind)]
        if not chosen:
            continue
        if not same(chosen):
            raise RuntimeError(f"{kind} ({charset}): the worker's decoder and Select's "
                               "reader disagree")
        rows = sum(e.rows for e in chosen)
        us = best_us_per_row({"images": _before(chosen), "path": _path(chosen),
                              "after": _after(chosen)}, rows, repeat)
        results.append({
            "scenario": f"decode {kind} events, sysbench tables in {charset}",
            "events": len(chosen), "rows": rows,
            "before_fastrows_images_cpu_us_per_row": round(us["images"], 2),
            "before_fastrows_path_cpu_us_per_row": round(us["path"], 2),
            "after_decode_rows_cpu_us_per_row": round(us["after"], 2),
            "speedup_vs_images": round(us["images"] / us["after"], 1),
            "speedup_vs_path": round(us["path"] / us["after"], 1)})
    return results


def run(peers: Peers, seconds: float, repeat: int, size: int) -> list[dict[str, Any]]:
    results = []
    for n, charset in enumerate(("utf8mb4", "latin1")):
        events = capture(peers, charset, size, seconds, 9400 + n)
        results += measure(events, charset, repeat)
    return results
