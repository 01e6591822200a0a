"""One-way replication on real servers: binlog Select → Spark E/T → ordered Load."""

from __future__ import annotations

import threading

import grpc
import pytest

from manager import cli
from node.select.source import check_source, replica_server_id
from shared import codec
from shared.errors import SourceError
from shared.model import DataSource
from shared.rpc import manager_pb2
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside

ITEMS = ("CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(50), "
         "price DECIMAL(10,2), note TEXT, updated DATETIME(6))")


def start_channel(cluster: Cluster, name: str, schema: str, tables: list[str],
                  **params: object) -> None:
    cluster.apply([one_way(name, schema, tables, **params)])
    cluster.set_status(name, "START")
    cluster.wait_running(name)


def test_inserts_updates_deletes_key_changes_and_nulls(cluster, source, target):
    schema = make_schema(source, target, ITEMS)
    start_channel(cluster, "crud", schema, ["items"])
    t = f"`{schema}`.items"
    source.script(
        f"INSERT INTO {t} VALUES (1,'a',1.50,'x',NOW(6)),(2,'b',NULL,NULL,NULL),"
        "(3,'c',3.00,'z',NOW(6)),(4,'d',4.00,'',NOW(6))",  # one multi-row statement
        f"UPDATE {t} SET price = price * 2, note = 'doubled' WHERE id IN (1, 3)",
        f"UPDATE {t} SET name = NULL WHERE id = 4",
        f"DELETE FROM {t} WHERE id = 2",
        f"UPDATE {t} SET id = 10 WHERE id = 1",  # primary key change
        f"INSERT INTO {t} VALUES (2,'b again',2.00,'back',NULL)",  # re-insert a deleted key
    )
    wait_equal(source, target, schema, ["items"])
    assert target.rows(f"SELECT id, name, price FROM {t} ORDER BY id") == [
        (2, "b again", 2), (3, "c", 6), (4, None, 4), (10, "a", 3)]
    # the key change and the delete in one transaction (one batch): merged per key
    source.execute("BEGIN")
    source.script(f"UPDATE {t} SET id = 11 WHERE id = 10",
                  f"UPDATE {t} SET id = 12 WHERE id = 11",
                  f"INSERT INTO {t} VALUES (13,'new',1,NULL,NULL)",
                  f"DELETE FROM {t} WHERE id = 13",
                  f"DELETE FROM {t} WHERE id = 3", "COMMIT")
    wait_equal(source, target, schema, ["items"])
    assert [row[0] for row in target.table(schema, "items")] == [2, 4, 12]
    cluster.set_status("crud", "STOP")


def test_start_latest_copies_only_later_changes_and_start_position_replays(
        cluster, source, target):
    """The replay from a position loads again, into truncated tables, what the first
    channel loaded: the keyless, unique-swap and sum tables too (written from the first
    start on, racing the replay), equal as multisets."""
    schema = make_schema(source, target, ITEMS)
    shapes = Shapes(cluster.sandbox, source, target, seed=73)
    t = f"`{schema}`.items"
    source.execute(f"INSERT INTO {t} (id, name) VALUES (1, 'before the channel')")
    file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
    source.execute(f"INSERT INTO {t} (id, name) VALUES (2, 'after the recorded position')")
    cluster.apply([beside(one_way("latest", schema, ["items"]), shapes.schema)])
    cluster.set_status("latest", "START")
    cluster.wait_running("latest")
    shapes.start()
    try:
        source.execute(f"INSERT INTO {t} (id, name) VALUES (3, 'after the start')")
        # batches load in source order: had row 2 been read, it would be there before row 3
        wait_for(lambda: target.table(schema, "items"), 30, "the row written after the start")
        assert [row[0] for row in target.table(schema, "items")] == [3]
        shapes.pause()  # (the watcher would see the truncation)
        cluster.set_status("latest", "STOP")
        wait_for(lambda: cluster.pipeline_state("latest").state == "not running", 30, "stop")

        target.execute(f"DELETE FROM {t}")
        shapes.put_back(target, shapes.opening())  # as at the position: before the first
        cluster.apply([beside(one_way("from-position", schema, ["items"],
                                      start={"file": file, "pos": int(pos)}), shapes.schema)])
        cluster.set_status("from-position", "START")
        shapes.start()
        wait_for(lambda: len(target.table(schema, "items")) == 2, 30, "rows 2 and 3")
        assert [row[0] for row in target.table(schema, "items")] == [2, 3]
        shapes.keep_on()
        shapes.finish(source)
    finally:
        shapes.stop()
    cluster.set_status("from-position", "STOP")


def test_start_at_a_gtid(cluster, source, target):
    schema = make_schema(source, target, ITEMS)
    t = f"`{schema}`.items"
    source.execute(f"INSERT INTO {t} (id, name) VALUES (1, 'before the gtid')")
    gtid = source.rows("SELECT @@gtid_binlog_pos")[0][0]
    source.execute(f"INSERT INTO {t} (id, name) VALUES (2, 'after the gtid')")
    start_channel(cluster, "from-gtid", schema, ["items"], start={"gtid": gtid})
    source.execute(f"INSERT INTO {t} (id, name) VALUES (3, 'after the start')")
    wait_for(lambda: len(target.table(schema, "items")) == 2, 30, "rows 2 and 3")
    assert [row[0] for row in target.table(schema, "items")] == [2, 3]
    state = wait_for(lambda: (s := cluster.pipeline_state("from-gtid")).position.file and s, 10,
                     "the cursor to carry a file/pos after the first batch")
    assert state.position.file.startswith("binlog.") and state.position.gtid.startswith("0-11-")
    cluster.set_status("from-gtid", "STOP")


def test_a_transaction_is_never_seen_half_loaded(cluster, source, target):
    ddl = ["CREATE TABLE `{schema}`.a (id INT PRIMARY KEY, amount INT NOT NULL)",
           "CREATE TABLE `{schema}`.b (id INT PRIMARY KEY, amount INT NOT NULL)"]
    schema = make_schema(source, target, *ddl)
    source.script(*(f"INSERT INTO `{schema}`.{t} VALUES ({i}, 100)" for t in "ab"
                    for i in range(10)))
    for t in "ab":  # the starting rows, copied before the channel starts
        target.script(*(f"INSERT INTO `{schema}`.{t} VALUES ({i}, 100)" for i in range(10)))
    start_channel(cluster, "whole", schema, ["a", "b"], batch_size=3, batch_timeout_ms=20)
    sums: list[int] = []
    done = threading.Event()

    def read_target() -> None:
        reader = Database(cluster.sandbox, "target")
        while not done.is_set():
            reader.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            total = sum(int(reader.rows(f"SELECT COALESCE(SUM(amount), 0) FROM `{schema}`.{t}")
                            [0][0]) for t in "ab")
            reader.execute("COMMIT")
            sums.append(total)
        reader.close()

    reader = threading.Thread(target=read_target, daemon=True)
    reader.start()
    for n in range(300):  # move money from a to b, one transaction each, two tables each
        i, amount = n % 10, n % 7 + 1
        source.execute("BEGIN")
        source.execute(f"UPDATE `{schema}`.a SET amount = amount - {amount} WHERE id = {i}")
        source.execute(f"UPDATE `{schema}`.b SET amount = amount + {amount} WHERE id = {i}")
        source.execute("COMMIT")
    wait_equal(source, target, schema, ["a", "b"])
    done.set()
    reader.join(60)
    assert not reader.is_alive(), "the reader did not stop"
    assert len(sums) > 20
    assert set(sums) == {2000}, f"a reader saw a half-loaded transaction: {set(sums)}"
    cluster.set_status("whole", "STOP")


def test_restart_from_cursor_after_a_clean_stop(cluster, source, target):
    """A clean stop and start goes on from the cursor, the keyless, unique-swap and sum
    tables of the same pipeline written all along (equal as multisets at the end)."""
    schema = make_schema(source, target, ITEMS)
    shapes = Shapes(cluster.sandbox, source, target, seed=43)
    definition = one_way("resume", schema, ["items"])
    cluster.apply([beside(definition, shapes.schema)])
    cluster.set_status("resume", "START")
    cluster.wait_running("resume")
    shapes.start()
    try:
        stop_and_start(cluster, source, target, schema)
        shapes.finish(source)
    finally:
        shapes.stop()
    cluster.set_status("resume", "STOP")


def stop_and_start(cluster, source, target, schema: str) -> None:
    source.execute(f"INSERT INTO `{schema}`.items (id, name) VALUES (1, 'before stop')")
    wait_equal(source, target, schema, ["items"])
    # stats are published every half second
    first = wait_for(lambda: (s := cluster.pipeline_state("resume")).process_id and s, 10,
                     "the first loaded processId in the stats")
    cluster.set_status("resume", "STOP")
    wait_for(lambda: cluster.pipeline_state("resume").state == "not running", 15, "stop")
    # the runner has ended (it logs so last): nothing written from now on can arrive before
    # the channel starts again
    wait_for(lambda: "event=pipeline_stopped pipeline=resume.forward" in
             cluster.nodes[1].output(), 15, "the runner to end")
    source.execute(f"INSERT INTO `{schema}`.items (id, name) VALUES (2, 'while stopped')")
    source.execute(f"UPDATE `{schema}`.items SET name = 'changed while stopped' WHERE id = 1")
    assert target.table(schema, "items")[0][1] == "before stop"
    assert len(target.table(schema, "items")) == 1
    cluster.set_status("resume", "START")
    wait_equal(source, target, schema, ["items"])
    # processIds continue across the restart
    again = wait_for(lambda: (s := cluster.pipeline_state("resume")).process_id >
                     first.process_id and s, 10, "a later processId after the restart")
    assert (again.position.file, again.position.pos) > (first.position.file, first.position.pos)


def test_statement_binlog_format_is_refused_with_the_fix(cluster, source, target):
    """`channel start` refuses a source that would garble changes, naming the fix; the node
    checks again when a pipeline starts (the setting may change after the channel started)."""
    schema = make_schema(source, target, ITEMS)
    cluster.apply([one_way("stmt", schema, ["items"], max_retries=0)])
    source.execute("SET GLOBAL binlog_format = 'STATEMENT'")
    try:
        with pytest.raises(grpc.RpcError) as refused:
            cluster.set_status("stmt", "START")
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        message = refused.value.details()
        assert "channel stmt was not started: 1 problem(s) would stop its pipelines" in message
        assert "pipeline stmt.forward: source source (127.0.0.1:" in message
        assert "binlog_format is STATEMENT; setl needs ROW; fix: SET GLOBAL binlog_format = " \
               "'ROW'" in message
        assert cluster.channel_status("stmt") == "STOP"
        with pytest.raises(SourceError) as at_start:  # the node's own check
            check_source(codec.from_proto(cluster.call("GetSource", manager_pb2.GetSourceRequest(
                name="source")), DataSource), "stmt.forward", replica_server_id("stmt.forward"),
                None)
    finally:
        source.execute("SET GLOBAL binlog_format = 'ROW'")
    assert "has binlog_format=STATEMENT; setl needs binlog_format=ROW: run SET GLOBAL " \
           "binlog_format='ROW'" in str(at_start.value)
    assert "pipeline stmt.forward: source source (127.0.0.1:" in str(at_start.value)
    cluster.set_status("stmt", "START")  # fixed: it starts
    cluster.wait_running("stmt")
    cluster.set_status("stmt", "STOP")


def test_a_temporary_tables_ddl_after_rows_in_one_transaction_keeps_the_rows(
        cluster, source, target):
    """A session in MIXED format logs an unsafe UPDATE as rows, then a CREATE TEMPORARY
    TABLE as a statement, in one group: the rows were dropped with the statement, the
    pipeline running on. The temporary table's DDL is stepped over, the rows kept."""
    schema = make_schema(source, target, ITEMS)
    start_channel(cluster, "mixed", schema, ["items"], max_retries=0)
    source.execute(f"INSERT INTO `{schema}`.items (id, name) VALUES (1, 'one')")
    wait_equal(source, target, schema, ["items"])
    try:
        source.script("SET SESSION binlog_format = 'MIXED'", "BEGIN",
                      f"UPDATE `{schema}`.items SET name = UUID() WHERE id = 1",
                      f"CREATE TEMPORARY TABLE `{schema}`.scratch (a INT)",
                      f"INSERT INTO `{schema}`.items (id, name) VALUES (2, UUID())", "COMMIT")
    finally:
        source.script("SET SESSION binlog_format = 'ROW'",
                      f"DROP TEMPORARY TABLE IF EXISTS `{schema}`.scratch")
    source.execute(f"INSERT INTO `{schema}`.items (id, name) VALUES (3, 'after')")
    wait_for(lambda: len(target.table(schema, "items")) == 3, 60, "the rows after it")
    wait_equal(source, target, schema, ["items"])
    assert cluster.channel_status("mixed") == "START"
    assert cluster.pipeline_state("mixed").last_error == ""
    cluster.set_status("mixed", "STOP")


def test_a_load_error_pauses_the_channel_and_shows_stage_and_process_id(
        cluster, source, target, capsys):
    schema = make_schema(source, target, ITEMS)
    target.execute(f"DROP TABLE `{schema}`.items")  # the target table is missing
    start_channel(cluster, "broken", schema, ["items"], max_retries=1)
    source.execute(f"INSERT INTO `{schema}`.items (id, name) VALUES (1, 'nowhere to go')")
    wait_for(lambda: cluster.channel_status("broken") == "PAUSE", 60, "the channel to pause")
    error = wait_for(lambda: cluster.pipeline_state("broken").last_error, 10, "the error")
    assert error.startswith("stage load, pipeline broken.forward, processId ")
    assert f"Table '{schema}.items' doesn't exist" in error
    capsys.readouterr()
    assert cli.main(["--manager", cluster.manager_address, "channel", "show", "broken"]) == 0
    shown = capsys.readouterr().out
    assert "state: failed" in shown and "last error: stage load" in shown


@pytest.mark.parametrize("parallelism", [1, 5])
def test_the_window_bounds_batches_in_flight(cluster, source, target, parallelism):
    schema = make_schema(source, target, ITEMS)
    name = f"window{parallelism}"
    file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
    cluster.apply([one_way(name, schema, ["items"], parallelism=parallelism, batch_size=1,
                           batch_timeout_ms=1, start={"file": file, "pos": int(pos)})])
    for n in range(200):  # a backlog of single-row transactions before the channel starts
        source.execute(f"INSERT INTO `{schema}`.items (id, name) VALUES ({n}, 'r{n}')")
    cluster.set_status(name, "START")
    wait_equal(source, target, schema, ["items"], timeout_s=120)
    state = wait_for(lambda: (s := cluster.pipeline_state(name)).process_id >= 200 and s, 10,
                     "the stats of the last batch")
    peak = state.window_peak
    assert 1 <= peak <= parallelism
    if parallelism > 1:
        assert peak > 1, "batches never overlapped in E/T"
    cluster.set_status(name, "STOP")


def test_pause_and_start_through_the_cli(cluster, source, target, capsys):
    """Paused and started again from its cursor, the keyless, unique-swap and sum tables of
    the same pipeline written all along: equal as multisets, promises kept."""
    schema = make_schema(source, target, ITEMS)
    shapes = Shapes(cluster.sandbox, source, target, seed=79)
    cluster.apply([beside(one_way("pausing", schema, ["items"]), shapes.schema)])
    cluster.set_status("pausing", "START")
    cluster.wait_running("pausing")
    shapes.start()
    try:
        pause_and_start(cluster, source, target, schema)
        shapes.keep_on()
        shapes.finish(source)
    finally:
        shapes.stop()
    # nodes publish their stats every half second: the load may land before the next one
    wait_for(lambda: cluster.pipeline_state("pausing").state == "running", 5,
             "the pipeline's stats to say it runs")
    capsys.readouterr()
    assert cli.main(["--manager", cluster.manager_address, "status"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("pausing.forward"))
    assert "running" in line and "binlog." in line
    cluster.set_status("pausing", "STOP")


def pause_and_start(cluster, source, target, schema: str) -> None:
    address = cluster.manager_address
    assert cli.main(["--manager", address, "channel", "pause", "pausing"]) == 0
    wait_for(lambda: cluster.pipeline_state("pausing").state == "not running", 15,
             "the pipeline to stop within seconds of the pause")
    wait_for(lambda: "event=pipeline_stopped pipeline=pausing.forward" in
             cluster.nodes[1].output(), 15, "the runner to end")
    source.execute(f"INSERT INTO `{schema}`.items (id, name) VALUES (1, 'paused')")
    assert target.table(schema, "items") == []
    assert cli.main(["--manager", address, "channel", "start", "pausing"]) == 0
    wait_equal(source, target, schema, ["items"], timeout_s=30)
