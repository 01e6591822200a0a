"""A subscription reader, or its manager, whose host vanished without closing TCP (a power
cut, a partition, a NAT that dropped the flow), played by a proxy that freezes: it forwards
nothing more and closes nothing. The manager's keepalive pings go unanswered, so it drops
the reader's connection and the whole chain lets go (its relay to the node, the node's
stream): status no longer shows the reader, and a look, refused while a reader reads, reads.
The reader's own pings go unanswered too, so it leaves the dead connection and reads on
through another address of the manager."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from manager.client import Access
from manager.subscribejson import value
from manager.subscriber import Subscriber
from shared.keepalive import MAX_S, Keepalive
from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, make_schema, wait_for
from tests.integration.test_subscription import feed_channel, sources
from tests.tcpproxy import Relay

pytestmark = pytest.mark.integration
QUICK = Keepalive(idle_s=1, timeout_s=1)  # the daemons' and the client's pings, for the test
UNHURRIED = Keepalive(idle_s=MAX_S, timeout_s=MAX_S)  # a client that never pings meanwhile
ITEMS = "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(40))"
LET_GO_S = 40  # the daemons drop a dead peer within ~2 s of its last word


@pytest.fixture(scope="module")
def cluster(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A manager and node 1 that ping a quiet connection after 1 s and drop it 1 s later."""
    settings = {"keepalive": {"idle_s": QUICK.idle_s, "timeout_s": QUICK.timeout_s}}
    running = Cluster(sandbox, tmp_path_factory.mktemp("keepalive"), "keepalive",
                      manager_settings=settings, node_settings=settings)
    running.start_manager()
    running.start_node(1)
    yield running
    running.stop()


def running_feed(cluster: Cluster, source: Database, target: Database, name: str) -> str:
    """A started subscription channel ``name`` of a new table, a row written: its schema."""
    schema = make_schema(source, target, ITEMS)
    cluster.apply([feed_channel(name, f"{name}-feed", schema, ["items"])],
                  sources(cluster, f"{name}-feed"))
    cluster.set_status(name, "START")
    cluster.wait_running(name)
    source.execute(f"INSERT INTO `{schema}`.items VALUES (1, 'one')")
    return schema


def reading(feed: Subscriber) -> tuple[list[int], list[str]]:
    """Read ``feed`` in a thread (acknowledging, unless a look): the ids of the rows it got,
    and its error."""
    ids: list[int] = []
    errors: list[str] = []

    def run() -> None:
        try:
            for batch in feed:
                ids.extend(value(field.value) for txn in batch.transactions
                           for change in txn.changes for field in change.after
                           if field.name == "id")
                if not feed.look:
                    feed.ack(batch)
        except Exception as exc:  # said by the test (a thread's error is seen nowhere else)
            errors.append(repr(exc))

    threading.Thread(target=run, name=f"reader-{feed.channel}", daemon=True).start()
    return ids, errors


def manager_relay(cluster: Cluster) -> Relay:
    """A relay to the cluster's manager, for a reader to reach it through."""
    return Relay(int(cluster.manager_address.rpartition(":")[2]))


def test_the_manager_lets_go_of_a_reader_whose_host_vanished(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = running_feed(cluster, source, target, "vanish")
    with manager_relay(cluster) as proxy:
        feed = Subscriber("vanish", managers=[proxy.address],
                          access=Access(keepalive=UNHURRIED), retry_s=0.2)
        got, failed = reading(feed)
        try:
            wait_for(lambda: got or failed, 60, "the reader behind the proxy to read")
            assert got == [1] and not failed, failed
            wait_for(lambda: cluster.pipeline_state("vanish").subscriber, 30,
                     "status to show the reader")
            proxy.freeze()
            wait_for(lambda: not cluster.pipeline_state("vanish").subscriber, LET_GO_S,
                     "status to stop showing the reader whose host vanished")
            # its place is free: a look (refused while a reader reads) reads what comes
            source.execute(f"INSERT INTO `{schema}`.items VALUES (2, 'two')")
            with Subscriber("vanish", managers=cluster.manager_address, look=True) as look:
                seen, refused = reading(look)
                wait_for(lambda: 2 in seen or refused, 60, "the look to read")
                assert not refused, refused
        finally:
            feed.close()


def test_a_reader_whose_manager_vanished_reads_on_through_another_address(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = running_feed(cluster, source, target, "strand")
    with manager_relay(cluster) as proxy:
        feed = Subscriber("strand", managers=[proxy.address, cluster.manager_address],
                          access=Access(keepalive=QUICK), retry_s=0.2)
        got, failed = reading(feed)
        try:
            wait_for(lambda: got or failed, 60, "the reader behind the proxy to read")
            assert got == [1] and not failed and feed.connects == 1, failed
            proxy.freeze()
            source.execute(f"INSERT INTO `{schema}`.items VALUES (2, 'two')")
            wait_for(lambda: 2 in got or failed, LET_GO_S,
                     "the reader to leave the dead connection and read on")
            assert not failed, failed
            assert feed.connects == 2
        finally:
            feed.close()
