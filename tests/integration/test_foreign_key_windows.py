"""A snapshot of a table whose foreign key points at another of its own rows, through a
UNIQUE column that is not its key, each row at the next (a chunk's rows refer forward): the
rows a window read are the source's consistent state and go with foreign_key_checks off. A
window with no event of its own (a quiet one, after events of its batch: a writer of another
table ticking beside the copy makes them) placed them without the mark Load reads, so they
went checked and a row was refused ("Cannot add or update a child row"; a review found it:
with max_retries 0 a pause). The unit test of the places is tests/unit/test_reads.py.

The keyless, unique-swap and sum tables ride in the same pipeline, written before and after
the copy, and are compared as multisets. Not during it: the workload's transactions (one
every few milliseconds) fall inside nearly every window, and a window with an event is not
the quiet one this test is about (written during the copy, the test passed without the
fix). ``start: snapshot`` cannot take them (a keyless table cannot be copied by key: refused
at apply), so the pipeline streams from its start and the copy of ``node`` is asked for with
``setl snapshot``: its windows are placed by the same code."""

from __future__ import annotations

import threading
import time

import pytest

from manager import cli
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside

NODE = ("CREATE TABLE `{schema}`.node (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL UNIQUE, "
        "up VARCHAR(10) NULL, FOREIGN KEY (up) REFERENCES `{schema}`.node (code))")
MARKER = "CREATE TABLE `{schema}`.marker (id INT PRIMARY KEY AUTO_INCREMENT, t INT)"


@pytest.mark.parametrize("ticking", [0.008, 0.012, 0.02])
def test_a_quiet_windows_rows_go_unchecked(cluster: Cluster, source: Database,
                                           target: Database, ticking: float) -> None:
    schema, name = make_schema(source, target, NODE, MARKER), f"fkquiet-{int(ticking * 1000)}"
    shapes = Shapes(cluster.sandbox, source, target, seed=int(ticking * 1000))
    source.script("SET SESSION foreign_key_checks = 0")
    for i in range(1, 301):  # each row points forward, to the next row's code
        source.execute(f"INSERT INTO `{schema}`.node VALUES ({i}, 'c{i}', "
                       f"{'NULL' if i == 300 else repr(f'c{i + 1}')})")
    source.script("SET SESSION foreign_key_checks = 1")
    done = threading.Event()

    def tick() -> None:
        db = Database(cluster.sandbox, "source")
        try:
            while not done.is_set():
                db.execute(f"INSERT INTO `{schema}`.marker (t) VALUES (1)")
                time.sleep(ticking)
        finally:
            db.close()

    writer = threading.Thread(target=tick, daemon=True)
    try:
        cluster.apply([beside(one_way(name, schema, ["node", "marker"],
                                      snapshot_chunk_size=10, max_retries=0), shapes.schema)])
        cluster.set_status(name, "START")
        cluster.wait_running(name)
        shapes.start()
        shapes.keep_on(60)  # before the copy
        shapes.pause()  # (see the module)
        writer.start()
        assert cli.main(["--manager", cluster.manager_address, "snapshot", name,
                         "--table", f"{schema}.node"]) == 0

        def copied() -> bool:
            if cluster.channel_status(name) == "PAUSE":
                return True
            copies = cluster.pipeline_state(name).snapshots
            return bool(copies) and all(copy.state == "done" for copy in copies)
        wait_for(copied, 240, "the snapshot done, or a pause")
        refused = [line for daemon in cluster.nodes.values()
                   for line in daemon.output().splitlines()
                   if name in line and "foreign key constraint fails" in line]
        assert cluster.channel_status(name) == "START", cluster.pipeline_state(name).last_error
        assert not refused, refused[0][:300]
        shapes.start()
        shapes.keep_on(60)  # after the copy
        shapes.finish(source)
    finally:
        shapes.stop()
        done.set()
        if writer.is_alive():
            writer.join(10)
    wait_equal(source, target, schema, ["node", "marker"], 120)
