"""What a subscription's reader had not acknowledged when its pipeline paused outlives the
pause's published state: a start and a stop before the runner reaches the failed statement
again publish another state, yet ``setl position set`` past the statement is still refused
(``pipelines/{pid}/unacked``), and the reader, once the operator follows the pause's text,
gets every row: 2 and 3 (handed over, not acknowledged), then 4 past the TRUNCATE. The
workload's tables ride the same subscription through the stops and starts (keyless
duplicates, unique-key swaps, transfers: :mod:`tests.integration.subscription_pausing`), and
the reader's copy ends equal to the source as multisets."""

from __future__ import annotations

import pytest

from tests.devcluster import Cluster, Database, wait_for
from tests.integration.subscription_pausing import read_through_the_pause, setup
from tests.integration.test_subscription_pause import _position_set

pytestmark = pytest.mark.integration


def _gone(cluster: Cluster, channel: str) -> bool:
    return not cluster.pipeline_state(channel).owner_node


def test_a_start_and_stop_after_a_cut_short_pause_keep_refusing_the_skip(
        cluster: Cluster, source: Database, target: Database) -> None:
    found = setup(cluster, source, target, "sdu", seed=29)
    wait_for(lambda: cluster.pipeline_state("sdu").state == "pausing", 90,
             "the TRUNCATE to make the pipeline wait for its reader")
    cluster.set_status("sdu", "STOP")  # the reader holds still: the operator stops it
    wait_for(lambda: cluster.pipeline_state("sdu").state == "failed", 60, "the stop")
    assert cluster.pipeline_state("sdu").unacked >= 1
    # the pause's advice, cut short: started and stopped again before the runner gets to
    # the TRUNCATE (its published state is another run's now)
    cluster.set_status("sdu", "START")
    cluster.set_status("sdu", "STOP")
    wait_for(lambda: _gone(cluster, "sdu"), 60, "the runner to end")
    refused = _position_set(cluster, "sdu/forward", "--file", found.file, "--pos",
                            str(found.pos))
    assert refused.returncode != 0 and "not acknowledged" in refused.stderr, refused
    # following the text: started, the reader gets them, the pause follows; then past it
    cluster.set_status("sdu", "START")
    read_through_the_pause(cluster, source, "sdu", found)
