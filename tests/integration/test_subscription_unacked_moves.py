"""A subscription paused with batches its reader had not acknowledged (the wait cut short by
a stop): the record of them (``pipelines/{pid}/unacked``) refuses every move past them — by
GTID too, and with --replay too — and a move refused for another reason keeps it. Both
skipped the batches silently before (a review: the reader got [4], never 2 and 3)."""

from __future__ import annotations

import pytest

from tests.devcluster import Cluster, Database, wait_for
from tests.integration.test_subscription_pause import (
    _position_set,
    _read_through_the_pause,
    _setup,
)

pytestmark = pytest.mark.integration


def _cut_short(cluster: Cluster, source: Database, target: Database, channel: str,
               table: str) -> tuple[str, str, int, str]:
    """_setup's pause, stopped while it waits for the reader: (schema, the TRUNCATE's end
    by file and offset, and by GTID)."""
    schema, file, pos = _setup(cluster, source, target, channel, table)
    gtid = str(source.rows("SELECT @@gtid_binlog_pos")[0][0])
    wait_for(lambda: cluster.pipeline_state(channel).state == "pausing", 90, "pausing")
    cluster.set_status(channel, "STOP")
    wait_for(lambda: cluster.pipeline_state(channel).state == "failed", 60, "the stop")
    wait_for(lambda: not cluster.pipeline_state(channel).owner_node, 60, "the runner gone")
    return schema, file, pos, gtid


def test_a_move_by_gtid_past_them_is_refused_with_replay_too(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema, file, pos, gtid = _cut_short(cluster, source, target, "ugt", "id INT PRIMARY KEY")
    for extra in ([], ["--replay"]):
        moved = _position_set(cluster, "ugt/forward", "--gtid", gtid, *extra)
        assert moved.returncode != 0 and "batch(es) handed to it" in moved.stderr, \
            moved.stderr
        assert "Add --replay" not in moved.stderr
    cluster.set_status("ugt", "START")
    _read_through_the_pause(cluster, source, schema, "ugt", file, pos)


def test_a_replay_refused_for_keyless_tables_keeps_the_record(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema, file, pos, _ = _cut_short(cluster, source, target, "ukl", "id INT")  # keyless
    past = ["--file", file, "--pos", str(pos)]
    refused = _position_set(cluster, "ukl/forward", *past)
    assert refused.returncode != 0 and "not acknowledged" in refused.stderr
    replay = _position_set(cluster, "ukl/forward", "--file", file, "--pos", "4", "--replay")
    assert replay.returncode != 0 and "keyless" in replay.stderr, replay.stderr
    again = _position_set(cluster, "ukl/forward", *past)
    assert again.returncode != 0 and "not acknowledged" in again.stderr, again.stderr
    cluster.set_status("ukl", "START")
    _read_through_the_pause(cluster, source, schema, "ukl", file, pos)
