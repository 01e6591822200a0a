"""A subscription paused with batches its reader had not acknowledged (the wait cut short by
a stop): the record of them (``pipelines/{pid}/unacked``) refuses every move past them — by
GTID too, and with --replay too — and a move refused for another reason keeps it. Both
skipped the batches silently before (a review: the reader got [4], never 2 and 3)."""

from __future__ import annotations

import pytest

from tests.devcluster import Cluster, Database, make_schema, wait_for
from tests.integration.test_subscription import _subscribe, feed_channel, sources
from tests.integration.test_subscription_pause import Collector, _ids, _position_set

pytestmark = pytest.mark.integration


def _cut_short(cluster: Cluster, source: Database, target: Database, channel: str,
               table: str) -> tuple[str, tuple[str, int], tuple[str, int], str]:
    """Row 1 acknowledged, 2 and 3 handed over, a TRUNCATE pauses, the channel stopped
    during the wait: the schema, the binlog before 1 and after the TRUNCATE, its GTID."""
    schema = make_schema(source, target, f"CREATE TABLE `{{schema}}`.t ({table})")
    cluster.apply([feed_channel(channel, f"feed-{channel}", schema, ["t"], parallelism=5)],
                  sources(cluster, f"feed-{channel}"))
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)
    before = source.rows("SHOW MASTER STATUS")[0][:2]
    source.execute(f"INSERT INTO `{schema}`.t VALUES (1)")
    assert _ids(_subscribe(cluster, channel, "--count", "1")) == [1]
    source.execute(f"INSERT INTO `{schema}`.t VALUES (2)")
    source.execute(f"INSERT INTO `{schema}`.t VALUES (3)")
    source.execute(f"TRUNCATE TABLE `{schema}`.t")
    after = source.rows("SHOW MASTER STATUS")[0][:2]
    gtid = str(source.rows("SELECT @@gtid_binlog_pos")[0][0])
    wait_for(lambda: cluster.pipeline_state(channel).state == "pausing", 90, "pausing")
    cluster.set_status(channel, "STOP")
    wait_for(lambda: cluster.pipeline_state(channel).state == "failed", 60, "the stop")
    wait_for(lambda: not cluster.pipeline_state(channel).owner_node, 60, "the runner gone")
    return schema, (str(before[0]), int(before[1])), (str(after[0]), int(after[1])), gtid


def _reader_gets_them(cluster: Cluster, channel: str) -> None:
    cluster.set_status(channel, "START")
    reader = Collector(cluster, channel).start()
    try:
        wait_for(lambda: {2, 3} <= set(reader.ids) or reader.errors, 90, "ids 2 and 3")
    finally:
        reader.stop()
    assert reader.errors == [] and reader.first_seen()[:2] == [2, 3]


def test_a_move_by_gtid_past_them_is_refused_with_replay_too(
        cluster: Cluster, source: Database, target: Database) -> None:
    _, _, _, gtid = _cut_short(cluster, source, target, "ugt", "id INT PRIMARY KEY")
    for extra in ([], ["--replay"]):
        moved = _position_set(cluster, "ugt/forward", "--gtid", gtid, *extra)
        assert moved.returncode != 0 and "not acknowledged 2 batch" in moved.stderr, \
            moved.stderr
        assert "Add --replay" not in moved.stderr
    _reader_gets_them(cluster, "ugt")


def test_a_replay_refused_for_keyless_tables_keeps_the_record(
        cluster: Cluster, source: Database, target: Database) -> None:
    _, before, after, _ = _cut_short(cluster, source, target, "ukl", "id INT")  # keyless
    past = ["--file", after[0], "--pos", str(after[1])]
    refused = _position_set(cluster, "ukl/forward", *past)
    assert refused.returncode != 0 and "not acknowledged" in refused.stderr
    replay = _position_set(cluster, "ukl/forward", "--file", before[0], "--pos",
                           str(before[1]), "--replay")
    assert replay.returncode != 0 and "keyless" in replay.stderr, replay.stderr
    again = _position_set(cluster, "ukl/forward", *past)
    assert again.returncode != 0 and "not acknowledged" in again.stderr, again.stderr
    _reader_gets_them(cluster, "ukl")
