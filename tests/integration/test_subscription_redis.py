"""The subscription example (conf/examples/redis_cache.py) keeps a real Redis in step with
the source while the cache process is killed (kill -9) and the node serving the subscription
fails over: the keyless table's duplicates, the unique-key swaps and the balances end in
Redis exactly as on the source (each change applied once), and the balances in Redis sum
to the constant after the kills."""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from shared.sandbox import Sandbox
from tests.devcluster import ROOT, Cluster, Daemon, Database, serve, wait_for
from tests.integration.shapes import ACCOUNTS, OPENING, SLOTS, Shapes
from tests.integration.test_subscription import COLUMNS, feed_channel, sources

pytestmark = pytest.mark.integration
EXAMPLE = ROOT / "conf" / "examples" / "redis_cache.py"


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    server, port = serve(lambda port: Daemon(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path)], tmp_path / "redis.log"),
        lambda port: redis.Redis(port=port).ping(), "redis-server")
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.stop()


def cached(client: redis.Redis, schema: str) -> dict[str, Counter]:
    """What the cache holds of each table, as multisets of the test's columns."""
    found: dict[str, Counter] = {name: Counter() for name in COLUMNS}
    for key in client.scan_iter(f"cache:{schema}.*"):
        table, _, rest = key.removeprefix(f"cache:{schema}.").partition(":")
        columns = COLUMNS[table]
        if rest == "rows":  # a keyless table: row images counted
            for image, count in client.hgetall(key).items():
                if int(count):
                    values = json.loads(image)
                    found[table][tuple(values[c] for c in columns)] += int(count)
            continue
        values = client.hgetall(key)  # (the keyed tables' columns are integers)
        found[table][tuple(int(values[c]) for c in columns)] += 1
    return found


def expected(source: Database, schema: str) -> dict[str, Counter]:
    return {name: Counter(source.rows(f"SELECT {', '.join(columns)} FROM `{schema}`.{name}"))
            for name, columns in COLUMNS.items()}


def test_the_redis_example_stays_exact_through_kills(sandbox: Sandbox, tmp_path: Path,
                                                       source: Database, target: Database,
                                                       redis_url: str) -> None:
    cluster = Cluster(sandbox, tmp_path / "cluster", "redis")
    try:
        _stays_exact(cluster, source, target, redis_url, tmp_path)
    finally:
        cluster.stop()


def _stays_exact(cluster: Cluster, source: Database, target: Database, redis_url: str,
                 tmp_path: Path) -> None:
    rng = random.Random(3)
    cluster.start_manager()
    cluster.start_node(1)
    cluster.start_node(2)
    shapes = Shapes(cluster.sandbox, source, target, targets=(), kinds=3, seed=13)
    cluster.apply([feed_channel("cache", "feed-c", shapes.schema, list(COLUMNS),
                                nodes=[1, 2], batch_size=20)], sources(cluster, "feed-c"))
    cluster.set_status("cache", "START")
    cluster.wait_running("cache")
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    # the rows the workload starts from were written before the channel ran: seed them
    for i in range(ACCOUNTS):
        client.hset(f"cache:{shapes.schema}.accounts:{i}",
                    mapping={"id": i, "balance": OPENING, "version": 0})
    for i in range(1, SLOTS + 1):
        client.hset(f"cache:{shapes.schema}.sl:{i}", mapping={"id": i, "slot": i})

    def consumer(n: int) -> Daemon:
        return Daemon([sys.executable, str(EXAMPLE), "cache", "--redis", redis_url,
                       "--manager", cluster.manager_address], tmp_path / f"cache-{n}.log")

    cache = consumer(0)
    shapes.start()
    positions: list[Any] = []
    for kill in range(4):  # the cache killed three times, the serving node once
        shapes.wait_transactions(shapes.transactions + rng.randint(40, 120))
        wait_for(lambda: client.get("cache:position") not in positions, 60,
                 "the cache to go on")
        positions.append(client.get("cache:position"))
        if kill == 2:
            owner = cluster.pipeline_state("cache").owner_node
            cluster.nodes[owner].kill()
            wait_for(lambda o=owner: cluster.pipeline_state("cache").owner_node == 3 - o, 90,
                     "the other node to take the subscription over")
            cluster.start_node(owner)
        else:
            cache.kill()
            cache = consumer(kill + 1)
    shapes.stop()
    want = expected(source, shapes.schema)
    wait_for(lambda: cached(client, shapes.schema) == want, 120,
             "the cache equal to the source")
    cache.kill()
    balances = sum(row[1] * n for row, n in cached(client, shapes.schema)["accounts"].items())
    assert balances == ACCOUNTS * OPENING
    client.close()
