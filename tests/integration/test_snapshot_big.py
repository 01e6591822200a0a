"""A copy whose chunks' bounds are past ZooKeeper's request limit (jute.maxbuffer, 1 MiB)
on real servers: a table keyed by long strings split in many chunks. The bounds were saved
in the progress document after every window, which ZooKeeper refused (the connection
dropped at each try, the copy never started); now they are written once, in parts, and the
progress stays small while the copy goes on, through a kill -9."""

from __future__ import annotations

import json
import os
import threading
import zlib

from kazoo.client import KazooClient

from shared import zk
from shared.settings import ZkSettings
from shared.zk import ZkPaths
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes
from tests.integration.shapes import channel as shapes_channel

BIG = ("CREATE TABLE `{schema}`.big (k VARCHAR(3000) CHARACTER SET ascii PRIMARY KEY, "
       "n INT)")
ROWS, CHUNK = 1200, 3  # ~400 chunks of two 3000-byte bounds: ~2.4 MB of bounds


class Watch:
    """Reads the copy's ZooKeeper state while it goes: the progress document's largest
    size, and its plan as first found whole (header and parts)."""

    def __init__(self, client: KazooClient, paths: ZkPaths, pipeline_id: str) -> None:
        self.client, self.pipeline_id = client, pipeline_id
        self.state, self.plans = paths.snapshot(pipeline_id), paths.snapshot_plans(pipeline_id)
        self.largest, self.reads = 0, 0
        self.plan: tuple[dict[str, object], bytes] | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.wait(0.05):
            try:
                data, _ = self.client.get(self.state)
            except Exception:  # not made yet
                continue
            self.largest, self.reads = max(self.largest, len(data)), self.reads + 1
            if self.plan is None:
                try:
                    self.plan = self._plan()
                except Exception:  # (a part not written yet: read again)
                    continue

    def _plan(self) -> tuple[dict[str, object], bytes] | None:
        for name in self.client.get_children(self.plans):
            header = json.loads(self.client.get(f"{self.plans}/{name}")[0] or b"{}")
            if header:
                data = b"".join(self.client.get(f"{self.plans}/{name}/{n}")[0]
                                for n in range(int(header["parts"])))
                return header, zlib.decompress(data)
        return None


def test_a_copy_whose_bounds_pass_zookeepers_limit_completes_through_a_kill_9(
        sandbox, tmp_path) -> None:
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, BIG)
    rows = sorted((os.urandom(1495).hex() + f"{i:010d}", i) for i in range(ROWS))
    with source.conn.cursor() as cursor:
        cursor.executemany(f"INSERT INTO `{schema}`.big VALUES (%s, %s)", rows)
    shapes = Shapes(sandbox, source, target, seed=41)
    cluster = Cluster(sandbox, tmp_path, "bigcopy")
    client = zk.connect(ZkSettings(sandbox.servers()["zookeeper"].address))
    assert client is not None
    watch = Watch(client, ZkPaths(cluster.root), "bigcopy.forward")
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        cluster.apply([one_way("bigcopy", schema, ["big"], start="snapshot",
                               snapshot_chunk_size=CHUNK, snapshot_parallelism=4),
                       shapes_channel("bigcopy-shapes", shapes.schema)])
        watch.thread.start()
        for channel in ("bigcopy", "bigcopy-shapes"):
            cluster.set_status(channel, "START")
            cluster.wait_running(channel)
        shapes.start()
        wait_for(lambda: any(c.chunks_done >= 40 for c in
                             cluster.pipeline_state("bigcopy").snapshots), 180,
                 "forty chunks on the target")
        node.kill()
        source.execute(f"UPDATE `{schema}`.big SET n = -n WHERE n % 100 = 0")  # (streamed)
        restarted = cluster.start_node(1)

        def done() -> bool:
            return [c.state for c in cluster.pipeline_state("bigcopy").snapshots] == ["done"]
        wait_for(done, 300, "copy done")
        wait_equal(source, target, schema, ["big"], 60)
        watch.stop.set()
        watch.thread.join(5)
        [copy] = cluster.pipeline_state("bigcopy").snapshots
        assert copy.chunks >= 300, copy.chunks
        # the plan: past ZooKeeper's limit as one document, written in parts under it
        assert watch.plan is not None
        header, plan = watch.plan
        print(f"plan: {len(plan)} bytes, {header}; progress: largest {watch.largest} bytes "
              f"in {watch.reads} reads")
        assert len(plan) > 2**20 and header["chunks"] == copy.chunks, (len(plan), header)
        assert int(header["parts"]) >= 2, header  # type: ignore[call-overload]
        # the progress saved after every window stayed small (read as the copy went)
        assert watch.reads > 20 and watch.largest < 4096, (watch.reads, watch.largest)
        # the plan went with the copy done
        wait_for(lambda: client.get_children(watch.plans) == [], 30, "the plan deleted")
        # the restart went on with the chunks not done: every chunk read once, but those of
        # the windows in flight when the node died
        reads = [label for line in restarted.output().splitlines()
                 if "event=snapshot_window " in line
                 for label in line.split("chunks=")[1].split()[0].split(",")]
        assert len(set(reads)) == copy.chunks, (len(set(reads)), copy.chunks)
        assert len(reads) <= copy.chunks + 3 * 4, (len(reads), copy.chunks)
        shapes.finish(source)
    finally:
        watch.stop.set()
        shapes.stop()
        cluster.stop()
        zk.close(client)
