"""A node that shuts down (SIGTERM) while its subscription waits for the reader before a
pause leaves the pause to the next owner: the channel stays started, another node takes the
pipeline, hands the unacknowledged batches over again and waits; the reader then gets 2 and
3, the pause follows, and past the TRUNCATE it gets 4: nothing lost, nothing paused early.
The workload's tables ride the same subscription throughout (keyless duplicates, unique-key
swaps, transfers: :mod:`tests.integration.subscription_pausing`), part of them in the
batches handed over again, and the reader's copy ends equal to the source as multisets."""

from __future__ import annotations

import pytest

from tests.devcluster import Cluster, Database, wait_for
from tests.integration.subscription_pausing import read_through_the_pause, setup

pytestmark = pytest.mark.integration


def test_a_shutdown_while_pausing_leaves_the_wait_to_the_next_owner(
        cluster: Cluster, source: Database, target: Database) -> None:
    cluster.start_node(2)
    found = setup(cluster, source, target, "sdf", seed=23)
    wait_for(lambda: cluster.pipeline_state("sdf").state == "pausing", 90,
             "the TRUNCATE to make the pipeline wait for its reader")
    owner = cluster.pipeline_state("sdf").owner_node
    cluster.nodes[owner].terminate(60)

    def next_owner_waits() -> bool:
        state = cluster.pipeline_state("sdf")
        return state.owner_node not in (0, owner) and state.state == "pausing" and \
            state.unacked >= 1
    wait_for(next_owner_waits, 120, "another node to take the pipeline and wait again")
    assert cluster.channel_status("sdf") == "START"  # (the leaving node paused it: no wait)
    read_through_the_pause(cluster, source, "sdf", found)
