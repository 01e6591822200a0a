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

import pyarrow as pa
import pytest

from shared import lakes
from tests.devcluster import (
    Cluster,
    Database,
    make_schema,
    wait_for,
)
from tests.integration.lakes import (
    SHAPES,
    TYPE_ROWS,
    TYPES,
    LakeWatcher,
    ended,
    finish,
    lake_channel,
    lake_sources,
    rows,
    started,
    streamed_with_kills,
    table,
)
from tests.integration.shapes import Shapes

pytestmark = pytest.mark.integration


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


def test_every_type_lands_as_documented(sandbox, tmp_path):
    """The source's types as node.target.delta.columns documents them, read back exactly;
    a column added on the source mid-stream joins the table; a zero date stops the
    pipeline with what to do instead of writing NULL."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, TYPES)
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-types")
    try:
        started(cluster, location, "ty", schema, [{"table": "types"}])
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
        started(cluster, location, "ld", schema, [{"table": "t"}], ddl_sync=True)
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


def test_without_ddl_sync_a_column_added_with_a_default_stops_a_mirror(sandbox, tmp_path):
    """ddl_sync off: the lake still adds a new column with its first row, so an ADD COLUMN
    with a DEFAULT would leave the rows it holds NULL where the source's read the default
    (no change in the binlog writes them): it stops, and a DROP COLUMN goes on unfollowed."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.t (id INT PRIMARY KEY, "
                                         "d INT)")
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-ddl-off")
    try:
        started(cluster, location, "lo", schema, [{"table": "t"}])
        source.execute(f"INSERT INTO `{schema}`.t VALUES (1, 1)")
        wait_for(lambda: rows(location, schema, "t", ["id"]) == Counter({(1,): 1}), 60,
                 "the first row in the lake")
        source.execute(f"ALTER TABLE `{schema}`.t DROP COLUMN d")
        source.execute(f"INSERT INTO `{schema}`.t VALUES (2)")
        wait_for(lambda: rows(location, schema, "t", ["id", "d"]) ==
                 Counter({(1, 1): 1, (2, None): 1}), 60, "the row after the DROP COLUMN")
        source.execute(f"ALTER ONLINE TABLE `{schema}`.t ADD COLUMN a INT NOT NULL DEFAULT 7")
        source.execute(f"INSERT INTO `{schema}`.t VALUES (3, 8)")
        wait_for(lambda: "column a is added with DEFAULT 7" in
                 cluster.pipeline_state("lo").last_error, 60, "the pipeline to stop")
        assert "setl snapshot lo --table" in cluster.pipeline_state("lo").last_error
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
        started(cluster, location, "lb", schema, [{"table": "items"}], batch_timeout_ms=20)
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
        # both kinds of row came (how many stayed cold is how long the writer had to run)
        assert names["cold"] > 50 and names["hot"] > 50
    finally:
        stop.set()
        writing.set()
        ended(cluster, source, target)
