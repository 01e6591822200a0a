"""The central free door on real servers: requests in a buffer on another server than the
rows, served by the pipeline they name, whatever order their transactions commit in, on one
connection that two threads share."""

from __future__ import annotations

import random
import threading

from tests.devcluster import Cluster, Database, make_schema, wait_equal, wait_for
from tests.integration.test_freedoor import ITEMS, door, request_rows, start, without_binlog


def test_central_backfill_is_served_by_the_owning_pipeline(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, ITEMS)
    without_binlog(source, f"INSERT INTO `{schema}`.items VALUES "
                   + ", ".join(f"({i}, 'row {i}', {i})" for i in range(1, 501)))
    # the central buffer lives on another server than the rows: here, the target
    start(cluster, "door-central", schema, ["items"], free_door={"source": "target",
                                                                  "slice": 200})
    keys = [(i,) for i in range(1, 501)]
    request_rows(target, f"{schema}.items", keys, channel="door-central", pipeline="forward")
    request_rows(target, f"{schema}.items", [(1,)], channel="door-central", pipeline="nobody")
    wait_equal(source, target, schema, ["items"])
    wait_for(lambda: door(cluster, "door-central").loaded == 500, 10, "500 loaded")
    wait_for(lambda: door(cluster, "door-central").rejected == 1, 10, "the orphan rejected")
    wait_for(lambda: target.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE CHANNEL_ID = %s",
                                 ("door-central",)) == [(0,)], 10, "the buffer cleaned")
    assert "channel door-central has no pipeline 'nobody' (it has forward)" in \
        cluster.nodes[1].output()
    cluster.set_status("door-central", "STOP")


def test_a_central_request_committed_after_a_higher_one_was_served_is_served(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The central door polled ids above the highest it had taken: a request whose
    transaction committed after a higher id was served (a long verify --repair beside a
    backfill) was not served until the pipeline restarted, and pending said 0."""
    schema = make_schema(source, target, ITEMS)
    without_binlog(source, f"INSERT INTO `{schema}`.items VALUES (1, 'early', 1), "
                   "(2, 'late', 2)")
    start(cluster, "door-order", schema, ["items"], free_door={"source": "target"})
    slow = Database(cluster.sandbox, "target")
    try:
        slow.execute("BEGIN")  # takes the lower id, commits last
        request_rows(slow, f"{schema}.items", [(1,)], channel="door-order", pipeline="forward")
        request_rows(target, f"{schema}.items", [(2,)], channel="door-order",
                     pipeline="forward")
        wait_for(lambda: door(cluster, "door-order").loaded == 1, 30, "the higher id served")
        wait_for(lambda: target.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE CHANNEL_ID "
                                     "= 'door-order'") == [(0,)], 30, "its buffer row deleted")
        assert target.table(schema, "items") == [(2, "late", 2)]
        slow.execute("COMMIT")
    finally:
        slow.close()
    wait_equal(source, target, schema, ["items"])
    wait_for(lambda: door(cluster, "door-order").loaded == 2, 10, "the counters")
    cluster.set_status("door-order", "STOP")


def test_the_central_doors_connection_serves_one_thread_at_a_time(sandbox, target) -> None:
    """The snapshot controller asks whether central requests wait while Load deletes the
    served ones, on the door's one connection: each query whole (two at once broke a
    pipeline with 'Packet sequence number wrong'); every request is taken once and
    deleted."""
    from node.extract.freedoor import CentralDoor
    from tests.integration.test_load import target_endpoint
    channel, requests = f"race{random.randrange(10**9)}", 3000
    door = CentralDoor(target_endpoint(sandbox), channel, "forward", slice=40)
    door.take(1)  # the retl schema where missing
    request_rows(target, "s.t", [(i,) for i in range(requests)], channel=channel,
                 pipeline="forward")
    done, asked, failures = threading.Event(), [], []

    def ask() -> None:
        while not done.is_set():
            door._asked_at = 0.0  # ask every time, not every 0.2 s
            try:
                asked.append(door.waiting())
            except Exception as exc:  # the test reports whatever broke
                failures.append(repr(exc))

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    taken: list[int] = []
    try:
        while batch := door.take(40):
            ids = [int(change.after["ID"]) for change in batch]
            taken += ids
            door.delete(ids)
    finally:
        done.set()
        asker.join(30)
        door.close()
    assert failures == [] and len(asked) > 100, (len(asked), failures[:3])
    assert len(taken) == len(set(taken)) == requests
    assert target.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE CHANNEL_ID = %s",
                       (channel,)) == [(0,)]


def test_a_central_buffer_on_a_third_server_is_served(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The central buffer may live on any server: here neither the pipeline's source nor its
    target. The node looked it up among those two only, and every node that took the
    pipeline crashed on it."""
    cluster.sandbox.up(second_target=True)
    schema = make_schema(source, target, ITEMS)
    without_binlog(source, f"INSERT INTO `{schema}`.items VALUES "
                   + ", ".join(f"({i}, 'row {i}', {i})" for i in range(1, 21)))
    servers = cluster.sandbox.servers()
    sources = [{"name": name, "host": "127.0.0.1", "port": servers[name].port, "user": "setl",
                "password": f"file:{cluster.sandbox.secret_file}"}
               for name in ("source", "target", "target2")]
    cluster.apply([{"name": "door-third", "pipelines": [{
        "name": "forward", "source": "source", "target": "target",
        "free_door": {"source": "target2"},
        "pairs": [{"source": f"{schema}.items", "target": f"{schema}.items"}]}]}], sources)
    cluster.set_status("door-third", "START")
    cluster.wait_running("door-third")
    buffer = Database(cluster.sandbox, "target2")
    try:
        request_rows(buffer, f"{schema}.items", [(i,) for i in range(1, 21)],
                     channel="door-third", pipeline="forward")
        wait_equal(source, target, schema, ["items"])
        wait_for(lambda: buffer.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE CHANNEL_ID "
                                     "= 'door-third'") == [(0,)], 30, "the buffer cleaned")
    finally:
        buffer.close()
    cluster.set_status("door-third", "STOP")
