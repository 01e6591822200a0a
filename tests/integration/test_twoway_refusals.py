"""Two-way channels on two real MariaDB servers: what a two-way channel refuses, saying
why or what to do instead — a pair or table it cannot keep alike, a copy of rows, target
tables the conflict check cannot tell apart, a replay, and the winner changed while it runs."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from manager import cli
from shared.rpc import manager_pb2
from tests.devcluster import Cluster, Database, make_schema, wait_equal, wait_for
from tests.integration.test_twoway import ITEMS, master_position, set_and_wait, start, two_way


def test_what_a_two_way_channel_cannot_keep_alike_is_refused_saying_why(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A pair writing part of a row and a keyless table are refused at apply; a MyISAM
    target table (its rows reach the binlog without the loop mark) when the channel
    starts, naming it."""
    schema = make_schema(source, target, ITEMS, "CREATE TABLE `{schema}`.logs (v INT)")
    channel = two_way("refused-both", schema)
    channel["pipelines"][0]["pairs"] = [{"source": f"{schema}.items",
                                         "target": f"{schema}.items",
                                         "column_groups": [["name", "qty"]]}]
    [error] = cluster.apply_errors([channel])
    assert "pipeline forward pair source:" in error and "has column_groups" in error, error
    channel = two_way("refused-both", schema)
    channel["pipelines"][1]["pairs"] = [{"source": f"{schema}.logs",
                                         "target": f"{schema}.logs"}]
    [error] = cluster.apply_errors([channel])
    assert f"table {schema}.logs (pair target:{schema}.logs) has no primary key" in error, error
    assert "the channel is two-way" in error
    target.execute(f"ALTER TABLE `{schema}`.items ENGINE=MyISAM")
    cluster.apply([two_way("refused-both", schema)])
    cluster.set_status("refused-both", "START")
    wait_for(lambda: "has engine MyISAM, which does not roll back" in
             cluster.pipeline_state("refused-both").last_error, 90, "the start refused")
    assert f"target table {schema}.items on target" in \
        cluster.pipeline_state("refused-both").last_error
    cluster.set_status("refused-both", "STOP")



def test_a_two_way_channel_copies_no_rows_and_says_why(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """A copy into one side cannot tell its rows from that side's newer writes not come
    over yet: start: snapshot, free_door, setl snapshot and setl backfill are refused (the
    last reported requests written that no one took); a backfill request
    in the source's buffer is not taken (logged), and the channel goes on. It was kept in
    retl_pending and paused the channel at every resume, whatever was done to the buffer
    row: a copy an earlier version kept there is rejected, saying why."""
    schema = make_schema(source, target, ITEMS)
    t = f"`{schema}`.items"
    copying = two_way("copy-both", schema)
    copying["pipelines"][0]["start"] = "snapshot"
    [error] = cluster.apply_errors([copying])
    assert "'start: snapshot' on a two-way channel" in error and "one-way channel" in error
    copying = two_way("copy-both", schema)
    copying["pipelines"][0]["free_door"] = {"source": "target"}
    [error] = cluster.apply_errors([copying])
    assert "free_door on a two-way channel" in error and "one-way channel" in error
    cluster.apply([two_way("copy-both", schema)])
    start(cluster, "copy-both")
    with pytest.raises(grpc.RpcError, match="cannot tell the rows it read"):
        cluster.call("Snapshot", manager_pb2.SnapshotRequest(
            channel="copy-both", pipeline="forward", table=f"{schema}.items"))
    capsys.readouterr()
    assert cli.main(["--manager", cluster.manager_address, "verify", "copy-both",
                     "--repair"]) != 0
    assert "a two-way channel takes no repair" in capsys.readouterr().err
    assert cli.main(["--manager", cluster.manager_address, "--config",  # (its secret_dirs:
                     str(cluster.workdir / "node.yaml"), "backfill", "copy-both",  # kept by
                     "--table", f"{schema}.items", "--where", "id < 100"]) != 0  # the process)
    assert "channel copy-both is two-way, which takes no backfill" in capsys.readouterr().err
    source.execute("SET SESSION sql_log_bin = 0")
    source.execute(f"INSERT INTO {t} VALUES (1, 'only on the source', 0)")
    source.execute("SET SESSION sql_log_bin = 1")
    source.execute("INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA) VALUES "
                   f"('{schema}.items', 'I', '[1]')")
    source.execute(f"INSERT INTO {t} VALUES (3, 'from the source', 0)")
    wait_for(lambda: target.rows(f"SELECT name FROM {t} WHERE id = 3"), 60, "the stream")
    assert target.table(schema, "items") == [(3, "from the source", 0)]
    pending = "SELECT COUNT(*) FROM retl.retl_pending WHERE PIPELINE_ID = 'copy-both.forward'"
    assert source.rows(pending) == [(0,)]
    assert "event=free_door_not_taken pipeline=copy-both.forward requests=1 reason=a two-way " \
        "channel takes no rows read from the tables" in cluster.nodes[1].output()
    source.execute(f"DELETE FROM retl.retl_buffer WHERE FULL_NAME = '{schema}.items'")
    cluster.set_status("copy-both", "STOP")
    source.execute("INSERT INTO retl.retl_pending (PIPELINE_ID, ID, FULL_NAME, TYPE, PK_DATA) "
                   f"VALUES ('copy-both.forward', 99, '{schema}.items', 'I', '[1]')")
    start(cluster, "copy-both")
    wait_for(lambda: cluster.pipeline_state("copy-both").free_door.rejected == 1, 60,
             "the kept request rejected")
    wait_for(lambda: source.rows(pending) == [(0,)], 30, "its copy deleted")
    assert "pipeline copy-both.forward is one of a two-way channel, which takes no rows " \
        "read from the tables" in cluster.nodes[1].output()
    target.execute(f"INSERT INTO {t} VALUES (2, 'from the target', 0)")
    wait_for(lambda: source.rows(f"SELECT name FROM {t} WHERE id = 2"), 60, "the stream")
    source.execute(f"INSERT INTO {t} VALUES (4, 'from the source', 0)")
    wait_for(lambda: target.rows(f"SELECT name FROM {t} WHERE id = 4"), 60, "the stream")
    assert source.table(schema, "items") == [(1, "only on the source", 0),
                                              (2, "from the target", 0),
                                              (3, "from the source", 0),
                                              (4, "from the source", 0)]
    cluster.set_status("copy-both", "STOP")



def test_target_tables_whose_rows_the_conflict_check_cannot_tell_apart_are_refused_at_start(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The write (INSERT … ON DUPLICATE KEY UPDATE) finds a row by every unique key and by
    the server's collation, the conflict check by one key's exact value: a second unique key
    or a case-insensitive key let each side's insert overwrite the other's row unseen. A
    trigger's rows ride in setl's marked transaction and never cross back. Each is refused
    when the channel starts, naming the table."""
    schema = make_schema(source, target, ITEMS)
    t = f"`{schema}`.items"
    cluster.apply([two_way("unsafe-both", schema)])

    def errors() -> str:  # (either pipeline's start may refuse first, and pause the other)
        info = cluster.call("GetChannel", manager_pb2.GetChannelRequest(name="unsafe-both"))
        return "\n".join(pipeline.last_error for pipeline in info.pipelines)

    def refused(why: str) -> str:  # the errors as the refusal left them (a STOP clears them)
        cluster.set_status("unsafe-both", "START")
        def said() -> str:
            text = errors()
            return text if why in text else ""
        error = wait_for(said, 90, f"the start refused: {why}")
        cluster.set_status("unsafe-both", "STOP")
        return error

    target.execute(f"ALTER TABLE {t} ADD UNIQUE KEY by_name (name)")
    error = refused("has 2 unique keys (PRIMARY, by_name)")
    assert f"target table {schema}.items on target has 2 unique keys" in error, error
    target.execute(f"ALTER TABLE {t} DROP KEY by_name")
    for db in (source, target):
        db.script(f"ALTER TABLE {t} DROP PRIMARY KEY",
                  f"ALTER TABLE {t} MODIFY name VARCHAR(30) CHARACTER SET utf8mb4 COLLATE "
                  "utf8mb4_general_ci NOT NULL", f"ALTER TABLE {t} ADD PRIMARY KEY (name)")
    error = refused("key column name has collation utf8mb4_general_ci")
    assert "COLLATE utf8mb4_nopad_bin" in error, error
    for db in (source, target):
        db.execute(f"ALTER TABLE {t} MODIFY name VARCHAR(30) CHARACTER SET utf8mb4 COLLATE "
                   "utf8mb4_nopad_bin NOT NULL")
    target.execute(f"CREATE TRIGGER `{schema}`.audit BEFORE INSERT ON {t} FOR EACH ROW "
                   "SET NEW.qty = NEW.qty + 1")
    refused(f"target table {schema}.items on target has trigger audit")
    target.execute(f"DROP TRIGGER `{schema}`.audit")
    for at, db in enumerate((source, target)):  # ids numbered alike on both sides: 1, 2…
        # a row event first: its table map tells the pipeline the column's type before the
        # MODIFY (not known, a MODIFY to a number pauses with ddl_sync off: it may round)
        db.script(f"INSERT INTO {t} VALUES ({90 + at}, 'passing {at}', 0)",
                  f"DELETE FROM {t} WHERE id = {90 + at}")
        db.execute(f"ALTER TABLE {t} MODIFY id INT NOT NULL AUTO_INCREMENT, ADD KEY (id)")
    refused("numbers rows by AUTO_INCREMENT column id, and ")  # (source and target, or
    # target and source: the pipeline that refused first)
    for at, db in enumerate((source, target)):  # (a row event again: the type the MODIFY
        db.script(f"INSERT INTO {t} VALUES (NULL, 'passing {at}', 0)",  # above set is not
                  f"DELETE FROM {t} WHERE name = 'passing {at}'")  # followed through DDLs)
        db.execute(f"ALTER TABLE {t} MODIFY id INT NOT NULL, DROP KEY id")
    start(cluster, "unsafe-both")
    source.execute(f"INSERT INTO {t} VALUES (1, 'abc', 0)")
    target.execute(f"INSERT INTO {t} VALUES (2, 'ABC', 0)")
    wait_for(lambda: len(source.table(schema, "items")) == 2 == len(
        target.table(schema, "items")), 60, "both rows on both sides")
    wait_equal(source, target, schema, ["items"])
    set_and_wait(cluster, "unsafe-both", "STOP", "not running")



def test_a_replay_of_a_two_way_pipeline_is_refused_saying_what_to_do_instead(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """A replay of the first pipeline wrote its source's older changes over the other side's
    later ones (echoes in its binlog, skipped): setl position set to an earlier place, and a
    reset to a start: that is a place, are refused; --latest (nothing loaded again) is not."""
    schema = make_schema(source, target, ITEMS)
    t = f"`{schema}`.items"
    file, pos = master_position(source)
    channel = two_way("replay-both", schema)
    channel["pipelines"][0]["start"] = {"file": file, "pos": int(pos)}
    cluster.apply([channel])
    start(cluster, "replay-both")
    source.execute(f"INSERT INTO {t} VALUES (1, 'v0', 0)")
    wait_equal(source, target, schema, ["items"])
    target.execute(f"UPDATE {t} SET name = 'later on the target' WHERE id = 1")
    wait_equal(source, target, schema, ["items"])
    set_and_wait(cluster, "replay-both", "STOP", "not running")
    position = ["--manager", cluster.manager_address, "position"]
    capsys.readouterr()
    assert cli.main([*position, "set", "replay-both/forward", "--file", file, "--pos",
                     str(pos), "--replay"]) == 1
    refused = capsys.readouterr().err
    assert "pipeline replay-both.forward is on a two-way channel: a start at" in refused, \
        refused
    assert "setl position set replay-both/forward --latest" in refused, refused
    assert cli.main([*position, "reset", "replay-both"]) == 1
    assert "setl position reset (the next start loads again from the definition's start:) " \
        "is refused" in capsys.readouterr().err
    assert cli.main([*position, "set", "replay-both/forward", "--latest"]) == 0
    start(cluster, "replay-both")
    source.execute(f"INSERT INTO {t} VALUES (2, 'after', 0)")
    wait_equal(source, target, schema, ["items"])
    assert source.table(schema, "items") == [(1, "later on the target", 0), (2, "after", 0)]
    set_and_wait(cluster, "replay-both", "STOP", "not running")



def test_the_winner_changes_places_only_while_the_channel_is_stopped(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The first pipeline wins conflicts: its pipelines given in the other order while the
    channel runs, each runner takes the new definition at its own time, and both sides could
    win (each keeping the other's row). Apply refuses it; stopped, it applies."""
    schema = make_schema(source, target, ITEMS)
    channel = two_way("swap-winner", schema)
    cluster.apply([channel])
    start(cluster, "swap-winner")
    swapped = {**channel, "pipelines": list(reversed(channel["pipelines"]))}
    [error] = cluster.apply_errors([swapped])
    assert "channel swap-winner: pipeline backward would be first, and win conflicts, in " \
        "place of forward while the channel runs" in error, error
    cluster.set_status("swap-winner", "STOP")
    assert cluster.apply_errors([swapped]) == []

