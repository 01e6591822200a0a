"""A parent deleted (or its key changed) on the source before a snapshot copied it, while the
target holds its children already: Load writes the ON DELETE / ON UPDATE action itself
(node.target.mysql.cascades), so the target ends equal to the source.

`setl snapshot` copies the children's tables first; once they are done, a writer deletes
(or renumbers) parents from the highest id down, and the parent's copy, asked for then, goes
up from the lowest: every parent the writer reaches first is one the target does not hold
yet, with its children there (and sometimes a child the stream wrote just before). The
target's own foreign key finds no parent to cascade from; without Load's own action the
children stay (each case fails so).
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from manager import cli
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside

PARENTS = 3000
DDL = {
    # ON DELETE CASCADE, and grandchildren that follow through the target's own key
    "cascade": (
        "CREATE TABLE `{schema}`.parent (id INT PRIMARY KEY, note VARCHAR(20))",
        "CREATE TABLE `{schema}`.child (id INT PRIMARY KEY, p INT NOT NULL, FOREIGN KEY (p) "
        "REFERENCES `{schema}`.parent (id) ON DELETE CASCADE)",
        "CREATE TABLE `{schema}`.grand (id INT PRIMARY KEY, c INT NOT NULL, FOREIGN KEY (c) "
        "REFERENCES `{schema}`.child (id) ON DELETE CASCADE)"),
    # ON DELETE SET NULL of a two-column key
    "set null": (
        "CREATE TABLE `{schema}`.parent (id INT, code VARCHAR(8), note VARCHAR(20), "
        "PRIMARY KEY (id, code))",
        "CREATE TABLE `{schema}`.child (id INT PRIMARY KEY, p INT NULL, c VARCHAR(8) NULL, "
        "FOREIGN KEY (p, c) REFERENCES `{schema}`.parent (id, code) ON DELETE SET NULL)"),
    # a parent's key change, ON UPDATE CASCADE
    "update cascade": (
        "CREATE TABLE `{schema}`.parent (id INT PRIMARY KEY, note VARCHAR(20))",
        "CREATE TABLE `{schema}`.child (id INT PRIMARY KEY, p INT NOT NULL, FOREIGN KEY (p) "
        "REFERENCES `{schema}`.parent (id) ON UPDATE CASCADE)"),
}


def _fill(source: Database, schema: str, mode: str) -> list[str]:
    """Parents 1..PARENTS with two children each (and a grandchild each): the tables, the
    children's first."""
    source.execute(f"USE `{schema}`")  # (the seq_ tables of the Sequence engine)
    code = ", 'k'" if mode == "set null" else ""
    source.execute(f"INSERT INTO `{schema}`.parent SELECT seq{code}, CONCAT('p', seq) FROM "
                   f"seq_1_to_{PARENTS}")
    source.execute(f"INSERT INTO `{schema}`.child SELECT seq, 1 + (seq - 1) % {PARENTS}{code} "
                   f"FROM seq_1_to_{2 * PARENTS}")
    if mode == "cascade":
        source.execute(f"INSERT INTO `{schema}`.grand SELECT seq, seq FROM "
                       f"seq_1_to_{2 * PARENTS}")
        return ["grand", "child", "parent"]
    return ["child", "parent"]


@pytest.mark.parametrize("mode", list(DDL))
def test_a_parent_gone_before_the_snapshot_copied_it_takes_its_children_on_the_target(
        cluster: Cluster, source: Database, target: Database, mode: str) -> None:
    schema = make_schema(source, target, *DDL[mode])
    name = f"fkcascade-{mode.replace(' ', '')}"
    tables = _fill(source, schema, mode)
    shapes = Shapes(cluster.sandbox, source, target, seed=67)
    children_copied, done, errors, gone = threading.Event(), threading.Event(), [], []

    def write() -> None:
        db, n = Database(cluster.sandbox, "source"), 1_000_000
        try:
            children_copied.wait(300)
            for parent in range(PARENTS, PARENTS // 3, -1):
                if done.is_set():
                    break
                if parent % 5 == 0:  # a child the stream writes (unchecked: an upsert)
                    n += 1
                    values = f"{n}, {parent}, 'k'" if mode == "set null" else f"{n}, {parent}"
                    db.execute(f"INSERT INTO `{schema}`.child VALUES ({values})")
                if mode == "update cascade":
                    db.execute(f"UPDATE `{schema}`.parent SET id = id + 100000 WHERE id = "
                               f"{parent}")
                else:
                    db.execute(f"DELETE FROM `{schema}`.parent WHERE id = {parent}")
                gone.append(parent)
        except Exception as exc:  # reported by the test
            errors.append(exc)
        finally:
            db.close()

    def copied(names: list[str]) -> bool:
        if cluster.channel_status(name) == "PAUSE":
            return True
        copies = {copy.table: copy.state for copy in cluster.pipeline_state(name).snapshots}
        return all(copies.get(f"{schema}.{table}") == "done" for table in names)

    def snapshot(table: str) -> None:
        assert cli.main(["--manager", cluster.manager_address, "snapshot", name, "--table",
                         f"{schema}.{table}"]) == 0

    cluster.apply([beside(one_way(name, schema, tables, snapshot_chunk_size=100,
                                  max_retries=1), shapes.schema)])
    cluster.set_status(name, "START")
    cluster.wait_running(name)
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    shapes.start()
    try:
        for table in tables[:-1]:  # (the keyless table beside cannot be copied by key)
            snapshot(table)
        wait_for(lambda: copied(tables[:-1]), 300, "the children copied, or a pause")
        children_copied.set()
        snapshot("parent")
        wait_for(lambda: copied(tables), 300, "the parents copied, or a pause")
        assert cluster.channel_status(name) == "START", cluster.pipeline_state(name).last_error
        wait_for(lambda: len(gone) > 100, 60, "parents gone after the children's copy")
        shapes.keep_on()
        done.set()
        writer.join(60)
        assert not errors, errors
        wait_equal(source, target, schema, tables, 120)
        for table in tables:  # (wait_equal compared them as multisets)
            assert Counter(target.table(schema, table)) == Counter(source.table(schema, table))
        shapes.finish(source)
    finally:
        done.set()
        writer.join(60)
        shapes.stop()
    state = cluster.pipeline_state(name)
    assert cluster.channel_status(name) == "START" and state.state == "running" and \
        not state.last_error, state.last_error


def test_a_foreign_key_dropped_on_the_target_by_hand_is_no_longer_followed(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Load's facts (its children's actions among them) are read once and kept until a DDL
    of the stream: a target-only table's foreign key dropped by the DBA since must not have
    its old action written (Load deleted rows the target's schema keeps; a review)."""
    schema = make_schema(source, target,
                         "CREATE TABLE `{schema}`.parent (id INT PRIMARY KEY, note VARCHAR(20))")
    target.execute(f"CREATE TABLE `{schema}`.notes (id INT PRIMARY KEY, p INT NOT NULL, "
                   f"CONSTRAINT fk_notes FOREIGN KEY (p) REFERENCES `{schema}`.parent (id) "
                   "ON DELETE CASCADE)")  # a table the DBA keeps beside the parent
    cluster.apply([one_way("fkdropped", schema, ["parent"])])
    cluster.set_status("fkdropped", "START")
    cluster.wait_running("fkdropped")
    source.execute(f"INSERT INTO `{schema}`.parent VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    wait_for(lambda: len(target.table(schema, "parent")) == 3, 60, "the parents")
    target.execute(f"INSERT INTO `{schema}`.notes VALUES (1, 1), (2, 2), (3, 3)")
    source.execute(f"DELETE FROM `{schema}`.parent WHERE id = 1")  # (the facts read here)
    wait_for(lambda: len(target.table(schema, "parent")) == 2, 60, "parent 1 deleted")
    assert target.table(schema, "notes") == [(2, 2), (3, 3)]  # the key's cascade
    target.execute(f"ALTER TABLE `{schema}`.notes DROP FOREIGN KEY fk_notes")
    source.execute(f"DELETE FROM `{schema}`.parent WHERE id = 2")
    source.execute(f"INSERT INTO `{schema}`.parent VALUES (4, 'd')")
    wait_for(lambda: [row[0] for row in target.table(schema, "parent")] == [3, 4], 60,
             "parent 2 deleted and 4 inserted")
    assert target.table(schema, "notes") == [(2, 2), (3, 3)]  # kept: no key asks otherwise
    cluster.set_status("fkdropped", "STOP")
