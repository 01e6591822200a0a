"""What Select's framing of the binlog costs alone, and what decoding rows costs alone.

    python -m bench.decode [--seconds 20] [--repeat 2] [--smoke]
    python -m bench.decode --worker [--seconds 10] [--repeat 5] [--smoke]

On a sandbox of its own, ``sysbench oltp_write_only`` writes ``--seconds`` of transactions
at full rate; then setl's BinlogReader (the node's Select, every sysbench table wanted: it
frames transactions and keeps rows events as bytes) reads that stretch ``--repeat`` times in
this process, nothing else running in it. Reports rows/s and CPU µs per row and per event
(the process's CPU time); results go to ``bench/results/decode-*.json``.

``--worker`` times the workers' row decoder (``node.extract.decode``) alone on the rows
events Select framed (:mod:`bench.workerdecode`); results go to
``bench/results/decode-worker-*.json``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from bench import workerdecode
from bench.measure import RESULTS, write_report
from bench.peers import DB, Peers
from node.extract.decode import decode_rows
from node.select.binlog import BinlogReader
from shared.model import BinlogPosition, DataSource
from shared.secrets import SecretRef


def _position(peers: Peers) -> BinlogPosition:
    file, pos = peers.source.rows("SHOW MASTER STATUS")[0][:2]
    return BinlogPosition(str(file), int(pos))


def read_once(source: DataSource, start: BinlogPosition, end: BinlogPosition,
              server_id: int) -> tuple[int, int, float, float]:
    """(rows, events, seconds, CPU seconds) of framing start..end (rows counted after)."""
    reader = BinlogReader(source, server_id, start, lambda schema, table: schema == DB,
                          lambda schema: schema == DB)
    kept: list[tuple[int, bytes]] = []
    wall, cpu = time.perf_counter(), time.process_time()
    reader.begin()
    try:
        while True:
            txn = reader.take(30.0)
            if txn is None:
                raise RuntimeError(f"the reader stopped before {end}")
            kept += txn.events
            if (txn.end.file, txn.end.pos) >= (end.file, end.pos):
                break
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        reader.stop()
    rows = sum(len(decode_rows(reader.layouts[number], data, reader.checksum))
               for number, data in kept)
    return rows, len(kept), wall, cpu


def run(work: Path, seconds: float, repeat: int) -> dict[str, Any]:
    peers = Peers(work)
    try:
        peers.source.execute(f"CREATE DATABASE IF NOT EXISTS {DB}")
        peers.sysbench("--tables=4", "--table-size=10000", "prepare")
        start = _position(peers)
        peers.sysbench("--tables=4", "--table-size=10000", f"--time={seconds:.0f}", "--rate=0",
                       "--threads=4", "run")
        end = _position(peers)
        server = peers.servers["source"]
        peers.box.trust_secret()
        source = DataSource("source", "127.0.0.1", server.port, "setl",
                            SecretRef(f"file:{peers.box.secret_file}"))
        runs = [read_once(source, start, end, 9300 + n) for n in range(repeat)]
    finally:
        peers.close()
    rows, events, wall, cpu = min(runs, key=lambda found: found[3])  # the least disturbed
    return {"scenario": f"frame {rows:,} rows ({events:,} rows events) of oltp_write_only "
                        f"({(end.pos - start.pos) / 1e6:.0f} MB of binlog)",
            "rows_per_s": round(rows / wall), "cpu_us_per_row": round(cpu / rows * 1e6, 2),
            "cpu_us_per_event": round(cpu / events * 1e6, 2),
            "runs_cpu_us_per_row": [round(c / r * 1e6, 2) for r, _, _, c in runs]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.decode", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, help="of sysbench (default 20; --worker 10)")
    parser.add_argument("--repeat", type=int, help="reads (default 2; --worker: 5 timings)")
    parser.add_argument("--worker", action="store_true",
                        help="time node.extract.decode alone on the rows events Select framed")
    parser.add_argument("--table-size", type=int, default=20000,
                        help="--worker: rows per sysbench table (multi-row insert events)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for the test suite")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--work", type=Path, default=Path(__file__).parent / ".work" / "decode")
    args = parser.parse_args(argv)
    if args.worker:
        args.seconds, args.repeat = args.seconds or 10, args.repeat or 5
        return _worker(args)
    args.seconds, args.repeat = args.seconds or 20, args.repeat or 2
    if args.smoke:
        args.seconds, args.repeat = 2, 1
    result = run(args.work, args.seconds, args.repeat)
    write_report(args.results, "decode", args.smoke, {**vars(args), "pid": os.getpid()},
                 [result], {"node_peak_rss_mb": 0, "per_batch_ms": {}})
    return 0


def _worker(args: argparse.Namespace) -> int:
    if args.smoke:
        args.seconds, args.repeat, args.table_size = 2, 1, 500
    peers = Peers(args.work)
    try:
        results = workerdecode.run(peers, args.seconds, args.repeat, args.table_size)
    finally:
        peers.close()
    write_report(args.results, "decode-worker", args.smoke,
                 {**vars(args), "pid": os.getpid()}, results,
                 {"node_peak_rss_mb": 0, "per_batch_ms": {}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
