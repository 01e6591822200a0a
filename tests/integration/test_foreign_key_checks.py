"""A source session's ``foreign_key_checks = 0`` on real servers, and rows a window reads.

Each rows event says whether its session checked foreign keys (``NO_FOREIGN_KEY_CHECKS_F``);
Load writes the runs of tables with foreign keys under the same setting (a native replica
does), and rows read for a snapshot with checks off (the source's state: they must not
cascade, and a child may come before its parent). The rest keeps checks on: the target's
keys redo the cascades the binlog does not carry (the Shapes workload beside proves it).
"""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside

PARENT = "CREATE TABLE `{schema}`.parent (id INT PRIMARY KEY, note VARCHAR(20))"
CHILD = ("CREATE TABLE `{schema}`.child (id INT PRIMARY KEY, p INT NOT NULL, n INT NOT NULL "
         "DEFAULT 0, FOREIGN KEY (p) REFERENCES `{schema}`.parent (id) ON DELETE CASCADE)")
MARKER = "CREATE TABLE `{schema}`.marker (id INT PRIMARY KEY)"


def _running(cluster: Cluster, name: str) -> None:
    state = cluster.pipeline_state(name)
    assert cluster.channel_status(name) == "START" and state.state == "running" and \
        not state.last_error, state.last_error


def test_a_delete_with_checks_off_keeps_the_children(cluster: Cluster, source: Database,
                                                     target: Database) -> None:
    """``SET foreign_key_checks = 0; DELETE parent``: the source keeps the children (orphans),
    and so does the target; a delete with checks on still cascades on both."""
    schema = make_schema(source, target, PARENT, CHILD, MARKER)
    shapes = Shapes(cluster.sandbox, source, target, seed=61)
    cluster.apply([beside(one_way("fkoff", schema, ["parent", "child", "marker"]),
                          shapes.schema)])
    cluster.set_status("fkoff", "START")
    cluster.wait_running("fkoff")
    shapes.start()
    try:
        source.script(f"INSERT INTO `{schema}`.parent VALUES (1, 'a'), (2, 'b'), (3, 'c')",
                      f"INSERT INTO `{schema}`.child (id, p) VALUES (10, 1), (11, 1), (20, 2), "
                      "(30, 3)")
        wait_for(lambda: len(target.table(schema, "child")) == 4, 60, "the first rows")
        source.script("SET SESSION foreign_key_checks = 0",
                      f"DELETE FROM `{schema}`.parent WHERE id = 1",
                      f"INSERT INTO `{schema}`.child (id, p) VALUES (40, 4)",  # no parent
                      "SET SESSION foreign_key_checks = 1",
                      f"DELETE FROM `{schema}`.parent WHERE id = 2",  # cascades, both sides
                      f"INSERT INTO `{schema}`.marker VALUES (1)")
        wait_for(lambda: target.table(schema, "marker") == [(1,)], 60, "the marker")
        assert Counter(source.table(schema, "child")) == Counter(
            [(10, 1, 0), (11, 1, 0), (30, 3, 0), (40, 4, 0)])
        for table in ("parent", "child"):
            assert Counter(target.table(schema, table)) == Counter(source.table(schema, table))
        _running(cluster, "fkoff")
        shapes.keep_on()
        shapes.finish(source)
    finally:
        shapes.stop()
    _running(cluster, "fkoff")


def test_a_dump_loaded_children_first_with_checks_off_is_loaded(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A dump's reload order (children before their parents, checks off, in one transaction
    and in several) loads without a pause; the batch after it checks again."""
    schema = make_schema(source, target, PARENT, CHILD, MARKER)
    cluster.apply([one_way("fkdump", schema, ["parent", "child", "marker"], max_retries=1)])
    cluster.set_status("fkdump", "START")
    cluster.wait_running("fkdump")
    source.script("SET SESSION foreign_key_checks = 0", "BEGIN",
                  f"INSERT INTO `{schema}`.child (id, p) VALUES (10, 1), (20, 2)",
                  f"INSERT INTO `{schema}`.parent VALUES (1, 'a'), (2, 'b')",
                  "COMMIT",
                  f"INSERT INTO `{schema}`.child (id, p) VALUES (30, 3)",
                  f"INSERT INTO `{schema}`.parent VALUES (3, 'c')",
                  "SET SESSION foreign_key_checks = 1",
                  f"DELETE FROM `{schema}`.parent WHERE id = 1",
                  f"INSERT INTO `{schema}`.marker VALUES (1)")
    wait_for(lambda: target.table(schema, "marker") == [(1,)] or
             cluster.channel_status("fkdump") == "PAUSE", 60, "the marker, or a pause")
    _running(cluster, "fkdump")
    assert target.table(schema, "parent") == [(2, "b"), (3, "c")]
    assert target.table(schema, "child") == [(20, 2, 0), (30, 3, 0)]
    assert target.table(schema, "child") == source.table(schema, "child")


@pytest.mark.parametrize("first", ["child", "parent"])
def test_a_snapshot_of_tables_with_foreign_keys_while_writes_race_it(
        cluster: Cluster, source: Database, target: Database, first: str) -> None:
    """``start: snapshot`` of a child and its parent (``first`` copied first, in chunks)
    while a writer adds parents with children and deletes parents (cascades, checks on),
    updates and deletes children whose parents may not be copied yet. Rows read in a window
    go in with checks off (a child before its parent), and so does an upsert that changes no
    referenced column (a check could only refuse it). Parents copied first, the writer then
    deletes old parents whose children the child's windows read: the rows read go at the
    window's start, so the target's cascade inside the window takes them as the source's
    did (at its end, they would stay)."""
    schema, name = make_schema(source, target, PARENT, CHILD), f"fksnap-{first}"
    source.execute(f"USE `{schema}`")  # (the seq_ tables of the Sequence engine)
    source.execute(f"INSERT INTO `{schema}`.parent SELECT seq, CONCAT('p', seq) FROM "
                   "seq_1_to_400")
    source.execute(f"INSERT INTO `{schema}`.child (id, p) SELECT seq, 1 + seq % 400 FROM "
                   "seq_1_to_3000")
    done, parents_copied, errors, cascaded = threading.Event(), threading.Event(), [], []
    old = list(range(1, 401))

    def write() -> None:
        db, rng, born, n = Database(cluster.sandbox, "source"), random.Random(7), [], 10_000
        try:
            while not done.is_set():
                kind = rng.randrange(4)
                if kind == 0 or not born:  # a new parent and its children
                    n += 1
                    born.append(n)
                    db.script("BEGIN", f"INSERT INTO `{schema}`.parent VALUES ({n}, 'new')",
                              f"INSERT INTO `{schema}`.child (id, p) VALUES ({n}, {n}), "
                              f"({n + 100_000}, {n})", "COMMIT")
                elif kind == 1:  # a parent goes, its children by cascade: a new one (on the
                    # target with them), or an old one once the parents are copied
                    family = old if parents_copied.is_set() and old and rng.random() < 0.7 \
                        else born
                    db.execute(f"DELETE FROM `{schema}`.parent WHERE id = "
                               f"{family.pop(rng.randrange(len(family)))}")
                    cascaded.append(1)
                elif kind == 2:  # a child whose parent may not be copied yet
                    db.execute(f"UPDATE `{schema}`.child SET n = n + 1 WHERE id = "
                               f"{rng.randrange(1, 3000)}")
                else:
                    db.execute(f"DELETE FROM `{schema}`.child WHERE id = "
                               f"{rng.randrange(1, 3000)}")
        except Exception as exc:  # reported by the test
            errors.append(exc)
        finally:
            db.close()

    def copied() -> bool:
        if cluster.channel_status(name) == "PAUSE":
            return True
        copies = cluster.pipeline_state(name).snapshots
        if first == "parent" and any(copy.table == f"{schema}.parent" and
                                     copy.state == "done" for copy in copies):
            parents_copied.set()
        return len(copies) == 2 and all(copy.state == "done" for copy in copies)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        cluster.apply([one_way(name, schema, [first, ({"child", "parent"} - {first}).pop()],
                               start="snapshot", snapshot_chunk_size=100, max_retries=1)])
        cluster.set_status(name, "START")
        wait_for(copied, 240, "the snapshot done, or a pause")
        _running(cluster, name)
        deleted = len(cascaded)
        wait_for(lambda: len(cascaded) >= deleted + 10, 60, "parents deleted after the copy")
        source.execute(f"INSERT INTO `{schema}`.parent VALUES (999999, 'marker')")
        wait_for(lambda: (999999, "marker") in target.table(schema, "parent"), 60,
                 "a later row")
    finally:
        done.set()
        writer.join(30)
    assert not errors, errors
    wait_equal(source, target, schema, ["parent", "child"], 120)
    _running(cluster, name)
