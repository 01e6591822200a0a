"""A processor writing the target's key from more than the source's key (``id * 10 +
region``): a free-door or verify --repair ``D`` carries the key alone as its before image,
so the processor cannot compute the key for it. On a real server: the pipeline pauses at
that request (on each resume: the request stays), naming the processor, the key and the
column the image lacks, and saying that the row held the key columns alone and what to do;
the row deleted by hand and the request removed, it runs on. A note at ``setl apply`` says
so before (docs/configuration.md, processors)."""

from __future__ import annotations

from pathlib import Path

from shared.retl import encode_key
from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, make_schema, wait_for
from tests.integration.test_displaced_loops import paused

T = "CREATE TABLE `{schema}`.t (id INT PRIMARY KEY, region INT NOT NULL, v VARCHAR(10))"
PROCESSOR = '''
def by_region(change):
    """The target's key from the source's key and its region (id 7, region 2: 72)."""
    for image in (change["before"], change["after"]):
        if image is not None:
            image["id"] = image["id"] * 10 + image["region"]
    return change
'''


def test_a_door_delete_through_a_processor_writing_the_key_from_another_column(
        sandbox: Sandbox, tmp_path: Path) -> None:
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, T)
    (tmp_path / "processors").mkdir()
    (tmp_path / "processors" / "keyshift.py").write_text(PROCESSOR)
    cluster = Cluster(sandbox, tmp_path / "cluster", "keyed-processor",
                      env={"SETL_PROCESSORS_PATH": str(tmp_path / "processors")})
    try:
        cluster.start_manager()
        cluster.start_node(1)
        answer = cluster.apply_answer([{"name": "kp", "pipelines": [{
            "name": "forward", "source": "source", "target": "target", "pairs": [
                {"source": f"{schema}.t", "target": f"{schema}.t",
                 "processor": "keyshift:by_region"}]}]}])
        assert not answer.errors, answer.errors
        [note] = [note for note in answer.notes if "processor keyshift:by_region" in note]
        assert note.startswith(f"test.yaml: channel kp pipeline forward pair source:{schema}.t"
                               ": processor keyshift:by_region gets a free-door or verify "
                               f"--repair 'D' with the key alone (id of {schema}.t)"), note
        cluster.set_status("kp", "START")
        cluster.wait_running("kp")
        source.execute(f"INSERT INTO `{schema}`.t VALUES (1, 2, 'one')")
        wait_for(lambda: target.table(schema, "t") == [(12, 2, "one")], 60, "row 1 as 12")
        # a row the target holds that the source lost without a binlog event (what a D is
        # for): source row 7 of region 2, at 72 on the target
        target.execute(f"INSERT INTO `{schema}`.t VALUES (72, 2, 'gone')")
        source.execute("INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA) VALUES "
                       "(%s, 'D', %s)", (f"{schema}.t", encode_key((7,))))
        message = paused(cluster, "kp", "processor keyshift:by_region failed on key (7,): "
                         "KeyError: 'region'")  # (as the note said)
        # … and the pause says why: the row given held the key columns alone (a free-door
        # D), and what to do
        assert "KeyError: 'region'; the row it was given held only the key columns (id), " \
            "as a delete asked through the free door" in message, message
        assert "row.get(...)" in message and "delete that row on the target by hand" in \
            message, message
        assert target.table(schema, "t") == [(12, 2, "one"), (72, 2, "gone")]
        # what the note says to do: the row deleted by hand, the request removed
        target.execute(f"DELETE FROM `{schema}`.t WHERE id = 72")
        for table in ("retl_pending", "retl_buffer"):
            source.execute(f"DELETE FROM retl.{table} WHERE FULL_NAME = %s", (f"{schema}.t",))
        cluster.set_status("kp", "START")  # (resume)
        source.execute(f"INSERT INTO `{schema}`.t VALUES (3, 1, 'three')")
        wait_for(lambda: target.table(schema, "t") == [(12, 2, "one"), (31, 1, "three")], 90,
                 f"the channel on after {message}")
    finally:
        cluster.stop()
