"""A subscription paused by a statement its reader cannot be left without (a TRUNCATE with
ddl_sync off) while batches before it were handed to the reader and not acknowledged: the
pause waits for the reader's acknowledgements, so that moving past the statement, what the
pause says to do, skips the statement alone; a pipeline stopped before they came keeps them
unacknowledged, says so, and a move past them is refused. A reader that acknowledged
batch 1 gets 2, 3 and then, after the operator moved past the TRUNCATE, 4: nothing lost."""

from __future__ import annotations

import subprocess
import threading
from typing import Any

import pytest

from manager.subscribejson import value
from manager.subscriber import Subscriber
from tests.devcluster import BIN, Cluster, Database, make_schema, wait_for
from tests.integration.test_subscription import _subscribe, feed_channel, sources

pytestmark = pytest.mark.integration


class Collector:
    """A reader in a thread: the ids of every row it gets, in order, each batch acknowledged;
    it connects again through the pause, the stop and the start."""

    def __init__(self, cluster: Cluster, channel: str) -> None:
        self.cluster, self.channel = cluster, channel
        self.ids: list[int] = []
        self.errors: list[str] = []
        self.feed: Subscriber | None = None
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Collector:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        if self.feed is not None:
            self.feed.close()
        self.thread.join(30)

    def _run(self) -> None:
        try:
            with Subscriber(self.channel, managers=self.cluster.manager_address,
                            retry_s=0.2, give_up_s=600) as feed:
                self.feed = feed
                for batch in feed:
                    if self.stopped.is_set():
                        return
                    self.ids += [value(field.value) for txn in batch.transactions
                                 for change in txn.changes for field in change.after
                                 if field.name == "id"]
                    feed.ack(batch)
        except Exception as exc:  # said by the test (a thread's error is seen nowhere else)
            if not self.stopped.is_set():
                self.errors.append(repr(exc))

    def first_seen(self) -> list[int]:
        """The ids in the order they first came (at least once: one may come again)."""
        return list(dict.fromkeys(self.ids))


def _ids(txns: list[dict[str, Any]]) -> list[int]:
    return [c["after"]["id"] for t in txns for c in t.get("changes", [])]


def _position_set(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """``setl position set``, once the stopped channel's runner is gone."""
    answers: list[subprocess.CompletedProcess[str]] = []

    def tried() -> bool:
        done = subprocess.run([str(BIN / "setl"), "--manager", cluster.manager_address,
                               "position", "set", *args], capture_output=True, text=True,
                              timeout=120, check=False)
        answers.append(done)
        return "is not stopped" not in done.stderr
    wait_for(tried, 60, "the stopped pipeline's runner to end")
    return answers[-1]


def _setup(cluster: Cluster, source: Database, target: Database,
           channel: str, table: str = "id INT PRIMARY KEY") -> tuple[str, str, int]:
    """A running subscription whose reader acknowledged id 1; 2 and 3 handed over and not
    acknowledged (no reader), then a TRUNCATE: (schema, the TRUNCATE's end)."""
    schema = make_schema(source, target, f"CREATE TABLE `{{schema}}`.t ({table})")
    cluster.apply([feed_channel(channel, f"feed-{channel}", schema, ["t"], parallelism=5)],
                  sources(cluster, f"feed-{channel}"))
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)
    source.execute(f"INSERT INTO `{schema}`.t VALUES (1)")
    assert _ids(_subscribe(cluster, channel, "--count", "1")) == [1]
    source.execute(f"INSERT INTO `{schema}`.t VALUES (2)")
    source.execute(f"INSERT INTO `{schema}`.t VALUES (3)")
    source.execute(f"TRUNCATE TABLE `{schema}`.t")
    file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
    return schema, str(file), int(pos)


def _past_and_resume(cluster: Cluster, channel: str, file: str, pos: int) -> None:
    """What the pause says to do: stop, move to the next transaction's position, start."""
    cluster.set_status(channel, "STOP")
    done = _position_set(cluster, f"{channel}/forward", "--file", file, "--pos", str(pos))
    assert done.returncode == 0, done.stderr
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)


def _read_through_the_pause(cluster: Cluster, source: Database, schema: str, channel: str,
                            file: str, pos: int) -> None:
    """The pause's advice followed: a reader comes, the pipeline pauses once it has
    acknowledged 2 and 3, the operator moves past the TRUNCATE; the reader gets 2, 3, 4."""
    reader = Collector(cluster, channel).start()
    wait_for(lambda: cluster.channel_status(channel) == "PAUSE", 90, "the pause")
    assert cluster.pipeline_state(channel).unacked == 0
    _past_and_resume(cluster, channel, file, pos)
    source.execute(f"INSERT INTO `{schema}`.t VALUES (4)")
    wait_for(lambda: 4 in reader.ids or reader.errors, 90, "the reader to get id 4")
    reader.stop()
    assert reader.errors == []
    assert reader.first_seen() == [2, 3, 4]  # (2 and 3 skipped: [4])


def test_a_pause_waits_for_the_readers_acks_and_moving_past_it_loses_nothing(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema, file, pos = _setup(cluster, source, target, "sdr")
    wait_for(lambda: cluster.pipeline_state("sdr").state in ("pausing", "failed"), 90,
             "the TRUNCATE to stop the pipeline")
    waiting = cluster.pipeline_state("sdr")
    reader = Collector(cluster, "sdr").start()  # the reader comes back: 2 and 3 come
    wait_for(lambda: cluster.channel_status("sdr") == "PAUSE", 90, "the pause")
    paused = cluster.pipeline_state("sdr")
    _past_and_resume(cluster, "sdr", file, pos)
    source.execute(f"INSERT INTO `{schema}`.t VALUES (4)")
    wait_for(lambda: 4 in reader.ids or reader.errors, 90, "the reader to get id 4")
    reader.stop()
    assert reader.errors == []
    assert reader.first_seen() == [2, 3, 4]  # (2 and 3 were lost: [4])
    # while it waited, status said so; paused, the position is right before the TRUNCATE
    assert waiting.state == "pausing" and waiting.unacked >= 1, waiting
    assert "has not acknowledged" in waiting.last_error
    assert paused.state == "failed" and paused.unacked == 0
    assert "acknowledged every batch before the failed one" in paused.last_error


def test_a_pause_stopped_before_the_acks_keeps_them_and_refuses_a_move_past_them(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema, file, pos = _setup(cluster, source, target, "sds")
    wait_for(lambda: cluster.pipeline_state("sds").state in ("pausing", "failed"), 90,
             "the TRUNCATE to stop the pipeline")
    assert cluster.pipeline_state("sds").state == "pausing"
    cluster.set_status("sds", "STOP")  # no reader came: the operator stops it
    wait_for(lambda: cluster.pipeline_state("sds").state == "failed", 60, "the stop")
    stopped = cluster.pipeline_state("sds")
    assert stopped.unacked >= 1 and "Start the channel again first" in stopped.last_error
    refused = _position_set(cluster, "sds/forward", "--file", file, "--pos", str(pos))
    assert refused.returncode != 0 and "not acknowledged" in refused.stderr, refused
    # started again, the reader gets them, the pause follows; then past it
    cluster.set_status("sds", "START")
    _read_through_the_pause(cluster, source, schema, "sds", file, pos)
