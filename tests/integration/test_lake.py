"""A Delta Lake target on real servers: rows land in Delta tables on disk, read back with
``deltalake``. The workload carries a keyless table with duplicate rows (changelog: every
change), a unique-key swap and transfers under a sum invariant (mirrored); a watcher reads
every version of the mirrored tables while the node is killed."""

from __future__ import annotations

import datetime
import decimal
import random
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from shared import lakes
from tests.devcluster import (
    Cluster,
    Database,
    LaggingCursor,
    make_schema,
    wait_for,
)
from tests.integration.shapes import ACCOUNTS, OPENING, SLOTS, Shapes

pytestmark = pytest.mark.integration


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
    to replay to its rows (multisets); the watcher saw every promise kept."""
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
    assert watcher.versions_read > versions, "the watcher hardly read the lake"


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


def test_kill_9_while_streaming_into_a_lake_loses_and_repeats_nothing(sandbox, tmp_path,
                                                                     zk_client):
    """The node killed 3 times at random points of a stream into Delta tables (while
    writing files, between a table's commit and the next table's, before the cursor moved):
    the changelog holds every change once, the mirrors equal the source, and no version of
    a mirrored table shows part of a transaction."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    file, pos = source.rows("SHOW MASTER STATUS")[0][:2]  # before the tables' first rows
    shapes = Shapes(sandbox, source, target, targets=(), kinds=3, seed=5)
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-kills", spark_start="boot")
    watcher = LakeWatcher(location, shapes.schema)
    try:
        streamed_with_kills(cluster, shapes, source, lake_channel(
            "lk", shapes.schema, SHAPES, batch_timeout_ms=20, start={"file": file, "pos": pos}),
                            lake_sources(cluster, location), watcher, zk_client, 3,
                            random.Random(8), versions=20)
    finally:
        ended(shapes, watcher, cluster, source, target)


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


def test_every_type_lands_as_documented(sandbox, tmp_path):
    """The source's types as node.target.delta.columns documents them, read back exactly;
    a column added on the source mid-stream joins the table; a zero date stops the
    pipeline with what to do instead of writing NULL."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, TYPES)
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-types")
    try:
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([lake_channel("ty", schema, [{"table": "types"}])],
                      lake_sources(cluster, location))
        cluster.set_status("ty", "START")
        cluster.wait_running("ty")
        source.execute(f"INSERT INTO `{schema}`.types VALUES {TYPE_ROWS}")
        wait_for(lambda: len(rows(location, schema, "types", ["id"])) == 2, 60, "two rows")
        got = {row["id"]: row for row in table(location, schema, "types")
               .to_pyarrow_table().to_pylist()}
        geometry = source.rows(f"SELECT g FROM `{schema}`.types WHERE id = 1")[0][0]
        assert got[1] == {
            "id": 1, "d65": "-12345678901234567890123456789012345.12345678901234567890"
            "1234567891", "d10": decimal.Decimal("12.50"),
            "ub": decimal.Decimal(18446744073709551615), "ti": 255, "t": "-838:59:58.500",
            "f": 1.5, "db": 2.25, "bits": 0b1010101010, "j": '{"k": [1, 2]}', "e": "b",
            "s": "x,z", "g": geometry, "bin": b"\x00\xff\x10", "lat": "caf\u00e9",
            "dt": datetime.datetime(2024, 2, 29, 23, 59, 59, 123456),
            "ts": datetime.datetime(2030, 1, 1, 0, 0, 0, 500000, tzinfo=datetime.UTC),
            "dd": datetime.date(1000, 1, 1), "y": 2155}
        assert got[2]["t"] == "00:00:00.000" and got[2]["s"] == "" and got[2]["ub"] == 0
        types = pa.schema(table(location, schema, "types").schema().to_arrow())
        assert (types.field("ti").type, types.field("ub").type, types.field("dt").type,
                types.field("ts").type, types.field("d65").type) == (
            pa.int16(), pa.decimal128(20, 0), pa.timestamp("us"),
            pa.timestamp("us", tz="UTC"), pa.string())
        # ADD COLUMN while streaming: later rows carry it, earlier ones read NULL
        source.execute(f"ALTER TABLE `{schema}`.types ADD COLUMN extra VARCHAR(5)")
        source.execute(f"INSERT INTO `{schema}`.types (id, extra) VALUES (3, 'new')")
        wait_for(lambda: rows(location, schema, "types", ["id"]).get((3,)) == 1, 60, "row 3")
        got = {row["id"]: row for row in table(location, schema, "types")
               .to_pyarrow_table().to_pylist()}
        assert got[3]["extra"] == "new" and got[1]["extra"] is None
        # a zero date: the pipeline stops, saying which column and what to do
        source.execute("SET SESSION sql_mode = ''")
        source.execute(f"INSERT INTO `{schema}`.types (id, dd) VALUES (4, '0000-00-00')")
        wait_for(lambda: "zero or partial date" in cluster.pipeline_state("ty").last_error,
                 90, "the pipeline to stop on the zero date")
        assert rows(location, schema, "types", ["id"]).get((4,)) is None
    finally:
        ended(cluster, source, target)


def test_copies_into_a_lake_while_writes_race_them(sandbox, tmp_path):
    """``setl snapshot`` copies tables into the lake (small chunks, so many watermark
    windows) while the workload writes them and the keyless table streams: the mirrors end
    equal to the source, the changelog replays to the source's rows, no version shows part
    of a transaction once a table is whole, and no row goes back."""
    from manager import cli

    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    shapes = Shapes(sandbox, source, target, targets=(), kinds=3, seed=9)
    file, pos = source.rows("SHOW MASTER STATUS")[0][:2]  # sl and accounts hold rows before
    source.execute(f"INSERT INTO `{shapes.schema}`.kl VALUES " +
                   ", ".join(f"({i % 5}, 'old')" for i in range(300)))
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-snapshot")
    watcher = LakeWatcher(location, shapes.schema)
    try:
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([lake_channel("ls", shapes.schema, SHAPES, batch_timeout_ms=20,
                                    start={"file": file, "pos": pos},
                                    snapshot_chunk_size=4)], lake_sources(cluster, location))
        cluster.set_status("ls", "START")
        cluster.wait_running("ls")
        watcher.start()
        shapes.start()
        shapes.wait_transactions(30)
        manager = ["--manager", cluster.manager_address]
        for name in ("accounts", "sl"):
            assert cli.main([*manager, "snapshot", "ls", "--table",
                             f"{shapes.schema}.{name}"]) == 0
        assert cli.main([*manager, "snapshot", "status", "ls", "--wait"]) == 0
        shapes.wait_transactions(shapes.transactions + 100)
        finish(shapes, source, location, watcher, versions=5)
    finally:
        ended(shapes, watcher, cluster, source, target)


def test_a_cascading_foreign_key_into_a_lake_is_refused_with_the_reason(sandbox, tmp_path):
    """Rows an ON DELETE CASCADE removes are not in the binlog and a lake cannot redo the
    cascade: a pipeline replicating both ends of one stops at start and says so."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.parent (id INT PRIMARY KEY)",
                         "CREATE TABLE `{schema}`.child (id INT PRIMARY KEY, pid INT, FOREIGN "
                         "KEY fk_parent (pid) REFERENCES `{schema}`.parent (id) "
                         "ON DELETE CASCADE)")
    cluster = Cluster(sandbox, tmp_path, "lake-cascade")
    try:
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([lake_channel("lc", schema, [{"table": "parent"}, {"table": "child"}])],
                      lake_sources(cluster, tmp_path / "lake"))
        cluster.set_status("lc", "START")
        wait_for(lambda: "has foreign key fk_parent" in cluster.pipeline_state("lc").last_error,
                 60, "the pipeline to refuse the cascade")
        assert "ON DELETE CASCADE" in cluster.pipeline_state("lc").last_error
        assert not (tmp_path / "lake").exists()
    finally:
        ended(cluster, source, target)


def test_with_ddl_sync_a_lake_takes_added_columns_and_stops_on_the_rest(sandbox, tmp_path):
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.t (id INT PRIMARY KEY)")
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-ddl")
    try:
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([lake_channel("ld", schema, [{"table": "t"}], ddl_sync=True)],
                      lake_sources(cluster, location))
        cluster.set_status("ld", "START")
        cluster.wait_running("ld")
        source.execute(f"INSERT INTO `{schema}`.t VALUES (1)")
        source.execute(f"ALTER TABLE `{schema}`.t ADD COLUMN a VARCHAR(5), ADD INDEX ia (a)")
        source.execute(f"INSERT INTO `{schema}`.t VALUES (2, 'two')")
        wait_for(lambda: rows(location, schema, "t", ["id", "a"]) ==
                 Counter({(1, None): 1, (2, "two"): 1}), 60, "the added column in the lake")
        source.execute(f"ALTER TABLE `{schema}`.t DROP COLUMN a")
        source.execute(f"INSERT INTO `{schema}`.t VALUES (3)")
        wait_for(lambda: "takes new tables and ADD COLUMN only" in
                 cluster.pipeline_state("ld").last_error, 60, "the pipeline to stop")
        assert "setl position set" in cluster.pipeline_state("ld").last_error
        assert rows(location, schema, "t", ["id"]).get((3,)) is None
    finally:
        ended(cluster, source, target)


def test_the_owner_killed_the_other_node_takes_over_the_lake(sandbox, tmp_path):
    """Two nodes; the one running the pipeline killed mid-stream: the other fences every
    table with its epoch and goes on where each table stands; nothing lost or repeated,
    and the watcher saw no table version with part of a transaction."""
    from tests.integration.test_failover import owner

    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
    shapes = Shapes(sandbox, source, target, targets=(), kinds=3, seed=31)
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-failover")
    watcher = LakeWatcher(location, shapes.schema)
    try:
        cluster.start_manager()
        cluster.start_node(1)
        cluster.start_node(2)
        cluster.apply([lake_channel("lf", shapes.schema, SHAPES, batch_timeout_ms=20,
                                    start={"file": file, "pos": pos})],
                      lake_sources(cluster, location))
        cluster.set_status("lf", "START")
        first = owner(cluster, "lf")
        shapes.start()
        watcher.start()
        shapes.wait_transactions(200)
        cluster.nodes[first].kill()
        second = wait_for(lambda: owner(cluster, "lf") != first and owner(cluster, "lf"), 120,
                          "the other node to take over")
        shapes.wait_transactions(shapes.transactions + 200)
        finish(shapes, source, location, watcher, versions=10)
        log = cluster.nodes[second].output()
        assert "event=pipeline_failed" not in log
        assert "event=target_claimed pipeline=lf.forward target=lake:" in log
        stamps = [lakes.last_stamp(table(location, shapes.schema, name), "lf.forward")
                  for name in ("kl", "sl", "accounts")]
        claimed = int(re.search(r"event=pipeline_assigned pipeline=lf\.forward node=\d+ "
                                r"version=\d+ epoch=(\d+)", log).group(1))
        assert {stamp.epoch for stamp in stamps if stamp} == {claimed}  # every table fenced
    finally:
        ended(shapes, watcher, cluster, source, target)


def test_a_backfill_into_a_lake_racing_writes_never_takes_a_row_back(sandbox, tmp_path):
    """Rows only the free door can bring (written without the binlog), requested while a
    writer updates and deletes them: the lake ends equal to the source, and no version of
    the table shows a row older than one an earlier version showed, or a deleted row back."""
    from tests.integration.test_freedoor import door, without_binlog

    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, "
                         "name VARCHAR(20), version INT NOT NULL)")
    count, t = 4000, f"`{schema}`.items"
    without_binlog(source, f"INSERT INTO {t} SELECT seq, 'cold', 0 FROM "
                           f"`{schema}`.seq_1_to_{count}")
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-door")
    stop, writing = threading.Event(), threading.Event()  # set: stop watching, writing
    violations: list[str] = []
    versions_read = [0]

    def watch() -> None:  # every version of the lake table, in order
        seen, gone, read = -1, set(), {}
        while not stop.wait(0.05):
            found = table(location, schema, "items")
            if found is None:
                continue
            for version in range(seen + 1, found.version() + 1):
                found.load_as_version(version)
                now = {row["id"]: row["version"] for row in
                       found.to_pyarrow_table(columns=["id", "version"]).to_pylist()}
                versions_read[0] += 1
                for key, value in now.items():
                    if key in gone or value < read.get(key, value):
                        violations.append(f"v{version}: row {key} went back "
                                          f"({read.get(key)} → {value}, gone: {key in gone})")
                gone |= set(read) - set(now)
                read = now
            seen = found.version()

    def churn() -> None:  # updates move a row's version up; a deleted row never returns
        writer, rng = Database(sandbox, "source"), random.Random(12)
        try:
            while not writing.wait(0.003):
                key = rng.randint(1, count)
                writer.execute(f"DELETE FROM {t} WHERE id = {key}" if rng.random() < 0.2 else
                               f"UPDATE {t} SET version = version + 1, name = 'hot' "
                               f"WHERE id = {key}")
        finally:
            writer.close()

    threads = [threading.Thread(target=watch, daemon=True),
               threading.Thread(target=churn, daemon=True)]
    try:
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([lake_channel("lb", schema, [{"table": "items"}], batch_timeout_ms=20)],
                      lake_sources(cluster, location))
        cluster.set_status("lb", "START")
        cluster.wait_running("lb")
        for thread in threads:
            thread.start()
        source.execute(f"INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA) SELECT "
                       f"'{schema}.items', 'I', CONCAT('[', id, ']') FROM {t}")
        wait_for(lambda: door(cluster, "lb").requested >= count, 180, "the backfill")
        # the writer goes on until the watcher has read the race in many versions
        wait_for(lambda: versions_read[0] >= 20, 120, "20 versions of the lake table")
        writing.set()
        threads[1].join(30)
        expected = Counter(source.rows(f"SELECT id, name, version FROM {t}"))
        wait_for(lambda: rows(location, schema, "items", ["id", "name", "version"]) ==
                 expected, 120, "the lake equal to the source")
        stop.set()
        threads[0].join(30)
        assert violations == [], violations[:5]
        names = Counter(name for _, name, _ in expected)
        assert names["cold"] > count // 10 and names["hot"] > 50  # both kinds of row came
    finally:
        stop.set()
        writing.set()
        ended(cluster, source, target)
