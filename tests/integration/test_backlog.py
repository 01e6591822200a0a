"""A backlog of transactions on tables a pipeline does not replicate (a busy neighbour on the
same source) is crossed: the position moves through it in bounded batches, the paired rows
behind it arrive, and a node killed in the middle of the stretch resumes inside it."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from kazoo.client import KazooClient

from node.cursor import Cursor
from node.select.selector import MAX_TRANSACTIONS
from shared.zk import ZkPaths
from tests.devcluster import Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes
from tests.integration.shapes import channel as shapes_channel

ITEMS = "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(40))"
STARTED = re.compile(r"event=pipeline_started pipeline=stretch\.forward position=(\S+):(\d+)")


def noisy_neighbour(source: Database) -> str:
    """A schema on the source only, with a procedure writing N one-row transactions."""
    schema = f"noisy_{uuid.uuid4().hex[:8]}"
    source.script(
        f"CREATE DATABASE `{schema}`",
        f"CREATE TABLE `{schema}`.t (id INT AUTO_INCREMENT PRIMARY KEY, k INT, c CHAR(60))",
        f"CREATE PROCEDURE `{schema}`.fill(n INT) BEGIN DECLARE i INT DEFAULT 0; "
        f"WHILE i < n DO INSERT INTO `{schema}`.t (k, c) VALUES (i, 'noise'); SET i = i + 1; "
        "END WHILE; END")
    return schema


def master_position(source: Database) -> tuple[str, int]:
    file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
    return file, int(pos)


def target_position(target: Database, pipeline_id: str) -> tuple[str, int]:
    rows = target.rows("SELECT binlog_file, binlog_pos FROM retl.retl_position "
                       "WHERE pipeline_id = %s", (pipeline_id,))
    return (rows[0][0], int(rows[0][1])) if rows else ("", 0)


def rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status)[1])  # type: ignore[index]


def channel_from_here(cluster, source, target, name: str
                      ) -> tuple[str, str, tuple[str, int]]:
    """A channel on a new table starting at the source's position now, and a noisy
    neighbour schema beside it: (schema, neighbour, start)."""
    schema = make_schema(source, target, ITEMS)
    noisy = noisy_neighbour(source)
    start = master_position(source)
    cluster.apply([one_way(name, schema, ["items"], start={"file": start[0], "pos": start[1]})])
    return schema, noisy, start


def test_a_backlog_on_tables_not_replicated_is_crossed(cluster, source, target):
    schema, noisy, _ = channel_from_here(cluster, source, target, "crossing")
    cluster.set_status("crossing", "START")  # Spark up before the memory baseline
    cluster.wait_running("crossing")
    cluster.set_status("crossing", "STOP")
    wait_for(lambda: cluster.pipeline_state("crossing").state == "not running", 30,
             "the pipeline to stop")

    backlog = 60_000
    source.execute(f"CALL `{noisy}`.fill({backlog})")
    crossed = master_position(source)
    for n in range(20):
        source.execute(f"INSERT INTO `{schema}`.items VALUES ({n}, 'behind the backlog {n}')")
    node = cluster.nodes[1]
    before = rss_kib(node.pid)
    peak = before

    def arrived() -> bool:
        nonlocal peak
        peak = max(peak, rss_kib(node.pid))
        return len(target.table(schema, "items")) == 20

    cluster.set_status("crossing", "START")
    wait_for(arrived, 120, "the rows behind the backlog")
    wait_equal(source, target, schema, ["items"])
    assert target_position(target, "crossing.forward") >= crossed
    # nodes publish their stats every half second
    state = wait_for(lambda: (s := cluster.pipeline_state("crossing")).position.pos and
                     (s.position.file, s.position.pos) >= crossed and s, 10, "the pipeline's stats")
    # the stretch went through in bounded batches, each of them loaded
    assert state.process_id >= backlog // MAX_TRANSACTIONS
    assert (peak - before) < 200 * 1024, f"node RSS grew {(peak - before) // 1024} MiB"
    cluster.set_status("crossing", "STOP")


def test_kill_9_in_the_middle_of_the_stretch_resumes_inside_it(cluster, source, target):
    # the keyless, unique-swap and sum tables stream through the kill beside it
    shapes = Shapes(cluster.sandbox, source, target, seed=41)
    cluster.apply([shapes_channel("stretch-shapes", shapes.schema)])
    cluster.set_status("stretch-shapes", "START")
    cluster.wait_running("stretch-shapes")
    shapes.start()
    try:
        kill_in_the_stretch(cluster, source, target)
        shapes.finish(source)
    finally:
        shapes.stop()
        cluster.set_status("stretch-shapes", "STOP")


def kill_in_the_stretch(cluster, source, target) -> None:
    schema, noisy, start = channel_from_here(cluster, source, target, "stretch")
    source.execute(f"INSERT INTO `{schema}`.items VALUES (1, 'before the backlog')")
    source.execute(f"CALL `{noisy}`.fill(100000)")
    crossed = master_position(source)
    source.execute(f"INSERT INTO `{schema}`.items VALUES (2, 'behind the backlog')")
    cluster.set_status("stretch", "START")
    inside = wait_for(lambda: start < (p := target_position(target, "stretch.forward"))
                      < crossed and p, 120, "the position inside the stretch", 0.02)
    # the cursor a restart begins from (ZooKeeper's, a coalesced hint of the target's
    # position row) published inside the stretch
    zk = KazooClient(hosts=cluster.sandbox.servers()["zookeeper"].address)
    zk.start(timeout=10)
    try:
        path = ZkPaths(cluster.root).cursor("stretch.forward")

        def published() -> tuple[str, int] | None:
            data = zk.get(path)[0] if zk.exists(path) else b""
            at = Cursor.from_json(data).position if data else None
            found = (at.file, at.pos) if at else ("", 0)
            return found if start < found < crossed else None

        inside = wait_for(published, 60, "a cursor inside the stretch", interval_s=0.02)
    finally:
        zk.stop()
        zk.close()
    cluster.nodes[1].kill()  # no clean-up, in the middle of the stretch
    assert target_position(target, "stretch.forward") < crossed
    restarted = cluster.start_node(1)
    wait_equal(source, target, schema, ["items"], timeout_s=120)
    assert target_position(target, "stretch.forward") >= crossed
    starts = [(file, int(pos)) for file, pos in STARTED.findall(restarted.output())]
    assert len(starts) >= 2, "the restarted node never started the pipeline"
    # the restart began inside the stretch, not at its start
    assert starts[-1] >= inside > start
    cluster.set_status("stretch", "STOP")


BULK = "CREATE TABLE `{schema}`.bulk (id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(60))"


def test_kill_9_in_a_bulk_catch_up_loads_every_row_once(cluster, source, target):
    """A backlog of multi-row inserts (the runs whose LOAD DATA lines the compiled build
    reads straight from the events' bytes: integers, ASCII and UTF-8 text, NULLs, a tab to
    escape) crossed with the node killed in the middle, the keyless, unique-swap and sum
    tables streaming beside it: every row once, in every table, as multisets."""
    shapes = Shapes(cluster.sandbox, source, target, seed=43)
    cluster.apply([shapes_channel("bulk-shapes", shapes.schema)])
    cluster.set_status("bulk-shapes", "START")
    cluster.wait_running("bulk-shapes")
    shapes.start()
    try:
        schema = make_schema(source, target, BULK)
        start = master_position(source)
        cluster.apply([one_way("bulk", schema, ["bulk"], batch_size=5000,
                               start={"file": start[0], "pos": start[1]})])
        for first in range(0, 200_000, 1000):  # 200 transactions of 1,000 rows
            source.execute(f"INSERT INTO `{schema}`.bulk VALUES " + ", ".join(
                f"({n}, {n * 7 - 700_000}, " +
                ("NULL)" if n % 13 == 0 else f"'row {n} café\\t{n % 97}')")
                for n in range(first, first + 1000)))
        crossed = master_position(source)
        cluster.set_status("bulk", "START")
        wait_for(lambda: start < target_position(target, "bulk.forward") < crossed, 120,
                 "the position inside the bulk backlog", 0.02)
        cluster.nodes[1].kill()  # no clean-up, in the middle of the backlog
        assert target_position(target, "bulk.forward") < crossed
        cluster.start_node(1)
        wait_equal(source, target, schema, ["bulk"], timeout_s=180)
        assert target.rows(f"SELECT COUNT(*) FROM `{schema}`.bulk")[0][0] == 200_000
        assert target_position(target, "bulk.forward") >= crossed
        shapes.finish(source)
    finally:
        shapes.stop()
        for name in ("bulk", "bulk-shapes"):
            cluster.set_status(name, "STOP")
