"""Per-instance free-door requests on a source two channels read, each its own table: every
pipeline of the source sees each request in the binlog, and only the one that replicates
its table serves it; the other skips it — no rejection counted, no alarm, no buffer row
deleted for it."""

from __future__ import annotations

import json
from typing import Any

from manager import cli
from shared.retl import encode_key
from shared.rpc import manager_pb2
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for

T = "CREATE TABLE `{schema}`.{name} (id INT PRIMARY KEY, v INT)"
BUFFER = "INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA) VALUES (%s, 'I', %s)"


def firing(cluster: Cluster, subject: str) -> list[str]:
    """The messages of the rejects alarm firing for ``subject``."""
    answer = cluster.call("Status", manager_pb2.StatusRequest())
    return [alarm.message for alarm in answer.alarms
            if alarm.rule == "rejects" and alarm.subject == subject and alarm.state == "firing"]


def test_a_request_for_another_channels_table_is_skipped_not_rejected(
        sandbox: Any, tmp_path: Any, capsys: Any) -> None:
    """dc-a replicates table a, dc-b table b, both from the source. `setl backfill` and
    `setl verify --repair` of dc-a write per-instance requests for a: dc-a serves every one
    (the rows reach its target); dc-b, which saw them all in the stream, counts none of them
    (it took them as rejected, logged free_door_rejected, fired the free_door_rejects alarm
    on a channel they were never for, and deleted their buffer rows). dc-b still serves its
    own request after them, and rejects a bad one of its own table: the alarm it raises
    counts that one alone."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    cluster = Cluster(sandbox, tmp_path, "door-channels", manager_settings={
        "web": {"poll_s": 1}, "alarms": {"rules": [
            {"name": "rejects", "when": "free_door_rejects", "above": 0,
             "pipelines": ["dc-*"]}]}})
    try:
        schema = make_schema(source, target, T.replace("{name}", "a"),
                             T.replace("{name}", "b"))
        source.execute("SET SESSION sql_log_bin = 0")  # rows only the free door brings
        source.execute(f"INSERT INTO `{schema}`.a VALUES "
                       + ", ".join(f"({i}, {i})" for i in range(1, 101)))
        source.execute(f"INSERT INTO `{schema}`.b VALUES (1, 1)")
        source.execute("SET SESSION sql_log_bin = 1")
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([one_way("dc-a", schema, ["a"]), one_way("dc-b", schema, ["b"])])
        for channel in ("dc-a", "dc-b"):
            cluster.set_status(channel, "START")
            cluster.wait_running(channel)

        manager = ["--manager", cluster.manager_address,  # (the sandbox's password file
                   "--config", str(cluster.workdir / "node.yaml")]  # read as a node does)
        assert cli.main([*manager, "backfill", "dc-a", "--table", f"{schema}.a"]) == 0
        source.execute(BUFFER, (f"{schema}.b", encode_key((1,))))  # dc-b's own, after them
        wait_equal(source, target, schema, ["a", "b"], 60)
        wait_for(lambda: cluster.pipeline_state("dc-b").free_door.loaded == 1, 30,
                 "dc-b to serve its own request (after the others in its stream)")

        target.execute("SET SESSION sql_log_bin = 0")  # rows only a repair mends
        target.execute(f"UPDATE `{schema}`.a SET v = -1 WHERE id <= 20")
        target.execute("SET SESSION sql_log_bin = 1")
        capsys.readouterr()
        assert cli.main([*manager, "-o", "json", "verify", "dc-a", "--repair"]) == 0
        [verdict] = json.loads(capsys.readouterr().out)["reports"][0]["tables"]
        assert verdict["repaired"] == 20
        wait_equal(source, target, schema, ["a"], 60)
        wait_for(lambda: cluster.pipeline_state("dc-a").free_door.loaded == 120, 30,
                 "dc-a to count the backfill's and the repair's requests")

        source.execute(BUFFER, (f"{schema}.b", "[1, 2]"))  # a bad one of dc-b's own table
        wait_for(lambda: firing(cluster, "dc-b.forward"), 30, "dc-b's rejects alarm")
        [message] = firing(cluster, "dc-b.forward")
        assert "rejected 1 free-door request(s)" in message, message
        assert not firing(cluster, "dc-a.forward")
        a, b = (cluster.pipeline_state(c).free_door for c in ("dc-a", "dc-b"))
        assert (a.requested, a.loaded, a.missing, a.rejected) == (120, 120, 0, 0)
        assert (b.requested, b.loaded, b.missing, b.rejected) == (2, 1, 0, 1)
        wait_for(lambda: source.rows(
            "SELECT (SELECT COUNT(*) FROM retl.retl_buffer WHERE FULL_NAME LIKE %s), "
            "(SELECT COUNT(*) FROM retl.retl_pending WHERE PIPELINE_ID IN ('dc-a.forward', "
            "'dc-b.forward'))", (f"{schema}.%",)) == [(0, 0)], 30,
            "the served buffer rows and the pipelines' copies of them deleted")
        log = cluster.nodes[1].output()
        rejected = [line for line in log.splitlines() if "event=free_door_rejected" in line]
        assert len(rejected) == 1 and "pipeline=dc-b.forward" in rejected[0], rejected
        assert "event=free_door_not_ours pipeline=dc-b.forward" in log
        for channel in ("dc-a", "dc-b"):
            cluster.set_status(channel, "STOP")
    finally:
        cluster.stop()
        source.close()
        target.close()
