"""A quiet pipeline across binlog files the source rotated and purged, on real servers.

A pipeline with no transaction on its source keeps its position rows where they are while
the source rotates (FLUSH BINARY LOGS, logrotate, a restart); once the old files are purged
(PURGE BINARY LOGS, binlog_expire_logs_seconds), a restart must not take that for lost
changes and tell the user to copy every table again. Two ways keep it going: Select hands
a position at each new file's start, so an idle pipeline's rows follow the files; and a
start in a purged file goes on at the oldest kept file when that file begins at the very
GTID state of the position (nothing written between). A transaction in the purged files
is a real loss: that still stops.

The keyless, unique-swap and sum tables ride in the same pipeline, written before and after
the quiet stretch, and are compared as multisets.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside


@pytest.fixture
def pair(sandbox: Sandbox) -> Iterator[tuple[Database, Database]]:
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    yield source, target
    source.close()
    target.close()


def _rotate(source: Database, times: int = 3) -> str:
    for _ in range(times):
        source.execute("FLUSH BINARY LOGS")
    return str(source.rows("SHOW MASTER STATUS")[0][0])


def _purge_to(source: Database, current: str, gone: str) -> None:
    def purged() -> bool:  # a file a binlog reader (or InnoDB's checkpoint) holds is kept
        source.execute(f"PURGE BINARY LOGS TO '{current}'")
        return gone not in [row[0] for row in source.rows("SHOW BINARY LOGS")]
    wait_for(purged, 60, f"the source to purge {gone}", 0.5)


def _row(target: Database, channel: str) -> tuple[str, int]:
    rows = target.rows("SELECT binlog_file, binlog_pos FROM retl.retl_position WHERE "
                       "pipeline_id = %s", (f"{channel}.forward",))
    return (str(rows[0][0]), int(rows[0][1])) if rows else ("", 0)


def _started(cluster: Cluster, shapes: Shapes, source: Database, target: Database,
             name: str) -> tuple[str, str]:
    """A running channel of a keyless ``ledger`` beside the workload's tables, written
    and then caught up: quiet from here."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.ledger (id INT, "
                         "counter INT NOT NULL)")
    cluster.start_manager()
    cluster.start_node(1)
    cluster.apply([beside(one_way(name, schema, ["ledger"], batch_timeout_ms=20),
                          shapes.schema)])
    cluster.set_status(name, "START")
    cluster.wait_running(name)
    shapes.start()
    source.execute(f"INSERT INTO `{schema}`.ledger VALUES (1, 0), (1, 0)")
    shapes.keep_on(60)
    shapes.settle(source)
    wait_equal(source, target, schema, ["ledger"])
    return schema, f"`{schema}`.ledger"


def _goes_on(cluster: Cluster, shapes: Shapes, source: Database, target: Database,
             name: str, schema: str) -> str:
    """The restarted node loads what was written since, with the workload racing it: equal,
    running, never paused. Its log."""
    shapes.start()
    node = cluster.start_node(1)
    cluster.wait_running(name)
    shapes.keep_on(60)
    shapes.finish(source)
    wait_equal(source, target, schema, ["ledger"])
    assert cluster.channel_status(name) == "START"
    log = node.output()
    assert f"event=pipeline_paused pipeline={name}.forward" not in log, log[-3000:]
    assert "is not on the source any more" not in log
    return log


def test_an_idle_pipelines_rows_follow_rotations_and_a_purge_after_kill_9_loses_nothing(
        sandbox, pair, tmp_path):
    """The reviewer's case: rotated three times while idle, the node killed -9, the old
    files purged, a row written, the node started again."""
    source, target = pair
    shapes = Shapes(sandbox, source, target, seed=131)
    cluster = Cluster(sandbox, tmp_path, "quietrot")
    try:
        schema, t = _started(cluster, shapes, source, target, "quietrot")
        before = _row(target, "quietrot")
        current = _rotate(source)
        assert before[0] != current
        # the position rows follow into the new file without a transaction to carry them
        wait_for(lambda: _row(target, "quietrot")[0] == current, 30,
                 f"the idle pipeline's position row to move into {current}")
        cluster.nodes[1].kill()
        _purge_to(source, current, before[0])
        source.execute(f"INSERT INTO {t} VALUES (2, 0), (2, 0), (1, 0)")
        log = _goes_on(cluster, shapes, source, target, "quietrot", schema)
        assert "event=start_after_purged_quiet_files" not in log  # its rows were there
    finally:
        shapes.stop()
        cluster.stop()


def test_a_start_in_purged_files_goes_on_when_nothing_was_written_and_stops_when_lost(
        sandbox, pair, tmp_path):
    """The node stopped while the source rotates and purges (its rows cannot follow): the
    start goes on at the oldest kept file, as nothing was written between. Then a
    transaction written while it is stopped, and purged: a loss, which still pauses."""
    source, target = pair
    shapes = Shapes(sandbox, source, target, seed=137)
    cluster = Cluster(sandbox, tmp_path, "quietgap")
    try:
        schema, t = _started(cluster, shapes, source, target, "quietgap")
        before = _row(target, "quietgap")
        assert cluster.nodes[1].terminate() == 0
        current = _rotate(source)
        _purge_to(source, current, before[0])
        source.execute(f"INSERT INTO {t} VALUES (3, 0), (3, 0)")
        log = _goes_on(cluster, shapes, source, target, "quietgap", schema)
        assert f"event=start_after_purged_quiet_files pipeline=quietgap.forward " \
               f"position={before[0]}:{before[1]} start={current}:4" in log, log[-3000:]

        # a transaction in the files purged while the node is stopped: lost to it
        assert cluster.nodes[1].terminate() == 0
        at = _row(target, "quietgap")
        source.execute(f"INSERT INTO {t} VALUES (4, 0), (4, 0)")
        current = _rotate(source)
        _purge_to(source, current, at[0])
        node = cluster.start_node(1)
        wait_for(lambda: cluster.channel_status("quietgap") == "PAUSE", 90,
                 "the pipeline to pause")
        error = cluster.pipeline_state("quietgap").last_error or node.output()
        assert f"binlog file {at[0]} is not on the source any more (oldest is {current})" \
            in error, error
        assert "copy the paired tables again" in error
        assert node.output().count("event=start_after_purged_quiet_files") == 1  # the first
        assert (4, 0) not in target.table(schema, "ledger")
    finally:
        shapes.stop()
        cluster.stop()
