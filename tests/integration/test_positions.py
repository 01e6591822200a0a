"""Where a pipeline starts: ``start: latest`` is the moment of ``setl channel start``, fixed
by the manager before the command returns, so a row committed right after it is replicated
however long a node takes to get going (here: no node at all for a while)."""

from __future__ import annotations

import pytest

from manager import cli
from node import start
from node.cursor import CursorStore
from shared import positions
from shared.model import BinlogPosition
from shared.positions import Cursor
from shared.zk import ZkPaths
from tests.devcluster import (
    Cluster,
    Database,
    make_schema,
    one_way,
    wait_equal,
    wait_for,
)
from tests.integration.shapes import Shapes, beside, channel
from tests.unit.test_etl import pipeline


def test_rows_written_right_after_start_arrive_when_no_node_runs_yet(sandbox, tmp_path,
                                                                    zk_client, capsys):
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, "
                         "note VARBINARY(40))", "CREATE TABLE `{schema}`.kl (a INT, b TEXT)")
    cluster = Cluster(sandbox, tmp_path, "startfix")
    t = f"`{schema}`"
    try:
        cluster.start_manager()
        source.execute(f"INSERT INTO {t}.items VALUES (0, 'before the start')")
        cluster.apply([one_way("startfix", schema, ["items", "kl"])])
        before = source.rows("SHOW MASTER STATUS")[0][:2]
        setl = ["--manager", cluster.manager_address, "channel"]
        assert cli.main([*setl, "start", "startfix"]) == 0
        assert f"startfix.forward: from {before[0]}:{before[1]}" in capsys.readouterr().out
        for n in range(1, 201):  # at once, while no node runs
            source.execute("BEGIN")
            source.execute(f"INSERT INTO {t}.items VALUES ({n}, UNHEX(MD5({n})))")
            source.execute(f"INSERT INTO {t}.kl VALUES ({n % 3}, 'dup'), ({n % 3}, 'dup')")
            source.execute("COMMIT")
        stored = Cursor.from_json(zk_client.get(ZkPaths(cluster.root).cursor(
            "startfix.forward"))[0])
        assert (stored.position.file, stored.position.pos) == (before[0], int(before[1]))
        assert cli.main([*setl, "start", "startfix", "--wait", "--timeout", "1"]) == 1
        assert "pipeline startfix.forward is not running and no node runs it: no live node is " \
            "a candidate" in capsys.readouterr().err
        node = cluster.start_node(1)
        assert cli.main([*setl, "start", "startfix", "--wait", "--timeout", "90"]) == 0
        assert cluster.pipeline_state("startfix").state == "running"
        target.execute(f"INSERT INTO {t}.items VALUES (0, 'before the start')")
        wait_equal(source, target, schema, ["items", "kl"])
        hexed = f"SELECT id, HEX(note) FROM {t}.items ORDER BY id"
        assert source.rows(hexed) == target.rows(hexed)
        assert "event=pipeline_start_fixed pipeline=startfix.forward" in \
            cluster.manager.output() if cluster.manager else False
        wait_for(lambda: "event=pipeline_started pipeline=startfix.forward" in node.output(), 10,
                 "the node's start line")
        assert cli.main([*setl, "stop", "startfix", "--wait", "--timeout", "60"]) == 0
        assert cluster.pipeline_state("startfix").owner_node == 0
    finally:
        cluster.stop()
        source.close()
        target.close()


def test_a_pipeline_added_to_a_started_channel_starts_at_the_apply(sandbox, tmp_path,
                                                                    zk_client):
    """A renamed pipeline is a new one: its 'start: latest' is the apply that brought it,
    fixed by the manager before the apply returns, not the moment a node gets to it. The
    keyless, unique-swap and sum tables in it are written from the apply on, while no node
    runs and as one starts: equal as multisets, promises kept. (The old one wrote another
    table: one that takes over what the old one wrote is refused while the channel runs,
    test_handover.)"""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.kl (a INT, b TEXT)",
                         "CREATE TABLE `{schema}`.other (id INT PRIMARY KEY)")
    shapes = Shapes(sandbox, source, target, seed=71)
    cluster = Cluster(sandbox, tmp_path, "added")
    t = f"`{schema}`.kl"
    try:
        cluster.start_manager()
        first = one_way("added", schema, ["other"])
        cluster.apply([first])
        cluster.set_status("added", "START")
        renamed = beside(one_way("added", schema, ["kl"]), shapes.schema)
        renamed["pipelines"][0]["name"] = "again"
        before = source.rows("SHOW MASTER STATUS")[0][:2]
        cluster.apply([renamed])
        stored = Cursor.from_json(zk_client.get(ZkPaths(cluster.root).cursor("added.again"))[0])
        assert (stored.position.file, stored.position.pos) == (before[0], int(before[1]))
        shapes.start()
        source.script(*(f"INSERT INTO {t} VALUES ({n % 2}, 'dup'), ({n % 2}, 'dup')"
                        for n in range(50)))  # while no node runs
        cluster.start_node(1)
        wait_equal(source, target, schema, ["kl"])
        shapes.keep_on()
        shapes.finish(source)
    finally:
        shapes.stop()
        cluster.stop()
        source.close()
        target.close()


def test_a_runners_first_cursor_never_goes_over_the_start_the_manager_fixed(
        zk_client, zk_root, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipeline added to a started channel: its runner found no cursor, then the manager
    fixed the start at the apply, then the runner read the source's later position. The
    manager's start stands (the runner's would skip a row written between the two)."""
    cursors = CursorStore(zk_client, ZkPaths(zk_root), "added.forward")
    fixed = Cursor(BinlogPosition("binlog.000007", 1000), first=True, run="manager")
    later = Cursor(BinlogPosition("binlog.000007", 1400), first=True, run="runner")
    positions.store_first(zk_client, cursors.path, fixed)  # the manager's, after the read
    monkeypatch.setattr(cursors, "load", lambda: None)  # what the runner read before it
    monkeypatch.setattr(positions, "first_cursor", lambda pipeline, source: later)
    found = start.first_or_stored(cursors, None, pipeline("{source: s.t, target: s.t}"),
                                  None, None)
    assert (found.position, found.run, found.first) == (fixed.position, "manager", False)
    stored = positions.load(zk_client, cursors.path)
    assert (stored.position, stored.run) == (fixed.position, "manager")


def test_a_lost_connection_is_no_answer_without_gtids(sandbox, source) -> None:
    """A position's GTID state read on a connection that is gone raises: '' (what MySQL
    answers) would give the position no GTIDs and a later switch by GTID nothing to go by."""
    import pymysql

    from shared.endpoint import connect
    from shared.model import BinlogPosition
    from shared.positions import gtid_at, server_identity
    from tests.integration.test_lookup import source_of

    with connect(source_of(sandbox)) as conn, conn.cursor() as cursor:
        file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
        at = BinlogPosition(str(file), int(pos))
        assert gtid_at(cursor, at) and "@" in server_identity(cursor)  # MariaDB answers
        source.execute(f"KILL {conn.thread_id()}")
        with pytest.raises(pymysql.MySQLError):
            gtid_at(cursor, at)


@pytest.mark.timeout(400)
def test_a_gtid_start_refused_by_one_target_writes_that_target_on_the_retry(sandbox, tmp_path):
    """``start: {gtid}``, two target servers: the first batch commits on one and the other
    refuses it once (a trigger, while a flag row is there). The retry resumes from the
    first target's row, and must still write the batch to the second, which had nothing:
    its keyless table, duplicate rows and all, ends as the source's, and so do the keyless,
    unique-swap and sum tables streaming to both through the refusal and the retries."""
    sandbox.up(second_target=True)
    source, target, target2 = (Database(sandbox, n) for n in ("source", "target", "target2"))
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.kl (a INT, b VARCHAR(20))")
    kl = f"`{schema}`.kl"
    target2.script(f"CREATE DATABASE `{schema}`", f"CREATE TABLE {kl} (a INT, b VARCHAR(20))",
                   f"CREATE TABLE `{schema}`.flag (x INT)",
                   f"INSERT INTO `{schema}`.flag VALUES (1)",
                   f"CREATE TRIGGER `{schema}`.refuse BEFORE INSERT ON {kl} FOR EACH ROW "
                   f"IF (SELECT COUNT(*) FROM `{schema}`.flag) > 0 THEN "
                   "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused for now'; END IF")
    servers = sandbox.servers()
    sources = [{"name": n, "host": "127.0.0.1", "port": servers[n].port, "user": "setl",
                "password": f"file:{sandbox.secret_file}"} for n in ("source", "target", "target2")]
    pairs = [{"source": f"{schema}.kl", "fan_out": True, "target": {
        "datasource": name, "namespace": schema, "table": "kl"}} for name in ("target", "target2")]
    shapes = Shapes(sandbox, source, target, targets=("target", "target2"), seed=37, kinds=3)
    pairs += channel("gs", shapes.schema, ("target", "target2"))["pipelines"][0]["pairs"]
    [(gtid,)] = source.rows("SELECT @@gtid_binlog_pos")
    cluster = Cluster(sandbox, tmp_path, "gtidstart")
    try:
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([{"name": "gs", "pipelines": [{
            "name": "forward", "source": "source", "target": "target", "pairs": pairs,
            "start": {"gtid": gtid}, "batch_timeout_ms": 200, "max_retries": 50,
            "fire_target_triggers": True}]}], sources)  # the refusing trigger fires
        source.script("BEGIN", f"INSERT INTO {kl} VALUES (1, 'first'), (1, 'first')", "COMMIT")
        shapes.start()
        cluster.set_status("gs", "START")
        wait_for(lambda: "refused for now" in cluster.pipeline_state("gs").last_error, 90,
                 "the second target's refusal")
        assert sorted(target.table(schema, "kl")) == [(1, "first"), (1, "first")]
        target2.execute(f"DELETE FROM `{schema}`.flag")  # the refusal is over
        source.execute(f"INSERT INTO {kl} VALUES (2, 'after the retry')")
        wait_for(lambda: (2, "after the retry") in target2.table(schema, "kl"), 120,
                 "the row after the retry on the second target")
        for copy in (target, target2):
            assert sorted(copy.table(schema, "kl")) == sorted(source.table(schema, "kl"))
        shapes.finish(source)
    finally:
        shapes.stop()
        cluster.stop()
        for db in (source, target, target2):
            db.close()


@pytest.mark.timeout(400)
def test_binlog_files_of_another_checksum_setting_are_read_by_their_own(sandbox, tmp_path):
    """``binlog_checksum`` changed on the source, while the pipeline is stopped (it starts
    again reading the rest of a file of the old setting under the new one) and while it runs
    (a new file of another setting than its stream's): every row arrives once, a keyless
    table's duplicates included. Read by the stream's setting, the rotate at the end of a
    file without checksums gave a file name cut short, and every later batch was skipped as
    already applied. The keyless, unique-swap and sum tables stream through every change."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.kl (a INT, b VARCHAR(20))",
                         "CREATE TABLE `{schema}`.other (id INT PRIMARY KEY)")
    kl = f"`{schema}`.kl"
    cluster = Cluster(sandbox, tmp_path, "checksums")
    shapes = Shapes(sandbox, source, target, seed=31)

    def rows(a: int, note: str) -> None:
        source.execute(f"INSERT INTO {kl} VALUES ({a}, '{note}'), ({a}, '{note}')")

    def arrived(a: int) -> None:
        wait_for(lambda: sum(row[0] == a for row in target.table(schema, "kl")) == 2, 90,
                 f"rows {a} on the target")

    def restart(checksum: str, a: int) -> None:
        cluster.set_status("ck", "STOP")
        wait_for(lambda: cluster.pipeline_state("ck").state == "not running", 60, "stopped")
        rows(a, "before the change")
        source.execute(f"INSERT INTO `{schema}`.other VALUES ({a})")  # not replicated
        source.execute(f"SET GLOBAL binlog_checksum = {checksum}")  # a new file
        rows(a + 1, "after the change")
        cluster.set_status("ck", "START")
        arrived(a + 1)

    try:
        source.execute("SET GLOBAL binlog_checksum = NONE")
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([beside(one_way("ck", schema, ["kl"], batch_timeout_ms=100),
                              shapes.schema)])
        cluster.set_status("ck", "START")
        cluster.wait_running("ck")
        shapes.start()
        rows(1, "none")
        arrived(1)
        restart("CRC32", 2)  # the rest of a NONE file read under CRC32
        restart("NONE", 4)  # the rest of a CRC32 file read without
        source.execute("SET GLOBAL binlog_checksum = CRC32")  # while it runs
        rows(6, "crc, running")
        arrived(6)
        rows(7, "last")
        arrived(7)
        shapes.finish(source)
        assert sorted(target.table(schema, "kl")) == sorted(source.table(schema, "kl"))
        cluster.wait_running("ck")
        assert cluster.pipeline_state("ck").last_error == ""
    finally:
        shapes.stop()
        source.execute("SET GLOBAL binlog_checksum = CRC32")
        cluster.stop()
        source.close()
        target.close()


def test_a_configured_start_is_named_as_the_servers_and_a_bare_one_never_taken_for_it(
        sandbox, source) -> None:
    """A ``start: {file, pos}`` was stored without its server or GTIDs, and any server whose
    binlog had an event boundary at that file and offset took it for its own: a switch
    before the first batch read another server's unrelated offset. The start is named when
    it is fixed; a position without GTIDs is never named after the server that reads it."""
    from node.held import check_held
    from shared.errors import PositionLostError
    from tests.integration.test_lookup import source_of

    file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
    defined = pipeline("{source: s.t, target: s2.t}",
                       options=f"start: {{file: {file}, pos: {int(pos)}}}")
    fixed = positions.first_cursor(defined, source_of(sandbox)).position
    [(state,)] = source.rows("SELECT BINLOG_GTID_POS(%s, %s)", (file, int(pos)))
    assert (fixed.file, fixed.pos, fixed.gtid) == (file, int(pos), state)
    assert fixed.server and "@" in fixed.server
    bare = Cursor(BinlogPosition(str(file), int(pos)))
    with pytest.raises(PositionLostError, match="it is another server's position"):
        check_held("p.forward", source_of(sandbox), bare, {})
    named, _, _ = check_held("p.forward", source_of(sandbox), Cursor(fixed), {})
    assert named.answers


def test_a_start_inside_a_transaction_is_refused_and_its_start_taken(sandbox, source, target):
    """On the real server: a file/pos at the Table_map of a transaction (what mariadb-binlog
    shows as '# at N') would load only its tail; refused, naming where the next one begins.
    Its GTID event, the file's first event and the file's end are taken. (MariaDB's
    BINLOG_GTID_POS answers a GTID state at the Table_map too: it cannot tell.)"""
    from shared.errors import ConflictError
    from tests.integration.test_lookup import source_of

    schema = make_schema(source, target, "CREATE TABLE `{schema}`.halves (a INT)")
    file, before = source.rows("SHOW MASTER STATUS")[0][:2]
    source.execute(f"INSERT INTO `{schema}`.halves VALUES (1), (2)")
    source.execute(f"INSERT INTO `{schema}`.halves VALUES (3)")
    end = int(source.rows("SHOW MASTER STATUS")[0][1])
    events = source.rows(f"SHOW BINLOG EVENTS IN '{file}' FROM {before}")
    opens = [int(event[1]) for event in events if event[2] == "Gtid"]
    table_map = next(int(event[1]) for event in events if event[2] == "Table_map")
    at = BinlogPosition(str(file), table_map)
    assert source.rows(f"SELECT BINLOG_GTID_POS('{file}', {table_map})")[0][0]  # no help
    with pytest.raises(ConflictError) as refused:
        positions.position_at(source_of(sandbox), str(file), table_map)
    said = str(refused.value)
    assert f"{at} is inside a transaction (its event there is Table_map)" in said, said
    assert f"The next transaction begins at {file}:{opens[1]}." in said, said
    with pytest.raises(ConflictError, match=f"no event begins at {file}:{table_map + 1}"):
        positions.position_at(source_of(sandbox), str(file), table_map + 1)
    for pos in (opens[0], opens[1], 4, end):
        found = positions.position_at(source_of(sandbox), str(file), pos)
        assert (found.file, found.pos) == (file, pos) and found.server
