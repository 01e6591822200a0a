"""Server settings setl must not inherit, on real servers: a target whose global
``foreign_key_checks`` is 0 (cascades are the target's to redo), a source whose global
``sql_select_limit`` is small (snapshot chunks and verify read every row), a target without
``local_infile`` (copies and upserts go as statements) and a target whose ``wait_timeout``
is shorter than a quiet period (the next batch goes on a new connection, no restart).

Each test changes a global setting of the shared sandbox's servers and puts it back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from manager import cli
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside


@contextmanager
def global_setting(db: Database, name: str, value: Any) -> Iterator[None]:
    [(old,)] = db.rows(f"SELECT @@GLOBAL.{name}")
    db.execute(f"SET GLOBAL {name} = %s", (value,))
    try:
        yield
    finally:
        db.execute(f"SET GLOBAL {name} = %s", (old,))


def node_log(cluster: Cluster) -> str:
    return cluster.nodes[1].output()


def test_cascades_fire_on_a_target_whose_default_is_no_foreign_key_checks(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Rows a cascade removes or changes are not in the binlog: the target's own foreign
    keys redo them. A target server with ``foreign_key_checks = 0`` as its default kept the
    deleted parent's child and the old parent key silently; Load's session turns the checks
    on."""
    schema = make_schema(
        source, target, "CREATE TABLE `{schema}`.parent (id INT PRIMARY KEY)",
        "CREATE TABLE `{schema}`.child (id INT PRIMARY KEY, p INT NOT NULL, FOREIGN KEY (p) "
        "REFERENCES `{schema}`.parent (id) ON DELETE CASCADE ON UPDATE CASCADE)")
    with global_setting(target, "foreign_key_checks", 0):
        cluster.apply([one_way("fkc", schema, ["parent", "child"])])
        cluster.set_status("fkc", "START")
        cluster.wait_running("fkc")
        source.script(f"INSERT INTO `{schema}`.parent VALUES (1), (2)",
                      f"INSERT INTO `{schema}`.child VALUES (10, 1), (20, 2)")
        wait_for(lambda: len(target.table(schema, "child")) == 2, 60, "the first rows")
        source.script(f"DELETE FROM `{schema}`.parent WHERE id = 1",
                      f"UPDATE `{schema}`.parent SET id = 5 WHERE id = 2",
                      f"INSERT INTO `{schema}`.parent VALUES (3)")
        # the last transaction is on the target: every one before it is too
        wait_for(lambda: target.table(schema, "parent") == [(3,), (5,)], 60, "the last one")
        assert source.table(schema, "child") == [(20, 5)]
        assert target.table(schema, "child") == [(20, 5)]
    cluster.set_status("fkc", "STOP")


def verify(cluster: Cluster, capsys: pytest.CaptureFixture[str], channel: str,
           table: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = cli.main(["--manager", cluster.manager_address, "-o", "json", "verify", channel,
                     "--table", table])
    return code, json.loads(capsys.readouterr().out)


def test_a_source_whose_default_sql_select_limit_is_small_is_copied_and_verified_whole(
        cluster: Cluster, source: Database, target: Database,
        capsys: pytest.CaptureFixture[str]) -> None:
    """With a global ``sql_select_limit`` of 50, a 1000-row table copied 100 rows (50 a
    chunk), its copy said done, and verify, reading 50 rows a side, said equal. Every
    session of setl reads every row."""
    schema = make_schema(
        source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(40))",
        "CREATE TABLE `{schema}`.docs (id INT PRIMARY KEY, doc JSON, g GEOMETRY, "
        "e ENUM('a','b'), s SET('x','y'))")
    source.execute(f"USE `{schema}`")  # (seq_1_to_N: MariaDB's sequence engine)
    source.execute(f"INSERT INTO `{schema}`.items SELECT seq, CONCAT('i', seq) "
                   "FROM seq_1_to_1000")
    source.execute(f"INSERT INTO `{schema}`.docs SELECT seq, CONCAT('{{\"a\": ', seq, '}}'), "
                   "POINT(seq, seq), 'a', 'x,y' FROM seq_1_to_1000")
    with global_setting(source, "sql_select_limit", 50):
        cluster.apply([one_way("ssl", schema, ["items", "docs"], start="snapshot",
                               snapshot_chunk_size=500)])
        cluster.set_status("ssl", "START")
        cluster.wait_running("ssl")

        def done() -> bool:
            copies = list(cluster.pipeline_state("ssl").snapshots)
            return len(copies) == 2 and all(copy.state == "done" for copy in copies)
        wait_for(done, 120, "every copy done")
        for table in ("items", "docs"):  # a copy done is on the target
            assert len(source.table(schema, table)) == 1000
            assert target.table(schema, table) == source.table(schema, table), table
        code, report = verify(cluster, capsys, "ssl", f"{schema}.docs")
        [checked] = report["reports"][0]["tables"]
        assert (code, checked["rows"], checked.get("differences")) == (0, 1000, None), report
        target.execute(f"DELETE FROM `{schema}`.docs WHERE id = 777")  # a row the limit hid
        code, report = verify(cluster, capsys, "ssl", f"{schema}.docs")
        [checked] = report["reports"][0]["tables"]
        assert code == 1 and [(d["key"], d["kind"]) for d in checked["differences"]] == \
            [("[777]", "missing")], report
    cluster.set_status("ssl", "STOP")


def test_a_target_without_local_infile_takes_copies_and_upserts_as_statements(
        cluster: Cluster, source: Database, target: Database) -> None:
    """``local_infile = OFF`` (MySQL 8's default): every LOAD DATA was refused, and six
    failures later the channel paused with nothing copied. Copies go as multi-row REPLACE
    statements, runs of inserts and bulk upserts as INSERT … ON DUPLICATE KEY UPDATE."""
    schema = make_schema(
        source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(40))",
        "CREATE TABLE `{schema}`.sl (id INT PRIMARY KEY, slot INT NOT NULL, UNIQUE KEY u (slot))")
    tables = ["items", "sl"]  # (a keyless table takes no start: snapshot)
    source.execute(f"USE `{schema}`")
    source.execute(f"INSERT INTO `{schema}`.items SELECT seq, CONCAT('i', seq) "
                   "FROM seq_1_to_3000")
    source.execute(f"INSERT INTO `{schema}`.sl SELECT seq, seq FROM seq_1_to_20")
    with global_setting(target, "local_infile", 0):
        cluster.apply([one_way("lif", schema, tables, start="snapshot",
                               snapshot_chunk_size=500)])
        cluster.set_status("lif", "START")
        cluster.wait_running("lif")
        source.execute(f"INSERT INTO `{schema}`.items SELECT seq, CONCAT('n', seq) "
                       "FROM seq_5001_to_9000")  # a run of inserts
        source.execute(f"UPDATE `{schema}`.items SET name = CONCAT(name, '+') "
                       "WHERE id <= 1500 OR id > 8000")  # merged upserts of many rows
        source.script(f"UPDATE `{schema}`.sl SET slot = -1 WHERE id = 4",  # a swap, by a free slot
                      f"UPDATE `{schema}`.sl SET slot = 4 WHERE id = 9",
                      f"UPDATE `{schema}`.sl SET slot = 9 WHERE id = 4")
        wait_equal(source, target, schema, tables, 120)
        # (the copies' state is published after their last window loads)
        wait_for(lambda: [copy.state for copy in cluster.pipeline_state("lif").snapshots]
                 == ["done"] * 2, 60, "both copies done")
    log = node_log(cluster)
    assert "event=pipeline_failed pipeline=lif.forward" not in log
    assert cluster.channel_status("lif") == "START"
    cluster.set_status("lif", "STOP")


def test_a_batch_after_the_targets_wait_timeout_goes_on_a_new_connection(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A target server closes a connection idle longer than its ``wait_timeout``: the first
    batch after a quiet period failed ("server has gone away") and restarted the pipeline.
    Load tries it once more on a new connection. The workload's tables (shapes.py) go
    through the same pipeline: written before each quiet period, and the first batch after
    it is theirs (on the new connection)."""
    schema = make_schema(
        source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(40))",
        "CREATE TABLE `{schema}`.bag (n INT, s VARCHAR(10))")
    shapes = Shapes(cluster.sandbox, source, target, seed=53)
    pipeline = "wto.forward"

    def load_connections() -> int:
        [(count,)] = target.rows(
            "SELECT COUNT(*) FROM retl.retl_owner o JOIN information_schema.PROCESSLIST p ON "
            "p.ID = o.connection_id WHERE o.pipeline_id = %s", (pipeline,))
        return int(count)

    with global_setting(target, "wait_timeout", 1):
        cluster.apply([beside(one_way("wto", schema, ["items", "bag"]), shapes.schema)])
        cluster.set_status("wto", "START")
        cluster.wait_running("wto")
        try:
            for round_ in range(2):
                shapes.start()  # (after a quiet period: the first batch is the workload's)
                shapes.keep_on(60)
                source.script(f"INSERT INTO `{schema}`.bag VALUES ({round_}, 'x'), "
                              f"({round_}, 'x')",
                              f"INSERT INTO `{schema}`.items VALUES ({round_}, 'x')")
                shapes.settle(source)  # writes stop; the target holds the workload's rows
                wait_for(lambda r=round_: len(target.table(schema, "items")) == r + 1, 60,
                         f"round {round_} on the target")
                # the quiet period: the server closes Load's connection (wait_timeout 1 s)
                wait_for(lambda: load_connections() == 0, 60,
                         "the target to close Load's connection")
            before = shapes.transactions
            shapes.start()
            source.execute(f"INSERT INTO `{schema}`.items VALUES (9, 'last')")
            shapes.keep_on(60)
            wait_for(lambda: len(target.table(schema, "items")) == 3, 60, "the last row")
            shapes.finish(source)  # every table of the workload equal, as multisets
            assert shapes.transactions >= before + 60
        finally:
            shapes.stop()
    wait_equal(source, target, schema, ["items", "bag"])
    log = node_log(cluster)
    assert f"event=load_reconnect pipeline={pipeline}" in log
    assert f"event=pipeline_failed pipeline={pipeline}" not in log
    assert log.count(f"event=pipeline_started pipeline={pipeline}") == 1
    cluster.set_status("wto", "STOP")
