"""Where a pipeline starts again, and what it does with what a target already holds: a
channel made again with an earlier start, a target restored from an older backup,
ZooKeeper's history gone back or lost, ``setl position show/set/reset`` with a replay. The
keyless, unique-swap and sum tables stream through each replay, compared as multisets."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from manager import cli
from shared.sandbox import Sandbox
from shared.zk import ZkPaths
from tests.devcluster import (
    Cluster,
    Database,
    make_schema,
    one_way,
    wait_equal,
    wait_for,
)
from tests.integration.shapes import Shapes, beside


@contextmanager
def keyless(sandbox: Sandbox, tmp_path: Path, name: str, seed: int
            ) -> Iterator[tuple[Cluster, Database, Database, str, Shapes]]:
    """A manager and a node of their own (``cluster.nodes[1]``), over a keyless table
    ``kl`` of a new schema, and the Shapes workload (not started) for the same pipeline."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.kl (a INT, b TEXT)")
    shapes = Shapes(sandbox, source, target, seed=seed)
    cluster = Cluster(sandbox, tmp_path, name)
    try:
        cluster.start_manager()
        cluster.start_node(1)
        yield cluster, source, target, schema, shapes
    finally:
        shapes.stop()
        cluster.stop()
        source.close()
        target.close()


def pipeline(name: str, schema: str, shapes: Shapes, **params: object) -> dict[str, object]:
    """A channel of ``kl`` and the workload's tables, in one pipeline."""
    return beside(one_way(name, schema, ["kl"], **params), shapes.schema)


def start(cluster: Cluster, name: str, schema: str, shapes: Shapes, **params: object) -> None:
    cluster.apply([pipeline(name, schema, shapes, **params)])
    cluster.set_status(name, "START")


def stop(cluster: Cluster, name: str) -> None:
    cluster.set_status(name, "STOP")
    wait_for(lambda: cluster.pipeline_state(name).owner_node == 0 and cluster.pipeline_state(
        name).state in ("not running", "failed"), 60, f"{name} stopped")


def test_a_channel_made_again_with_an_earlier_start_is_refused_until_told(sandbox, tmp_path,
                                                                         capsys):
    """Deleted and made again under the same name, with an earlier start: (to copy again into
    truncated tables): the target's row of the earlier life would make every batch up to it
    look applied, a silent skip. The start is refused naming both positions; after the
    remedy it names (the target's row deleted) every row loads again: the keyless,
    unique-swap and sum tables too, written all along, equal as multisets."""
    with keyless(sandbox, tmp_path, "again", 59) as (cluster, source, target, schema, shapes):
        kl = f"`{schema}`.kl"
        file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
        start(cluster, "again", schema, shapes)
        cluster.wait_running("again")
        shapes.start()
        for n in range(20):
            source.execute(f"INSERT INTO {kl} VALUES ({n % 4}, 'dup'), ({n % 4}, 'dup')")
        wait_equal(source, target, schema, ["kl"])
        shapes.keep_on()
        shapes.settle(source)
        stop(cluster, "again")
        channel = ["--manager", cluster.manager_address, "channel"]
        capsys.readouterr()
        assert cli.main([*channel, "delete", "again"]) == 0
        said = capsys.readouterr().out
        assert "target target: position row of again.forward at binlog." in said and \
            " kept" in said and "--purge-positions" in said, said
        target.execute(f"DELETE FROM {kl}")
        shapes.put_back(target, shapes.opening())  # truncated: as before their first write
        start(cluster, "again", schema, shapes, start={"file": file, "pos": int(pos)})
        shapes.start()
        wait_for(lambda: cluster.channel_status("again") == "PAUSE", 90, "the refusal")
        error = cluster.pipeline_state("again").last_error
        assert f"starts at {file}:{pos}" in error and "earlier life" in error, error
        assert target.table(schema, "kl") == []
        assert shapes.rows(target) == shapes.opening()
        target.execute("DELETE FROM retl.retl_position WHERE pipeline_id = 'again.forward'")
        cluster.set_status("again", "START")
        wait_equal(source, target, schema, ["kl"])
        shapes.keep_on()
        shapes.finish(source)
        stop(cluster, "again")
        assert cli.main([*channel, "delete", "again", "--purge-positions"]) == 0
        assert " deleted" in capsys.readouterr().out.splitlines()[1]
        assert target.rows("SELECT COUNT(*) FROM retl.retl_position WHERE pipeline_id = "
                           "'again.forward'") == [(0,)]


def test_a_target_that_lost_committed_transactions_is_replayed_not_left_with_a_gap(
        sandbox, tmp_path):
    """The target restored from a backup older than where the cursor saw it (or failed over
    to a lagging replica): its row is behind; the restart reads again from it. The backup
    holds the keyless, unique-swap and sum tables as they were at its row, written all along
    (the replay races new writes): equal as multisets, promises kept."""
    with keyless(sandbox, tmp_path, "behind", 61) as (cluster, source, target, schema,
                                                      shapes):
        kl, node = f"`{schema}`.kl", cluster.nodes[1]
        start(cluster, "behind", schema, shapes)
        cluster.wait_running("behind")
        shapes.start()
        for n in range(10):
            source.execute(f"INSERT INTO {kl} VALUES ({n % 3}, 'first'), ({n % 3}, 'first')")
        wait_equal(source, target, schema, ["kl"])
        target.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")  # rows and row at once
        [(file, pos, process_id, state)] = target.rows(
            "SELECT binlog_file, binlog_pos, process_id, gtid FROM retl.retl_position WHERE "
            "pipeline_id = 'behind.forward'")
        backup, saved = target.table(schema, "kl"), shapes.rows(target)
        target.execute("COMMIT")
        for n in range(10):
            source.execute(f"INSERT INTO {kl} VALUES ({n % 3}, 'later'), ({n % 3}, 'later')")
        wait_equal(source, target, schema, ["kl"])
        shapes.pause()  # (the watcher would see the restore go back)
        stop(cluster, "behind")
        target.execute("BEGIN")  # the backup taken at (file, pos) comes back
        target.execute(f"DELETE FROM {kl}")
        target.execute(f"INSERT INTO {kl} VALUES " + ", ".join(
            f"({a}, '{b}')" for a, b in backup))
        shapes.put_back(target, saved)
        target.execute("UPDATE retl.retl_position SET binlog_file = %s, binlog_pos = %s, "
                       "process_id = %s, gtid = %s WHERE pipeline_id = 'behind.forward'",
                       (file, pos, process_id, state))  # the whole row, as a restore does
        target.execute("COMMIT")
        cluster.set_status("behind", "START")
        shapes.start()
        wait_equal(source, target, schema, ["kl"])
        shapes.keep_on()
        shapes.finish(source)
        assert "event=target_behind pipeline=behind.forward targets=target" in node.output()


def test_a_zookeeper_whose_history_went_back_is_said_not_taken_for_a_newer_owner(
        sandbox, tmp_path, zk_client):
    """ZooKeeper restored from a backup (epochs, its czxids, lower than the targets hold):
    with no writer of the newer epoch connected, the owner takes the next epoch above it
    and goes on; with one connected (another setl on another ZooKeeper), it pauses rather
    than write beside it. ZooKeeper rebuilt empty (the cursor gone: a new life starting at
    latest) is refused as a gap, naming both positions. The keyless, unique-swap and sum
    tables stream through every adoption and refusal: equal as multisets, promises kept."""
    with keyless(sandbox, tmp_path, "history", 29) as (cluster, source, target, schema,
                                                       shapes):
        kl = f"`{schema}`.kl"
        row = "WHERE pipeline_id = 'history.forward'"
        start(cluster, "history", schema, shapes)
        cluster.wait_running("history")
        shapes.start()
        source.execute(f"INSERT INTO {kl} VALUES (1, 'a'), (1, 'a')")
        wait_equal(source, target, schema, ["kl"])
        stop(cluster, "history")
        target.execute(f"UPDATE retl.retl_position SET owner_epoch = 1000000000000 {row}")
        cluster.set_status("history", "START")
        cluster.wait_running("history")
        source.execute(f"INSERT INTO {kl} VALUES (2, 'b'), (2, 'b')")
        wait_equal(source, target, schema, ["kl"])
        assert target.rows(f"SELECT owner_epoch FROM retl.retl_position {row}") == \
            [(1000000000001,)]
        assert "event=epoch_adopted pipeline=history.forward" in cluster.nodes[1].output()
        stop(cluster, "history")
        other = Database(sandbox, "target")  # another setl's owner, still connected
        other.execute("INSERT INTO retl.retl_owner (pipeline_id, connection_id, owner_epoch) "
                      "VALUES ('history.forward', CONNECTION_ID(), 2000000000000)")
        target.execute(f"UPDATE retl.retl_position SET owner_epoch = 2000000000000 {row}")
        cluster.set_status("history", "START")
        wait_for(lambda: cluster.channel_status("history") == "PAUSE", 90, "the pause")
        error = cluster.pipeline_state("history").last_error
        assert "another setl" in error and "still connected" in error, error
        other.close()
        cluster.set_status("history", "START")
        cluster.wait_running("history")
        source.execute(f"INSERT INTO {kl} VALUES (4, 'd'), (4, 'd')")
        wait_equal(source, target, schema, ["kl"])
        shapes.keep_on()
        shapes.finish(source)
        stop(cluster, "history")
        # rebuilt empty: the pipeline's state in ZooKeeper is gone, rows come meanwhile
        zk_client.delete(ZkPaths(cluster.root).pipeline("history.forward"), recursive=True)
        source.execute(f"INSERT INTO {kl} VALUES (3, 'in the gap')")
        cluster.set_status("history", "START")
        wait_for(lambda: cluster.channel_status("history") == "PAUSE", 90, "the refusal")
        error = cluster.pipeline_state("history").last_error
        assert "earlier life" in error, error
        assert "setl position set history/forward --file" in error, error
        assert (3, "in the gap") not in target.table(schema, "kl")


def test_position_show_and_set_with_a_replay(sandbox, tmp_path, capsys, zk_client):
    """setl position show names the cursor, the source's end and each target's row; set is
    refused while the pipeline runs, for a binlog the source lacks, and earlier than a
    target holds unless --replay (then that target loads again from there); reset makes the
    next start begin again at start:. Both replays load the keyless, unique-swap and sum
    tables again from their opening rows while they are written: equal as multisets."""
    with keyless(sandbox, tmp_path, "moves", 67) as (cluster, source, target, schema,
                                                     shapes):
        kl = f"`{schema}`.kl"
        position = ["--manager", cluster.manager_address, "position"]
        file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
        start(cluster, "moves", schema, shapes)
        cluster.wait_running("moves")
        shapes.start()
        for n in range(10):
            source.execute(f"INSERT INTO {kl} VALUES ({n % 3}, 'dup'), ({n % 3}, 'dup')")
        wait_equal(source, target, schema, ["kl"])
        shapes.keep_on()
        shapes.settle(source)  # the row stays where it is shown and set
        [(row_file, row_pos)] = target.rows("SELECT binlog_file, binlog_pos FROM "
                                            "retl.retl_position WHERE pipeline_id = "
                                            "'moves.forward'")
        capsys.readouterr()
        assert cli.main([*position, "show", "moves"]) == 0
        shown = capsys.readouterr().out
        assert "cursor (ZooKeeper)" in shown and f"{row_file}:{row_pos}" in shown, shown
        assert "target target" in shown and "source end" in shown
        assert cli.main([*position, "set", "moves/forward", "--latest"]) == 1
        assert "is not stopped" in capsys.readouterr().err
        answer = cluster.apply_answer([pipeline("moves", schema, shapes, start={
            "file": file, "pos": int(pos)})])  # an edited start: does not move a cursor
        assert [c.action for c in answer.changes if c.kind == "channel"] == ["updated"]
        assert "pipeline moves.forward: the new start: does not move it" in answer.notes[0]
        assert "setl position set moves/forward" in answer.notes[0]
        assert cli.main(["--manager", cluster.manager_address, "channel", "stop", "moves",
                         "--wait"]) == 0
        assert cli.main([*position, "set", "moves/forward", "--file", "binlog.999999",
                         "--pos", "4"]) == 1
        assert "has no binlog file binlog.999999" in capsys.readouterr().err
        assert cli.main([*position, "set", "moves/forward", "--file", file, "--pos",
                         str(pos)]) == 1
        refused = capsys.readouterr().err
        assert f"holds pipeline moves.forward's transactions up to {row_file}:{row_pos}" in \
            refused and "--replay" in refused, refused
        assert cli.main([*position, "set", "moves/forward", "--file", file, "--pos",
                         str(pos), "--replay"]) == 1  # kl is keyless: its rows twice
        refused = capsys.readouterr().err
        assert "takes keyless tables: " in refused and f"{schema}.kl" in refused and \
            "--keyless-duplicates" in refused, refused
        assert target.rows("SELECT binlog_file, binlog_pos FROM retl.retl_position WHERE "
                           "pipeline_id = 'moves.forward'") == [(row_file, row_pos)]
        target.execute(f"DELETE FROM {kl}")  # to load again from the start
        shapes.put_back(target, shapes.opening())
        assert cli.main([*position, "set", "moves/forward", "--file", file, "--pos",
                         str(pos), "--replay", "--keyless-duplicates"]) == 0
        assert target.rows("SELECT binlog_file, binlog_pos FROM retl.retl_position WHERE "
                           "pipeline_id = 'moves.forward'") == [(file, int(pos))]
        cluster.set_status("moves", "START")
        shapes.start()
        wait_equal(source, target, schema, ["kl"])
        shapes.keep_on()
        shapes.settle(source)  # (--latest below skips what comes while it is stopped)
        # a row past the source's end (the source's binlog reset, or another server's)
        stop(cluster, "moves")
        target.execute("UPDATE retl.retl_position SET binlog_file = 'binlog.000099', "
                       "binlog_pos = 4 WHERE pipeline_id = 'moves.forward'")
        cluster.set_status("moves", "START")
        wait_for(lambda: cluster.channel_status("moves") == "PAUSE", 90, "the refusal")
        error = cluster.pipeline_state("moves").last_error
        assert "start at binlog.000099:4 " in error and "past source's binlog end" in error, \
            error
        stop(cluster, "moves")
        assert cli.main([*position, "set", "moves/forward", "--latest", "--replay"]) == 0
        assert cli.main(["--manager", cluster.manager_address, "channel", "start", "moves",
                         "--wait"]) == 0
        source.execute(f"INSERT INTO {kl} VALUES (9, 'after the reset')")
        wait_equal(source, target, schema, ["kl"])
        # reset: forgotten (cursor, the target's row), the next start begins again at the
        # definition's start: (file/pos since the edit above) and loads every row again
        capsys.readouterr()
        assert cli.main([*position, "reset", "moves"]) == 1
        assert "is not stopped" in capsys.readouterr().err
        assert cli.main(["--manager", cluster.manager_address, "channel", "stop", "moves",
                         "--wait"]) == 0
        capsys.readouterr()
        assert cli.main([*position, "reset", "moves"]) == 1  # start: is a place: a replay
        assert "Add --replay" in capsys.readouterr().err
        assert cli.main([*position, "reset", "moves", "--replay"]) == 1
        assert f"{schema}.kl" in capsys.readouterr().err.partition("takes keyless tables: ")[2]
        target.execute(f"DELETE FROM {kl}")
        shapes.put_back(target, shapes.opening())
        plan = f"{ZkPaths(cluster.root).snapshot_plans('moves.forward')}/s.t@1"
        zk_client.create(f"{plan}/0", b"chunks", makepath=True)  # a copy's chunks go too
        assert cli.main([*position, "reset", "moves", "--replay", "--keyless-duplicates"]) == 0
        assert not zk_client.exists(ZkPaths(cluster.root).snapshot_plans("moves.forward"))
        assert f"its next start loads again from {file}:{pos}" in capsys.readouterr().out
        assert target.rows("SELECT binlog_file FROM retl.retl_position WHERE pipeline_id = "
                           "'moves.forward'") == [("",)]  # (kept: a late writer is fenced)
        capsys.readouterr()
        assert cli.main(["--manager", cluster.manager_address, "channel", "start", "moves",
                         "--wait"]) == 0
        shapes.start()
        assert f"from {file}:{pos}" in capsys.readouterr().out
        wait_equal(source, target, schema, ["kl"])
        shapes.keep_on()
        shapes.finish(source)
