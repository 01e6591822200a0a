"""A Redis cache kept exactly in step with source tables through a setl subscription.

    python conf/examples/redis_cache.py demo-feed --redis redis://127.0.0.1:6379/0 \
        [--manager 127.0.0.1:7310] [--prefix cache:]

Each row of a table with a key is a hash ``{prefix}{schema}.{table}:{key values}`` holding
its columns (a delete removes it, an update that changes the key moves it); a keyless
table's rows are counted in one hash ``{prefix}{schema}.{table}:rows`` (field: the row as
JSON, value: how many such rows), so duplicate rows survive. Values are as
``setl subscribe -o json`` prints them, as text.

Exactly once: a batch's writes and the position of its last transaction
(``{prefix}position``: its GTID position, each domain's sequence number — it holds across a
switch of the source to a promoted replica; without GTIDs, binlog file and position, which
hold on one server only) go in one MULTI/EXEC, and a transaction at or before the stored
position is skipped. So a kill of this process at any point — before the EXEC (nothing
written: the batch comes again), after it and before the acknowledgement (it comes again and
is skipped) — neither loses nor repeats a change; so does a failover of the node serving the
subscription.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout

import redis

from manager.subscribecli import row
from manager.subscriber import Subscriber


def where(txn: Any) -> dict[str, int]:
    """Where a transaction ends: each GTID domain's sequence number ("0-1-100,1-2-7"), or
    without GTIDs its binlog file's number and position."""
    if txn.position.gtid:
        return {domain: int(seq) for domain, _, seq in
                (part.strip().split("-") for part in txn.position.gtid.split(","))}
    return {"file": int(txn.position.file.rpartition(".")[2] or 0), "pos": txn.position.pos}


def applied(txn: Any, done: dict[str, int]) -> bool:
    """Whether the stored position holds the transaction already."""
    found = where(txn)
    if "file" in found:
        return (found["file"], found["pos"]) <= (done.get("file", 0), done.get("pos", 0))
    return all(seq <= done.get(domain, 0) for domain, seq in found.items())


def moved(done: dict[str, int], txn: Any) -> dict[str, int]:
    found = where(txn)
    if "file" in found:
        return {**done, **found}
    return {**done, **{d: max(seq, done.get(d, 0)) for d, seq in found.items()}}


def apply(pipe: Any, prefix: str, change: Any) -> None:
    table = f"{prefix}{change.schema}.{change.table}"
    before, after = row(change.before), row(change.after)
    if not change.keys:  # keyless: a multiset of rows
        if change.op in ("U", "D"):
            pipe.hincrby(f"{table}:rows", _image(before), -1)
        if change.op in ("I", "U"):
            pipe.hincrby(f"{table}:rows", _image(after), 1)
        return
    if change.op in ("U", "D"):
        pipe.delete(f"{table}:{_key(before, change.keys)}")
    if change.op in ("I", "U"):
        key = f"{table}:{_key(after, change.keys)}"
        pipe.delete(key)
        fields = {name: _text(value) for name, value in after.items() if value is not None}
        if fields:
            pipe.hset(key, mapping=fields)


def _key(image: dict[str, Any], keys: Any) -> str:
    return ":".join(_text(image[name]) for name in keys)


def _image(image: dict[str, Any]) -> str:
    return json.dumps(image, sort_keys=True, ensure_ascii=False)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def run(channel: str, client: Any, prefix: str = "cache:",
        managers: str | None = None) -> None:
    position_key = f"{prefix}position"
    stored = client.get(position_key)
    done: dict[str, int] = json.loads(stored) if stored else {}
    with Subscriber(channel, managers=managers) as feed:
        for batch in feed:
            pipe = client.pipeline(transaction=True)  # MULTI … EXEC
            for txn in batch.transactions:
                if applied(txn, done):
                    continue  # applied before (sent again after a restart)
                for change in txn.changes:
                    apply(pipe, prefix, change)
                done = moved(done, txn)
            pipe.set(position_key, json.dumps(done))
            pipe.execute()
            feed.ack(batch)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("channel", help="a subscription channel")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--manager", default=None, help="manager host:port (default: "
                        "$SETL_MANAGER or 127.0.0.1:7310)")
    parser.add_argument("--prefix", default="cache:", help="of every key this cache writes")
    args = parser.parse_args()
    run(args.channel, redis.Redis.from_url(args.redis, decode_responses=True), args.prefix,
        args.manager)
    return 0


if __name__ == "__main__":
    sys.exit(main())
