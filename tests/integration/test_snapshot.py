"""Snapshots in the stream on real servers: a channel started with ``start: snapshot`` copies
every paired table chunk by chunk while writes go on, and ends equal to the source."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pymysql

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside
from tests.integration.shapes import channel as shapes_channel

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


def test_a_table_copied_by_hand_and_one_added_to_the_channel_while_the_stream_goes_on(
        cluster: Cluster, source: Database, target: Database, capsys) -> None:
    """setl snapshot --where copies the matching rows only; pausing copies leaves the stream
    running; a table added to the running channel's pairs is copied by itself. The pipeline
    restarts with its new pairs while the keyless, unique-swap and sum tables of the same
    pipeline are written: equal as multisets at the end."""
    schema = make_schema(source, target, ITEMS, UNIQUE)
    shapes = Shapes(cluster.sandbox, source, target, seed=107)
    source.execute(f"USE `{schema}`")
    source.execute(f"USE `{schema}`")
    source.execute(f"INSERT INTO `{schema}`.items SELECT seq, CONCAT('item ', seq), seq % 100 "
                   "FROM seq_1_to_2000")
    source.execute(f"INSERT INTO `{schema}`.tags SELECT CONCAT('tag', seq), seq FROM "
                   "seq_1_to_3000")
    cluster.apply([beside(one_way("adhoc", schema, ["items"], snapshot_chunk_size=100),
                          shapes.schema)])
    cluster.set_status("adhoc", "START")
    cluster.wait_running("adhoc")
    shapes.start()
    try:
        copy_by_hand_and_add_a_table(cluster, source, target, schema, shapes, capsys)
        shapes.keep_on()
        shapes.finish(source)
    finally:
        shapes.stop()


def copy_by_hand_and_add_a_table(cluster: Cluster, source: Database, target: Database,
                                 schema: str, shapes: Shapes, capsys) -> None:
    from manager import cli

    manager = ["--manager", cluster.manager_address]
    assert cli.main([*manager, "snapshot", "adhoc", "--table", f"{schema}.items", "--where",
                     "qty < 10", "--wait"]) == 0
    out = capsys.readouterr()
    assert "will be copied by pipeline adhoc.forward where qty < 10" in out.err
    assert f"{schema}.items" in out.out and "done" in out.out
    assert target.table(schema, "items") == source.rows(
        f"SELECT * FROM `{schema}`.items WHERE qty < 10 ORDER BY 1")
    # copies paused: the stream goes on
    assert cli.main([*manager, "snapshot", "pause", "adhoc"]) == 0
    added = one_way("adhoc", schema, ["items", "tags"], snapshot_chunk_size=100)
    cluster.apply([beside(added, shapes.schema)])  # the pipeline restarts with its new pairs
    wait_for(lambda: [c for c in cluster.pipeline_state("adhoc").snapshots
                      if c.table == f"{schema}.tags"], 60, "the added table's copy asked")
    source.execute(f"INSERT INTO `{schema}`.items VALUES (5000, 'streamed', 7)")
    wait_for(lambda: target.rows(f"SELECT name FROM `{schema}`.items WHERE id = 5000"), 60,
             "a change streamed while copies are paused")
    [tags] = [c for c in cluster.pipeline_state("adhoc").snapshots
              if c.table == f"{schema}.tags"]
    assert tags.state == "copying" and tags.chunks_done == 0 and tags.chunks >= 30
    assert cli.main([*manager, "snapshot", "resume", "adhoc"]) == 0
    source.execute(f"UPDATE `{schema}`.tags SET n = -n WHERE n % 7 = 0")  # racing the copy
    wait_equal(source, target, schema, ["tags"], 120)
    assert cli.main([*manager, "snapshot", "status", "adhoc", "--wait"]) == 0
    assert f"{schema}.tags" in capsys.readouterr().out


def test_a_new_target_of_a_replicated_table_is_copied_while_writes_race_it(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A fan-out pair added beside a running one: the new target gets every row (a copy,
    asked by the apply and said in its notes), not only the rows changed after it; the old
    target, written again through the copy's watermarks, stays equal to the source."""
    schema = make_schema(source, target, ITEMS)
    target.execute(ITEMS.format(schema=schema).replace(".items", ".archive"))
    source.execute(f"USE `{schema}`")
    source.execute(f"INSERT INTO `{schema}`.items SELECT seq, CONCAT('item ', seq), seq % 100 "
                   "FROM seq_1_to_3000")
    cluster.apply([one_way("fan", schema, ["items"], start="snapshot", snapshot_chunk_size=200)])
    cluster.set_status("fan", "START")
    cluster.wait_running("fan")
    wait_equal(source, target, schema, ["items"], 60)
    stop = threading.Event()
    writes: list[int] = []

    def write() -> None:
        writer = Database(cluster.sandbox, "source")
        rng = random.Random(11)
        try:
            while not stop.is_set():
                writer.execute(f"UPDATE `{schema}`.items SET qty = qty + 1, name = 'updated' "
                               f"WHERE id = {rng.randint(1, 3000)}")
                writer.execute(f"DELETE FROM `{schema}`.items WHERE id = {rng.randint(1, 3000)}")
                writes.append(1)
        finally:
            writer.close()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    fanned = one_way("fan", schema, ["items"], start="snapshot", snapshot_chunk_size=200)
    fanned["pipelines"][0]["pairs"] = [
        {"source": f"{schema}.items", "target": f"{schema}.items", "fan_out": True},
        {"source": f"{schema}.items", "target": f"{schema}.archive", "fan_out": True}]
    try:
        answer = cluster.apply_answer([fanned])
        assert not answer.errors, answer.errors
        [note] = [n for n in answer.notes if "will be copied" in n]
        assert note.startswith(f"pipeline fan.forward: {schema}.items will be copied into "
                               f"target:{schema}.archive (and again into target:{schema}.items"
                               ), note
        wait_for(lambda: len([c for c in cluster.pipeline_state("fan").snapshots
                              if c.state == "done"]) == 2, 120,
                 "the copy into the new target done")
    finally:
        stop.set()
        writer.join(30)
    assert len(writes) > 20  # the copy raced the writes
    wait_equal(source, target, schema, ["items"], 60)
    wait_for(lambda: Counter(target.table(schema, "archive")) ==
             Counter(source.table(schema, "items")), 60, "the new target equal to the source")


def test_a_pair_that_now_writes_another_column_has_its_rows_copied_again(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A running pair's column list widened by ``setl apply``: the rows already on the
    target get the new column too (a copy through the new pair, said in the apply's notes),
    not only the rows changed after it; writes race the copy."""
    schema = make_schema(source, target, ITEMS)
    source.execute(f"USE `{schema}`")
    source.execute(f"INSERT INTO `{schema}`.items SELECT seq, CONCAT('item ', seq), seq % 100 "
                   "FROM seq_1_to_2000")
    narrow = one_way("widened", schema, ["items"], start="snapshot", snapshot_chunk_size=300)
    narrow["pipelines"][0]["pairs"][0]["columns"] = {"include": ["id", "name"]}
    cluster.apply([narrow])
    cluster.set_status("widened", "START")
    cluster.wait_running("widened")
    wait_for(lambda: target.rows(f"SELECT COUNT(*), COUNT(qty) FROM `{schema}`.items")[0] ==
             (2000, 0), 60, "the narrow copy")
    stop = threading.Event()

    def write() -> None:
        writer = Database(cluster.sandbox, "source")
        rng = random.Random(5)
        try:
            while not stop.is_set():
                writer.execute(f"UPDATE `{schema}`.items SET qty = qty + 1 "
                               f"WHERE id = {rng.randint(1, 2000)}")
        finally:
            writer.close()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    wide = one_way("widened", schema, ["items"], start="snapshot", snapshot_chunk_size=300)
    try:
        answer = cluster.apply_answer([wide])
        assert not answer.errors, answer.errors
        [note] = [n for n in answer.notes if "copied again" in n]
        assert note.startswith(f"pipeline widened.forward: {schema}.items goes to "
                               f"target:{schema}.items by a pair changed in columns"), note
        wait_for(lambda: target.rows(f"SELECT COUNT(qty) FROM `{schema}`.items")[0][0] ==
                 2000, 120, "every row with the new column (the copy through the new pair)")
    finally:
        stop.set()
        writer.join(30)
    wait_equal(source, target, schema, ["items"], 60)


def test_a_copy_that_fails_on_the_node_is_the_pipelines_last_error_in_status(
        cluster: Cluster, source: Database, target: Database, capsys) -> None:
    """A copy the node refuses (here: a keyless table, asked straight in ZooKeeper as an
    older manager could) is no longer only in the node's log: setl status shows it."""
    from kazoo.client import KazooClient

    from manager import cli
    from shared.snapshotctl import SnapshotControl
    from shared.zk import ZkPaths

    schema = make_schema(source, target, ITEMS, "CREATE TABLE `{schema}`.kl (a INT, b INT)")
    cluster.apply([one_way("failing", schema, ["items", "kl"])])
    cluster.set_status("failing", "START")
    cluster.wait_running("failing")
    zk = KazooClient(hosts=cluster.sandbox.servers()["zookeeper"].address)
    zk.start()
    try:
        SnapshotControl(zk, ZkPaths(cluster.root), "failing.forward").ask(schema, "kl")
    finally:
        zk.stop()
        zk.close()
    state = wait_for(lambda: (lambda s: s if s.last_error else None)(
        cluster.pipeline_state("failing")), 60, "the failed copy in the pipeline's state")
    assert state.last_error.startswith(f"pipeline failing.forward: the copy of {schema}.kl "
                                       f"failed: table {schema}.kl has no primary key")
    assert [c.state for c in state.snapshots] == ["failed"]
    assert cli.main(["--manager", cluster.manager_address, "status"]) == 0
    out = capsys.readouterr().out
    assert any(f"{schema}.kl" in line and "failed" in line for line in out.splitlines()), out


def test_kill_9_in_the_middle_of_a_copy_goes_on_with_the_chunks_not_done(
        sandbox, tmp_path) -> None:
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, ITEMS)
    source.execute(f"INSERT INTO `{schema}`.items SELECT seq, CONCAT('item ', seq), seq % 100 "
                   f"FROM `{schema}`.seq_1_to_20000")
    # a keyless table is never copied by a snapshot: the keyless, unique-swap and sum tables
    # stream through the kill in a channel of their own on the same node
    shapes = Shapes(sandbox, source, target, seed=37)
    cluster = Cluster(sandbox, tmp_path, "snapcrash")
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        cluster.apply([one_way("snapcrash", schema, ["items"], start="snapshot",
                               snapshot_chunk_size=200, snapshot_parallelism=1),
                       shapes_channel("snapcrash-shapes", shapes.schema)])
        for channel in ("snapcrash", "snapcrash-shapes"):
            cluster.set_status(channel, "START")
            cluster.wait_running(channel)
        shapes.start()
        wait_for(lambda: any(c.chunks_done >= 10 for c in
                             cluster.pipeline_state("snapcrash").snapshots), 120,
                 "ten chunks on the target")
        node.kill()
        source.execute(f"UPDATE `{schema}`.items SET qty = -1 WHERE id % 1000 = 0")
        restarted = cluster.start_node(1)
        shown: list[list[str]] = []  # the copy as status shows it, while the node starts again

        def done() -> bool:
            shown.append([c.state for c in cluster.pipeline_state("snapcrash").snapshots])
            return shown[-1] == ["done"]
        wait_for(done, 180, "copy done", interval_s=0.05)
        assert all(len(states) == 1 for states in shown), shown  # never a copy gone from view
        wait_equal(source, target, schema, ["items"], 60)
        reads = [line.split("chunks=")[1].split()[0]  # both runs: the node's one log file
                 for line in restarted.output().splitlines() if "event=snapshot_window " in line]
        [copy] = cluster.pipeline_state("snapcrash").snapshots
        # every chunk read once, but those of the windows in flight when the node died
        assert len(reads) <= copy.chunks + 3, (len(reads), copy.chunks)
        assert len(set(reads)) == copy.chunks == 100
        shapes.finish(source)
    finally:
        shapes.stop()
        cluster.stop()


def test_a_cut_over_rename_mid_copy_fails_the_copy_and_says_what_to_copy(
        cluster: Cluster, source: Database, target: Database, capsys) -> None:
    """A gh-ost/pt-osc cut-over (RENAME TABLE items TO items_old, items_new TO items) while
    items is copied, ddl_sync on: the copy read its chunks left by the name, from the new
    items whose rows the stream had brought, and ended "done" while the old table's rows not
    copied never reached the target's items_old. The copy fails, saying so, and copying
    items_old as it says makes the target equal."""
    from manager import cli

    manager = ["--manager", cluster.manager_address]
    schema = make_schema(source, target, ITEMS)
    source.execute(f"INSERT INTO `{schema}`.items SELECT seq, CONCAT('item ', seq), seq % 100 "
                   f"FROM `{schema}`.seq_1_to_2000")
    channel = one_way("snaprename", schema, [], ddl_sync=True, snapshot_chunk_size=100,
                      snapshot_parallelism=1)
    channel["pipelines"][0]["pairs"] = [{"source": {"namespace": schema, "table": "re:items.*"},
                                         "target": {"namespace": "{schema}", "table": "{table}"}}]
    cluster.apply([channel])
    cluster.set_status("snaprename", "START")
    cluster.wait_running("snaprename")
    assert cli.main([*manager, "snapshot", "pause", "snaprename"]) == 0
    assert cli.main([*manager, "snapshot", "snaprename", "--table", f"{schema}.items"]) == 0
    wait_for(lambda: [c for c in cluster.pipeline_state("snaprename").snapshots
                      if c.state == "copying" and c.chunks == 20], 60, "the copy split")
    source.script(f"CREATE TABLE `{schema}`.items_new LIKE `{schema}`.items",
                  f"INSERT INTO `{schema}`.items_new SELECT seq, 'new', 1 "
                  f"FROM `{schema}`.seq_1_to_50",
                  f"RENAME TABLE `{schema}`.items TO `{schema}`.items_old, "
                  f"`{schema}`.items_new TO `{schema}`.items")
    assert cli.main([*manager, "snapshot", "resume", "snaprename"]) == 0
    state = wait_for(lambda: (lambda s: s if s.last_error else None)(
        cluster.pipeline_state("snaprename")), 60, "the failed copy in the pipeline's state")
    assert [c.state for c in state.snapshots] == ["failed"]
    assert state.last_error.startswith(
        f"pipeline snaprename.forward: the copy of {schema}.items failed: {schema}.items was "
        f"renamed to {schema}.items_old by a DDL in the source's binlog at "), state.last_error
    assert f"setl snapshot snaprename --table {schema}.items_old" in state.last_error
    wait_equal(source, target, schema, ["items"], 60)  # the new items, by the stream
    assert target.rows(f"SELECT COUNT(*) FROM `{schema}`.items_old") == [(0,)]
    # (its exit status is 1: the failed copy of items is still listed)
    cli.main([*manager, "snapshot", "snaprename", "--table", f"{schema}.items_old", "--wait"])
    wait_equal(source, target, schema, ["items", "items_old"], 60)
    state = cluster.pipeline_state("snaprename")
    assert [(c.table, c.state) for c in state.snapshots] == [
        (f"{schema}.items", "failed"), (f"{schema}.items_old", "done")]
    assert state.last_error == ""  # copied under its new name, as it said
