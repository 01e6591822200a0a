"""What the lake tests share: lake sources and channels, reading Delta tables back (on disk
or in S3) as multisets, a watcher of every version of the mirrored tables, and a workload
streamed through node kills (test_lake.py, test_lake_s3.py, test_lake_verify.py)."""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from tests.devcluster import (
    Cluster,
    Database,
    LaggingCursor,
    wait_for,
)
from tests.integration.shapes import ACCOUNTS, OPENING, SLOTS, Shapes


def lake_sources(cluster: Cluster, location: Path) -> list[dict[str, Any]]:
    servers = cluster.sandbox.servers()
    return [{"name": "source", "host": "127.0.0.1", "port": servers["source"].port,
             "user": "setl", "password": f"file:{cluster.sandbox.secret_file}"},
            {"name": "lake", "type": "delta", "location": str(location)}]


def lake_channel(name: str, schema: str, pairs: list[dict[str, Any]],
                 **params: Any) -> dict[str, Any]:
    return {"name": name, "pipelines": [{
        "name": "forward", "source": "source", "target": "lake",
        "pairs": [{"source": f"{schema}.{p['table']}", "target": f"{schema}.{p['table']}",
                   **{k: v for k, v in p.items() if k != "table"}} for p in pairs],
        **params}]}


def started(cluster: Cluster, location: Path, name: str, schema: str,
            pairs: list[dict[str, Any]], running: bool = True, **params: Any) -> None:
    """A manager and node 1 up, and a lake channel of ``pairs`` into ``location`` applied
    and started (running, unless ``running`` is False: a start that is refused)."""
    cluster.start_manager()
    cluster.start_node(1)
    cluster.apply([lake_channel(name, schema, pairs, **params)], lake_sources(cluster, location))
    cluster.set_status(name, "START")
    if running:
        cluster.wait_running(name)


class Store:
    """A lake in an object store (the moto S3 server of tests/integration/s3.py): its URL
    and the options that reach it."""

    def __init__(self, url: str, options: dict[str, str]) -> None:
        self.url, self.options = url, options

    def table(self, schema: str, name: str) -> DeltaTable | None:
        uri = f"{self.url}/{schema}/{name}"
        if not DeltaTable.is_deltatable(uri, storage_options=self.options):
            return None
        return DeltaTable(uri, storage_options=self.options)


def table(location: Path | Store, schema: str, name: str) -> DeltaTable | None:
    if isinstance(location, Store):
        return location.table(schema, name)
    path = location / schema / name
    return DeltaTable(str(path)) if (path / "_delta_log").exists() else None


def rows(location: Path | Store, schema: str, name: str, columns: list[str]) -> Counter:
    found = table(location, schema, name)
    if found is None:
        return Counter()
    data = found.to_pyarrow_table(columns=columns).to_pylist()
    return Counter(tuple(row[c] for c in columns) for row in data)


def replayed(location: Path | Store, schema: str, name: str, columns: list[str]) -> Counter:
    """A changelog table's changes applied in source order to an empty table (a multiset);
    a change found twice (same transaction, same place in it) fails."""
    found = table(location, schema, name)
    if found is None:
        return Counter()
    changes = found.to_pyarrow_table().to_pylist()
    places = Counter((c["_setl_txn"], c["_setl_seq"]) for c in changes)
    assert max(places.values(), default=1) == 1, "a change is in the changelog twice"

    def order(change: dict[str, Any]) -> tuple[int, int, int]:
        file, _, pos = change["_setl_position"].rpartition(":")
        return int(file.rpartition(".")[2]), int(pos), change["_setl_seq"]
    state: Counter = Counter()
    for change in sorted(changes, key=order):
        image = tuple(change[c] for c in columns)
        before = change["_setl_before"]
        if change["_setl_op"] in ("U", "D"):
            old = tuple(before[c] for c in columns)
            assert state[old] > 0, f"{change['_setl_op']} of a row the log never had: {old}"
            state[old] -= 1
        if change["_setl_op"] in ("I", "U"):
            state[image] += 1
    return +state


def ended(*parts: Any) -> None:
    """Each part of a test stopped (a workload, a watcher, a cluster) or closed (a
    connection), in this order."""
    for part in parts:
        (part.stop if hasattr(part, "stop") else part.close)()


class LakeWatcher:
    """Reads every new version of the mirrored tables: the balances' sum and the unique
    slots must hold in each (a reader of one table never sees part of a transaction), and
    no account's version may go back."""

    def __init__(self, location: Path | Store, schema: str) -> None:
        self.location, self.schema = location, schema
        self.violations: list[str] = []
        self.versions_read = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.done.set()
        if self.thread.ident is not None:
            self.thread.join(30)

    def _watch(self) -> None:
        seen = {"accounts": -1, "sl": -1}
        versions: dict[int, int] = {}
        while not self.done.wait(0.05):
            for name in seen:
                found = table(self.location, self.schema, name)
                if found is None or found.version() == seen[name]:
                    continue
                for version in range(seen[name] + 1, found.version() + 1):
                    found.load_as_version(version)
                    data = found.to_pyarrow_table().to_pylist()
                    self.versions_read += 1
                    if name == "accounts" and len(data) == ACCOUNTS:  # (copied whole)
                        total = sum(row["balance"] for row in data)
                        if total != ACCOUNTS * OPENING:
                            self.violations.append(f"accounts v{version}: sum {total}")
                        for row in data:
                            if row["version"] < versions.get(row["id"], 0):
                                self.violations.append(f"accounts v{version}: {row['id']} "
                                                       "went back")
                            versions[row["id"]] = row["version"]
                    if name == "sl" and len(data) == SLOTS and \
                            sorted(row["slot"] for row in data) != list(range(1, SLOTS + 1)):
                        self.violations.append(f"sl v{version}: slots {data}")
                seen[name] = found.version()


SHAPES = [{"table": "kl", "mode": "changelog"}, {"table": "sl"}, {"table": "accounts"}]


def finish(shapes: Shapes, source: Database, location: Path | Store, watcher: LakeWatcher,
           versions: int) -> None:
    """Stop writing; wait for the mirrors to equal the source and the change log of ``kl``
    to replay to its rows (multisets); the watcher saw every promise kept, over more than
    ``versions`` versions of the mirrors (the writes go on until it has read them: a slow
    machine makes fewer, larger commits)."""
    wait_for(lambda: watcher.versions_read > versions, 120,
             f"the watcher to read more than {versions} versions of the lake")
    shapes.stop()
    for name, columns in (("sl", ["id", "slot"]), ("accounts", ["id", "balance", "version"])):
        expected = Counter(source.rows(f"SELECT {', '.join(columns)} FROM "
                                       f"`{shapes.schema}`.{name}"))
        wait_for(lambda n=name, c=columns, e=expected: rows(
            location, shapes.schema, n, c) == e, 120, f"lake {name} equal to the source")
    expected = Counter(source.rows(f"SELECT a, b FROM `{shapes.schema}`.kl"))
    wait_for(lambda: replayed(location, shapes.schema, "kl", ["a", "b"]) == expected, 120,
             "the changelog of kl replayed equal to the source")
    watcher.stop()
    assert watcher.violations == []


def streamed_with_kills(cluster: Cluster, shapes: Shapes, source: Database,
                        channel: dict[str, Any], sources: list[dict[str, Any]],
                        watcher: LakeWatcher, zk_client: Any, restarts: int,
                        rng: random.Random, versions: int) -> None:
    """The workload streamed into a lake by ``channel`` while node 1 is killed ``restarts``
    times, a random number of transactions apart, the second restart behind its tables (the
    cursor put back to where the first left it): the lake ends equal to the source, the
    watcher saw every promise kept, nothing paused, and the restart behind skipped what the
    tables held."""
    name = channel["name"]
    pipeline = f"{name}.forward"
    cluster.start_manager()
    cluster.start_node(1)
    cluster.apply([channel], sources)
    cluster.set_status(name, "START")
    cluster.wait_running(name)
    shapes.start()
    watcher.start()
    lagging = LaggingCursor(zk_client, cluster.root, pipeline)
    node = cluster.nodes[1]
    for restart in range(restarts):
        wait_for(lambda n=node, r=restart: n.output().count(
            f"event=pipeline_started pipeline={pipeline} ") > r, 90,
            f"the pipeline to run again (restart {restart})")
        shapes.wait_transactions(shapes.transactions + rng.randint(30, 120))
        if restart == 1:  # (on a slow machine the run may not have loaded anything yet)
            wait_for(lagging.moved, 90, "the pipeline to load past the first kill's cursor")
        node.kill()
        if restart == 0:
            lagging.save()
        elif restart == 1:  # the restart re-reads what every table holds: skipped
            lagging.put_back()
        node = cluster.start_node(1)
    shapes.wait_transactions(shapes.transactions + 60)
    finish(shapes, source, watcher.location, watcher, versions)
    log = node.output()
    assert "event=pipeline_paused" not in log and "event=pipeline_failed" not in log
    assert f"event=pipeline_resumes pipeline={pipeline}" in log, log[-3000:]


# a table of every type as it lands in a lake (test_lake.py, test_lake_verify.py)
TYPES = ("CREATE TABLE `{schema}`.types (id INT PRIMARY KEY, d65 DECIMAL(65,30), "
         "d10 DECIMAL(10,2), ub BIGINT UNSIGNED, ti TINYINT UNSIGNED, t TIME(3), f FLOAT, "
         "db DOUBLE, bits BIT(10), j JSON, e ENUM('a','b'), s SET('x','y','z'), "
         "g GEOMETRY, bin VARBINARY(8), lat VARCHAR(10) CHARACTER SET latin1, "
         "dt DATETIME(6), ts TIMESTAMP(3) NULL, dd DATE, y YEAR)")
TYPE_ROWS = ("(1, '-12345678901234567890123456789012345.123456789012345678901234567891', "
             "12.50, 18446744073709551615, 255, '-838:59:58.5', 1.5, 2.25, b'1010101010', "
             "'{\"k\": [1, 2]}', 'b', 'x,z', ST_GeomFromText('POINT(1 2)'), x'00ff10', "
             "'caf\u00e9', '2024-02-29 23:59:59.123456', '2030-01-01 00:00:00.5', '1000-01-01', "
             "2155), (2, NULL, NULL, 0, 0, '00:00:00', NULL, NULL, b'0', NULL, NULL, '', NULL, "
             "NULL, NULL, NULL, NULL, NULL, NULL)")
