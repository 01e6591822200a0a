"""The workers' row decoder alone, per row.

    python -m bench.decode --worker [--seconds 10] [--repeat 5] [--smoke]

On a sandbox of its own, for sysbench's tables in utf8mb4 and in latin1: ``prepare``
(multi-row inserts) then ``oltp_write_only`` at full rate for ``--seconds`` (single-row
inserts, updates and deletes). Select's BinlogReader frames that stretch once, keeping each
rows event's packet and its table's layout; then, in this process with nothing else
running, ``node.extract.decode.decode_rows`` decodes the packets ``--repeat`` times (layouts
pickled as a worker gets them; the best run counts). Reports CPU µs per row by kind of
event. (Before the worker's decoder, Select's fastest reader of the same events took 3.1 to
5.9 times as long: ``bench/results/decode-worker-20261125-021358.json``.)
"""

from __future__ import annotations

import gc
import pickle
import time
from dataclasses import dataclass
from typing import Any

from bench.peers import DB, Peers
from node.extract import decode
from node.select.binlog import BinlogReader
from shared.model import BinlogPosition, DataSource
from shared.secrets import SecretRef

KINDS = {23: "insert", 24: "update", 25: "delete", 30: "insert", 31: "update", 32: "delete"}


@dataclass
class Event:
    data: bytes
    layout: decode.TableSchema
    checksum: bool
    rows: int
    kind: str  # "insert (prepare)", "insert", "update", "delete"


def _position(peers: Peers) -> BinlogPosition:
    file, pos = peers.source.rows("SHOW MASTER STATUS")[0][:2]
    return BinlogPosition(str(file), int(pos))


def _framed(source: DataSource, start: BinlogPosition, end: BinlogPosition,
            server_id: int) -> list[tuple[bytes, decode.TableSchema, bool]]:
    reader = BinlogReader(source, server_id, start, lambda schema, table: schema == DB,
                          lambda schema: schema == DB)
    found = []
    reader.begin()
    try:
        while True:
            txn = reader.take(30.0)
            if txn is None:
                raise RuntimeError(f"the reader stopped before {end}")
            found += [(data, reader.layouts[number], reader.checksum)
                      for number, data in txn.events]
            if (txn.end.file, txn.end.pos) >= (end.file, end.pos):
                return found
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
    events = []
    for data, layout, checksum in _framed(source, start, end, server_id):
        kind = KINDS[data[5]]
        if kind == "insert" and decode.next_position(data) <= prepared.pos:
            kind = "insert (prepare)"
        rows = len(decode.decode_rows(layout, data, checksum))
        events.append(Event(data, pickle.loads(pickle.dumps(layout)), checksum, rows, kind))
    return events


def best_us_per_row(events: list[Event], rows: int, repeat: int) -> float:
    """CPU µs per row of the least disturbed of ``repeat`` runs (CPU time of this process:
    the machine may be busy with others); rows made and dropped, as a worker streams on."""
    work = [(e.layout, e.data, e.checksum) for e in events]
    decode_rows, best = decode.decode_rows, float("inf")
    for _ in range(repeat):
        gc.collect()
        began = time.process_time()
        for layout, data, checksum in work:
            decode_rows(layout, data, checksum)
        best = min(best, time.process_time() - began)
    return best / rows * 1e6


def measure(events: list[Event], charset: str, repeat: int) -> list[dict[str, Any]]:
    results = []
    for kind in ("insert (prepare)", "insert", "update", "delete", "all"):
        chosen = [e for e in events if kind in ("all", e.kind)]
        if not chosen:
            continue
        rows = sum(e.rows for e in chosen)
        results.append({
            "scenario": f"decode {kind} events, sysbench tables in {charset}",
            "events": len(chosen), "rows": rows,
            "decode_rows_cpu_us_per_row": round(best_us_per_row(chosen, rows, repeat), 2)})
    return results


def run(peers: Peers, seconds: float, repeat: int, size: int) -> list[dict[str, Any]]:
    results = []
    for n, charset in enumerate(("utf8mb4", "latin1")):
        events = capture(peers, charset, size, seconds, 9400 + n)
        results += measure(events, charset, repeat)
    return results
