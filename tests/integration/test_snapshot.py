"""Snapshots in the stream on real servers: a channel started with ``start: snapshot`` copies
every paired table chunk by chunk while writes go on, and ends equal to the source."""

from __future__ import annotations

import random
import threading

import pymysql

from shared.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for

ITEMS = "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(40), qty INT)"
PEOPLE = ("CREATE TABLE `{schema}`.people (country CHAR(2), code VARCHAR(20), born DATE, "
          "note VARCHAR(40), PRIMARY KEY (country, code))")
UNIQUE = "CREATE TABLE `{schema}`.tags (tag VARCHAR(30) NOT NULL, n INT, UNIQUE KEY (tag))"


def fill(db: Database, schema: str, rows: int) -> None:
    db.execute(f"INSERT INTO `{schema}`.items SELECT seq, CONCAT('item ', seq), seq % 100 "
               f"FROM seq_1_to_{rows}")
    db.execute(f"INSERT INTO `{schema}`.people SELECT ELT(1 + seq % 3, 'de', 'fr', 'us'), "
               f"CONCAT('c', seq), '2000-01-01' + INTERVAL seq DAY, 'x' FROM seq_1_to_{rows}")
    db.execute(f"INSERT INTO `{schema}`.tags SELECT CONCAT('tag', seq), seq FROM "
               f"seq_1_to_{rows // 10}")


def test_start_snapshot_copies_every_table_while_writes_race_it(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, ITEMS, PEOPLE, UNIQUE)
    source.execute(f"USE `{schema}`")
    fill(source, schema, 3000)
    stop = threading.Event()

    def write() -> None:
        writer = Database(cluster.sandbox, "source")
        rng = random.Random(7)
        try:
            while not stop.is_set():
                row_id = rng.randint(1, 3200)
                for statement in (
                        f"INSERT INTO `{schema}`.items VALUES ({row_id}, 'new', 1) "
                        "ON DUPLICATE KEY UPDATE qty = qty + 1, name = 'updated'",
                        f"DELETE FROM `{schema}`.items WHERE id = {rng.randint(1, 3200)}",
                        f"UPDATE `{schema}`.items SET id = {rng.randint(3201, 90000)} WHERE id "
                        f"= {rng.randint(1, 3200)}",  # a key moved, maybe into a chunk read
                        f"UPDATE `{schema}`.tags SET n = n + 1 WHERE tag = "
                        f"'tag{rng.randint(1, 300)}'"):
                    try:
                        writer.execute(statement)
                    except pymysql.IntegrityError:
                        pass  # a key moved onto one taken: the source refused it
                writes.append(1)
        finally:
            writer.close()

    writes: list[int] = []
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        cluster.apply([one_way("snap", schema, ["items", "people", "tags"], start="snapshot",
                               snapshot_chunk_size=500)])
        cluster.set_status("snap", "START")
        cluster.wait_running("snap")
        wait_for(lambda: target.rows(f"SELECT COUNT(*) FROM `{schema}`.people")[0][0] >= 3000,
                 120, "the people table copied")
    finally:
        stop.set()
        writer.join(30)
    assert len(writes) > 20  # the copy raced the writes
    wait_equal(source, target, schema, ["items", "people", "tags"], 120)
    def done() -> list[object] | None:
        copies = list(cluster.pipeline_state("snap").snapshots)
        return copies if len(copies) == 3 and all(c.state == "done" for c in copies) else None

    copies = wait_for(done, 60, "every copy done")
    assert sorted(c.table for c in copies) == [f"{schema}.{t}" for t in ("items", "people",
                                                                          "tags")]
    assert all(c.chunks_done == c.chunks for c in copies)
    chunked = {c.table: c.chunks for c in copies}
    assert chunked[f"{schema}.items"] >= 6  # 3,000 rows by 500
    assert chunked[f"{schema}.people"] >= 3  # split by its key's first column: 3 values
