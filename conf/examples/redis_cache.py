"""A Redis cache kept exactly in step with source tables through a setl subscription.

    python conf/examples/redis_cache.py demo-feed --redis redis://127.0.0.1:6379/0 \
        [--manager 127.0.0.1:7310] [--prefix cache:]

Each row of a table with a key is a hash ``{prefix}{schema}.{table}:{key values}`` holding
its columns (a delete removes it, an update that changes the key moves it); a keyless
table's rows are counted in one hash ``{prefix}{schema}.{table}:rows`` (field: the row as
JSON, value: how many such rows), so duplicate rows survive. Values are as
``setl subscribe -o json`` prints them, as text.

Exactly once: a batch's writes and the position of its last transaction
(``{prefix}position``) go in one MULTI/EXEC, and a transaction the stored position holds is
skipped. The position is the GTID state: for MariaDB the last sequence number of every
domain *and server* (``0-1-10,0-2-5``, as ``@@gtid_binlog_state``), which holds across a
switch of the source to a promoted replica; for MySQL each uuid's highest number
(``uuid:1-23``); without GTIDs, binlog file and position, which hold on one server only. So
a kill of this process at any point — before the EXEC (nothing written: the batch comes
again), after it and before the acknowledgement (it comes again and is skipped) — neither
loses nor repeats a change; so does a failover of the node serving the subscription.

A failover of the source that lost transactions the cache applied (its old primary sent
0-1-9 and 0-1-10, the promoted replica had only 0-1-8 and numbers its own 0-2-9, 0-2-10)
stops the cache with the reason instead of skipping the new primary's transactions: the
cache holds changes the source no longer has, and is rebuilt.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout

import redis

from manager.subscribecli import row
from manager.subscriber import Subscriber

State = dict[str, dict[str, int]]  # a GTID state: domain → server id → last sequence
# number (MariaDB); MySQL: uuid (uuid:tag) → {"": its highest number}


class Refused(Exception):
    """What stops the cache: a position it cannot read, or a source whose history is not
    the cache's."""


def gtids(text: str) -> State:
    """A GTID position: MariaDB's domain-server-sequence GTIDs or MySQL's GTID set
    (``uuid:23``, ``uuid:1-23:25-30``, ``uuid:tag:5``), comma-separated."""
    state: State = {}
    for part in (part.strip() for part in text.replace("\n", "").split(",")):
        if not part:
            continue
        if ":" in part:  # MySQL: uuid, then numbers and intervals, a tag before its own
            pieces = part.split(":")
            key = pieces[0].lower()
            if not _UUID.fullmatch(key) or len(pieces) < 2:
                raise Refused(_not_gtid(part))
            for piece in pieces[1:]:
                if _INTERVAL.fullmatch(piece):
                    highest = int(piece.rpartition("-")[2])
                    state.setdefault(key, {})[""] = max(state.get(key, {}).get("", 0), highest)
                elif _TAG.fullmatch(piece):
                    key = f"{pieces[0].lower()}:{piece.lower()}"
                else:
                    raise Refused(_not_gtid(part))
            continue
        numbers = part.split("-")
        if len(numbers) != 3 or not all(number.isdigit() for number in numbers):
            raise Refused(_not_gtid(part))
        servers = state.setdefault(numbers[0], {})
        servers[numbers[1]] = max(servers.get(numbers[1], 0), int(numbers[2]))
    return state


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_INTERVAL = re.compile(r"\d+(-\d+)?")
_TAG = re.compile(r"[a-z_][a-z0-9_]{0,31}", re.IGNORECASE)


def _not_gtid(part: str) -> str:
    return (f"{part!r} is not a GTID: MariaDB's domain-server-sequence (0-1-100) or MySQL's "
            "uuid:N (3e11fa47-71ca-11e1-9e33-c80aa9429562:1-23)")


def gtid_text(state: State) -> str:
    return ",".join(f"{key}:1-{seq}" if not server else f"{key}-{server}-{seq}"
                    for key, servers in sorted(state.items())
                    for server, seq in sorted(servers.items()))


def where(txn: Any) -> dict[str, Any]:
    """Where a transaction ends: its GTID state, or without GTIDs its binlog file's number
    and position."""
    if txn.position.gtid:
        return {"gtid": gtids(txn.position.gtid)}
    return {"file": int(txn.position.file.rpartition(".")[2] or 0), "pos": txn.position.pos}


def applied(txn: Any, done: dict[str, Any]) -> bool:
    """Whether the stored position holds the transaction already; raises :class:`Refused`
    when the transaction's source is not in the cache's history."""
    found = where(txn)
    if "file" in found:
        return (found["file"], found["pos"]) <= (done.get("file", 0), done.get("pos", 0))
    held: State = done.get("gtid", {})
    if all(seq <= held.get(key, {}).get(server, 0)
           for key, servers in found["gtid"].items() for server, seq in servers.items()):
        return True  # each server's transactions the cache has, up to this one's
    for key, servers in found["gtid"].items():  # a later state of one history: each domain
        for server, seq in servers.items():    # at or after the cache's, with its GTIDs
            mine = held.get(key, {})
            top = max(mine.values(), default=0)
            if seq < top or (seq == top and mine.get(server) != seq):
                last = ",".join(f"{key}-{s}-{q}" for s, q in mine.items() if q == top)
                raise Refused(
                    f"transaction {txn.id} comes from a source whose GTID state "
                    f"{txn.position.gtid} is at {key}-{server}-{seq} in domain {key}, not "
                    f"after the cache's {last}: the source switched to a server that never "
                    "had transactions the cache applied (a failover lost them; the new "
                    "primary numbers its own the same), so the cache holds changes the "
                    "source does not have. Rebuild the cache: delete its keys, load the "
                    "tables again and store the GTID state the load was taken at as its "
                    "position")
    return False


def moved(done: dict[str, Any], txn: Any) -> dict[str, Any]:
    found = where(txn)
    if "file" in found:
        return {**done, **found}
    state = {key: dict(servers) for key, servers in done.get("gtid", {}).items()}
    for key, servers in found["gtid"].items():
        for server, seq in servers.items():
            mine = state.setdefault(key, {})
            mine[server] = max(seq, mine.get(server, 0))
    return {**done, "gtid": state}


def load(stored: str | None) -> dict[str, Any]:
    """The position stored in Redis (JSON: ``{"gtid": "0-1-10,0-2-5"}`` or ``{"file": 3,
    "pos": 4}``)."""
    done = json.loads(stored) if stored else {}
    if any(key not in ("gtid", "file", "pos") for key in done):
        raise Refused(
            f"the cache's position {stored} is each GTID domain's sequence number without "
            "its server id (written by an earlier version of this example), which cannot tell "
            "a new primary's transactions from the ones applied: store the GTID state it "
            'stands for, e.g. {"gtid": "0-1-10"} (domain-server-sequence of the last '
            "transaction applied), or rebuild the cache")
    return {**done, "gtid": gtids(done["gtid"])} if "gtid" in done else done


def dump(done: dict[str, Any]) -> str:
    return json.dumps({**done, "gtid": gtid_text(done["gtid"])} if "gtid" in done else done)


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
    done = load(client.get(position_key))
    with Subscriber(channel, managers=managers) as feed:
        for batch in feed:
            pipe = client.pipeline(transaction=True)  # MULTI … EXEC
            for txn in batch.transactions:
                if applied(txn, done):
                    continue  # applied before (sent again after a restart)
                for change in txn.changes:
                    apply(pipe, prefix, change)
                done = moved(done, txn)
            pipe.set(position_key, dump(done))
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
    try:
        run(args.channel, redis.Redis.from_url(args.redis, decode_responses=True),
            args.prefix, args.manager)
    except Refused as exc:
        print(f"redis_cache: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
