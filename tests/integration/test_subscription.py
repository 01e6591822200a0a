"""A change subscription on real servers: an application reads a subscription channel over
the manager's gRPC (manager.subscriber), applying each change to its own copy of the
tables. The workload carries a keyless table with duplicate rows, a unique-key swap and
transfers under a sum invariant; the reader checks after every transaction that it holds a
state the source had (whole transactions, in commit order) and at the end compares its
copy with the source as multisets."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from manager.subscribejson import value
from manager.subscriber import Subscriber
from shared.errors import SetlError
from shared.retl import encode_key
from shared.sandbox import Sandbox
from tests.devcluster import BIN, Cluster, Database, make_schema, wait_for
from tests.integration.shapes import ACCOUNTS, OPENING, SLOTS, Shapes

pytestmark = pytest.mark.integration
COLUMNS = {"kl": ("a", "b"), "sl": ("id", "slot"), "accounts": ("id", "balance", "version")}


def sources(cluster: Cluster, *feeds: str) -> list[dict[str, Any]]:
    servers = cluster.sandbox.servers()
    return [{"name": "source", "host": "127.0.0.1", "port": servers["source"].port,
             "user": "setl", "password": f"file:{cluster.sandbox.secret_file}"},
            *({"name": feed, "type": "subscription"} for feed in feeds)]


def feed_channel(name: str, feed: str, schema: str, tables: list[str],
                 **params: Any) -> dict[str, Any]:
    return {"name": name, "pipelines": [{
        "name": "forward", "source": "source", "target": feed,
        "pairs": [{"source": f"{schema}.{t}", "target": f"{schema}.{t}"} for t in tables],
        **params}]}


def order(txn: Any) -> tuple[int, int]:
    return int(txn.position.file.rpartition(".")[2]), txn.position.pos


class Reader:
    """Applies a subscription's changes to multisets of images, each change once (by its id),
    checking the promises after every transaction."""

    def __init__(self, cluster: Cluster, channel: str, schema: str,
                 managers: str = "", rollback_at: int = 0, noting: str = "",
                 give_up_s: float = 120, held_comes_again: bool = False) -> None:
        self.cluster, self.channel, self.schema = cluster, channel, schema
        # the stream of the batch it holds ends while it holds (a stop, a failover): that
        # batch, and whatever else its stream still brings, is not applied (nor acknowledged)
        # but noted in ``dropped``: what was not acknowledged must come again on a later one
        self.held_comes_again = held_comes_again
        self.ended: tuple[int, int] | None = None  # that stream: (epoch, stream)
        self.dropped: set[str] = set()  # the transactions received on it, not applied
        self.noting = noting  # a table of the schema whose inserted ids it notes too
        self.ids: list[Any] = []  # those, in the order they first came (each once)
        self.give_up_s = give_up_s  # (a pause: no pipeline to read from meanwhile)
        self.rollback_at = rollback_at  # this batch is not acknowledged: rolled back
        self.rolled_back: set[str] = set()  # its transactions
        self.seen_again: set[str] = set()  # transactions that came again
        self.managers = managers or cluster.manager_address
        self.state: dict[str, Counter] = {name: Counter() for name in COLUMNS}
        self.done: set[str] = set()  # transactions applied whole
        self.last: tuple[int, int] = (0, 0)
        self.transactions = self.again = self.batches = 0
        self.violations: list[str] = []
        self.hold = threading.Event()  # set: read nothing more (a slow reader)
        self.stopped = threading.Event()
        self.feed: Subscriber | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self, opening: bool = True) -> Reader:
        if opening:  # the rows the workload starts from (written before the channel ran)
            self.state["accounts"].update((i, OPENING, 0) for i in range(ACCOUNTS))
            self.state["sl"].update((i, i) for i in range(1, SLOTS + 1))
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        if self.feed is not None:
            self.feed.close()
        self.thread.join(30)

    def _run(self) -> None:
        try:
            self._read()
        except Exception as exc:  # said at the end (a thread's error is seen nowhere else)
            self.violations.append(f"the reader failed: {exc!r}")

    def _read(self) -> None:
        with Subscriber(self.channel, managers=self.managers, retry_s=0.2,
                        give_up_s=self.give_up_s) as feed:
            self.feed = feed
            for batch in feed:
                if self.stopped.is_set():
                    return
                if self.hold.is_set():
                    while self.hold.is_set() and not self.stopped.is_set():
                        self.stopped.wait(0.05)
                    if self.held_comes_again:
                        self.ended = (batch.epoch, batch.stream)
                if (batch.epoch, batch.stream) == self.ended:
                    self.dropped.update(txn.id for txn in batch.transactions)
                    continue
                for txn in batch.transactions:
                    self.apply(txn)
                self.batches += 1
                if self.batches == self.rollback_at and batch.transactions:
                    self.rolled_back = {txn.id for txn in batch.transactions}
                    feed.rollback()  # every batch not acknowledged comes again
                    continue
                feed.ack(batch)

    def apply(self, txn: Any) -> None:
        if txn.id in self.done:
            self.again += 1  # sent again after a reconnect: applied once already
            self.seen_again.add(txn.id)
            return
        if order(txn) <= self.last:
            self.violations.append(f"transaction {txn.id} after {self.last}: out of order")
        self.last = order(txn)
        for change in txn.changes:
            if change.schema == self.schema and change.table == self.noting and \
                    change.op == "I":
                self.ids.append(self._image(change.after, ("id",))[0])
            if change.schema != self.schema or change.table not in COLUMNS:
                continue
            state, columns = self.state[change.table], COLUMNS[change.table]
            if change.op in ("U", "D"):
                before = self._image(change.before, columns)
                if state[before] <= 0:
                    self.violations.append(f"{txn.id}#{change.index}: {change.op} of a row "
                                           f"the reader never had: {before}")
                state[before] -= 1
            if change.op in ("I", "U"):
                state[self._image(change.after, columns)] += 1
        self.done.add(txn.id)
        self.transactions += 1
        balances = sum(row[1] * n for row, n in self.state["accounts"].items() if n > 0)
        if balances != ACCOUNTS * OPENING:
            self.violations.append(f"after {txn.id}: balances sum to {balances}")
        slots = sorted(row[1] for row, n in self.state["sl"].items() for _ in range(n))
        if slots != list(range(1, SLOTS + 1)):
            self.violations.append(f"after {txn.id}: slots {slots}")

    @staticmethod
    def _image(fields: Any, columns: tuple[str, ...]) -> tuple[Any, ...]:
        found = {field.name: value(field.value) for field in fields}
        return tuple(found[column] for column in columns)

    def rows(self, table: str) -> Counter:
        return +self.state[table]

    def equal(self, source: Database) -> bool:
        return all(self.rows(name) == Counter(source.rows(
            f"SELECT {', '.join(columns)} FROM `{self.schema}`.{name}"))
            for name, columns in COLUMNS.items())


def finish(shapes: Shapes, source: Database, *readers: Reader) -> None:
    shapes.stop()
    for reader in readers:
        wait_for(lambda r=reader: r.violations or r.equal(source), 120,
                 f"{reader.channel}'s reader equal to the source")
        reader.stop()
        assert reader.violations == []


def test_a_reader_gets_every_transaction_whole_in_order_and_again_unacked(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A mixed workload (keyless duplicates, unique swaps, transfers) read through the
    manager: whole transactions in commit order, equal to the source; a reader that goes
    away without acknowledging gets the same transactions again, and a rollback sends what
    was not acknowledged again."""
    shapes = Shapes(cluster.sandbox, source, target, targets=(), kinds=3)
    cluster.apply([feed_channel("feed", "feed-a", shapes.schema, list(COLUMNS))],
                  sources(cluster, "feed-a"))
    cluster.set_status("feed", "START")
    cluster.wait_running("feed")
    shapes.start()
    shapes.wait_transactions(40)
    # a reader that takes two batches and acknowledges neither, then goes
    unacked: list[str] = []
    with Subscriber("feed", managers=cluster.manager_address) as feed:
        for number, batch in enumerate(feed):
            unacked += [txn.id for txn in batch.transactions]
            if number == 1:
                break
    assert unacked
    reader = Reader(cluster, "feed", shapes.schema, rollback_at=3).start()
    wait_for(lambda: len(reader.done) >= len(unacked), 60, "the reader to read")
    assert set(unacked) <= reader.done  # given again: nothing was acknowledged
    shapes.wait_transactions(shapes.transactions + 100)
    finish(shapes, source, reader)
    assert reader.transactions >= 140
    # a rollback sent its batch again (and what followed it unacknowledged)
    assert reader.rolled_back and reader.rolled_back <= reader.seen_again


def test_a_backfill_meant_for_another_channel_of_the_source_leaves_a_subscription_running(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A per-instance backfill (retl_buffer rows naming no channel) is for every pipeline
    that reads the source: a subscription took it too, and paused, again at every resume (a
    subscription takes no rows read from the tables). It reads on, every change once."""
    shapes = Shapes(cluster.sandbox, source, target, targets=(), kinds=3, seed=11)
    cluster.apply([feed_channel("doorfeed", "feed-door", shapes.schema, list(COLUMNS))],
                  sources(cluster, "feed-door"))
    cluster.set_status("doorfeed", "START")
    cluster.wait_running("doorfeed")
    reader = Reader(cluster, "doorfeed", shapes.schema).start()
    shapes.start()
    shapes.wait_transactions(30)
    source.conn.cursor().executemany(
        "INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA) VALUES (%s, 'I', %s)",
        [(f"{shapes.schema}.accounts", encode_key((key,))) for key in range(3)])
    shapes.wait_transactions(shapes.transactions + 60)
    finish(shapes, source, reader)
    assert cluster.pipeline_state("doorfeed").state == "running"
    assert "event=free_door_not_taken" in cluster.nodes[1].output()


def test_a_subscription_has_one_reader_at_a_time(cluster: Cluster, source: Database,
                                                target: Database) -> None:
    """A look is refused while a reader reads; a second reader takes the subscription over
    and the first one raises instead of taking it back (two readers would split the stream
    between them); the second gets everything, whole and in order."""
    shapes = Shapes(cluster.sandbox, source, target, targets=(), kinds=3, seed=13)
    cluster.apply([feed_channel("single", "feed-one", shapes.schema, list(COLUMNS))],
                  sources(cluster, "feed-one"))
    cluster.set_status("single", "START")
    cluster.wait_running("single")
    shapes.start()
    shapes.wait_transactions(40)
    with Subscriber("single", managers=cluster.manager_address, retry_s=0.2) as first:
        batches = iter(first)
        assert next(batches).transactions  # it reads (and acknowledges nothing)
        with Subscriber("single", managers=cluster.manager_address, look=True) as look, \
                pytest.raises(SetlError, match="a look never takes a reader's place"):
            next(iter(look))
        reader = Reader(cluster, "single", shapes.schema).start()  # a second application
        deadline = time.monotonic() + 60
        with pytest.raises(SetlError, match=r"took this subscription over at .* one reader "
                           "at a time"):
            for _ in batches:  # what was sent to it before, then the error
                assert time.monotonic() < deadline, "the first reader was not told"
    shapes.wait_transactions(shapes.transactions + 60)
    finish(shapes, source, reader)
    assert reader.feed is not None and reader.feed.connects == 1  # never taken back


def _subscribe(cluster: Cluster, channel: str, *args: str) -> list[dict[str, Any]]:
    out = _cli(cluster, "subscribe", channel, "-o", "json", *args)
    return [json.loads(line) for line in out.splitlines()]


def _cli(cluster: Cluster, *args: str) -> str:
    done = subprocess.run([str(BIN / "setl"), "--manager", cluster.manager_address, *args],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_two_subscriptions_of_one_source_go_at_their_own_speed(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Two subscriptions read the same tables: one reader holds still with its window full
    while the other reads the whole workload; then it goes on and catches up."""
    shapes = Shapes(cluster.sandbox, source, target, targets=(), kinds=3, seed=5)
    cluster.apply([feed_channel(name, f"feed-{name}", shapes.schema, list(COLUMNS),
                                parallelism=2, batch_size=20)
                   for name in ("fast", "slow")], sources(cluster, "feed-fast", "feed-slow"))
    for name in ("fast", "slow"):
        cluster.set_status(name, "START")
        cluster.wait_running(name)
    started = cluster.pipeline_state("slow").position
    slow = Reader(cluster, "slow", shapes.schema)
    slow.hold.set()
    fast = Reader(cluster, "fast", shapes.schema).start()
    slow.start()
    shapes.start()
    shapes.wait_transactions(300)
    shapes.stop()
    wait_for(lambda: fast.equal(source), 120, "the fast reader equal to the source")
    assert slow.transactions == 0 and not slow.equal(source)
    state = cluster.pipeline_state("slow")
    assert state.window_used >= 1  # held back by its reader, not lost
    # its position is what its reader acknowledged (nothing yet: where it started), not the
    # batches handed over
    assert state.position == started, (state.position, started)
    listed = {found["subscription"]: found for found in json.loads(
        _cli(cluster, "subscription", "list", "-o", "json"))}
    assert listed["slow"]["reader"] != "-" and listed["slow"]["unacked"] >= 1
    assert listed["fast"]["behind"] == "0 bytes" != listed["slow"]["behind"]
    shown = re.search(r"^slow\.forward\s+(\S+)\s+(\d+)\s", _cli(cluster, "status"), re.M)
    assert shown and shown[1] == listed["slow"]["reader"] and int(shown[2]) >= 1, shown
    slow.hold.clear()
    finish(shapes, source, fast, slow)


def test_a_reader_resumes_on_another_node_after_kill(sandbox: Sandbox, tmp_path: Path,
                                                     source: Database,
                                                     target: Database) -> None:
    """Node 1 runs the subscription and is killed twice while the reader reads and the
    workload writes: node 2 (then 1 again) takes over from what was acknowledged; the reader
    (reconnecting by itself) ends equal to the source, every transaction whole and in order."""
    cluster = Cluster(sandbox, tmp_path, "subfail")
    try:
        _resumes(cluster, source, target)
    finally:
        cluster.stop()


def _resumes(cluster: Cluster, source: Database, target: Database) -> None:
    cluster.start_manager()
    cluster.start_node(1)
    shapes = Shapes(cluster.sandbox, source, target, targets=(), kinds=3, seed=9)
    cluster.apply([feed_channel("moving", "feed-m", shapes.schema, list(COLUMNS),
                                nodes=[1, 2])], sources(cluster, "feed-m"))
    cluster.set_status("moving", "START")
    cluster.wait_running("moving")
    cluster.start_node(2)
    reader = Reader(cluster, "moving", shapes.schema).start()
    shapes.start()
    for _ in range(2):  # the owner killed, the other node takes over, the owner restarts
        shapes.wait_transactions(shapes.transactions + 80)
        owner = cluster.pipeline_state("moving").owner_node
        other = 3 - owner
        before = reader.transactions
        cluster.nodes[owner].kill()
        wait_for(lambda o=other: cluster.pipeline_state("moving").owner_node == o and
                 cluster.pipeline_state("moving").state == "running", 90,
                 f"node {other} to take the subscription over")
        wait_for(lambda b=before: reader.transactions > b + 20, 120,
                 "the reader to go on after the kill")
        cluster.start_node(owner)
    finish(shapes, source, reader)
    assert reader.feed is not None and reader.feed.connects >= 2


def test_a_reader_follows_the_managers_new_leader(sandbox: Sandbox, tmp_path: Path,
                                                  source: Database, target: Database) -> None:
    """The reader knows two managers; the leader it reads through is killed (kill -9): it
    goes on through the new leader, every transaction once, whole and in order."""
    cluster = Cluster(sandbox, tmp_path, "submgr")
    try:
        first = cluster.start_manager()
        leader = cluster.manager
        second = cluster.start_manager()
        cluster.manager_address = first  # changes go to the leader
        cluster.start_node(1)
        shapes = Shapes(cluster.sandbox, source, target, targets=(), kinds=3, seed=21)
        cluster.apply([feed_channel("led", "feed-l", shapes.schema, list(COLUMNS))],
                      sources(cluster, "feed-l"))
        cluster.set_status("led", "START")
        cluster.wait_running("led")
        reader = Reader(cluster, "led", shapes.schema, managers=f"{first},{second}").start()
        shapes.start()
        shapes.wait_transactions(80)
        wait_for(lambda: reader.transactions > 20, 60, "the reader to read")
        assert leader is not None
        leader.kill()
        cluster.manager_address = second
        before = reader.transactions
        wait_for(lambda: reader.transactions > before + 40, 120,
                 "the reader to go on through the new leader")
        finish(shapes, source, reader)
        assert reader.feed is not None and reader.feed.connects >= 2
    finally:
        cluster.stop()


def test_an_ack_whose_answer_was_lost_is_this_owners_and_another_owners_write_fences(
        zk_client: Any, zk_root: str) -> None:
    """On real ZooKeeper: the connection drops after ZooKeeper applied an ack's write, so
    its answer never came. The next ack finds the znode a version on: it holds this owner's
    own write, so the owner goes on (it stopped, taking itself for fenced, at every network
    blip). A write of anyone else in between still fences it."""
    from kazoo.exceptions import ConnectionLoss

    from shared.acks import Acked, AckStore, move, read
    from shared.errors import FencedError
    from shared.model import BinlogPosition

    class Dropping:  # the real client, whose next set's answer is lost after it applied
        def __init__(self) -> None:
            self.drop = False

        def set(self, path: str, data: bytes, version: int) -> Any:
            stat = zk_client.set(path, data, version=version)
            if self.drop:
                self.drop = False
                raise ConnectionLoss()
            return stat

        def __getattr__(self, name: str) -> Any:
            return getattr(zk_client, name)

    client, path = Dropping(), f"{zk_root}/acked"
    store = AckStore(client, path, "feed", epoch=3)  # type: ignore[arg-type]
    assert store.claim("r1") is None
    store.write(Acked(BinlogPosition("bin.000001", 100), 1, run="r1"))
    client.drop = True
    with pytest.raises(ConnectionLoss):
        store.write(Acked(BinlogPosition("bin.000001", 200), 2, run="r1"))
    store.write(Acked(BinlogPosition("bin.000001", 300), 3, run="r1"))
    found = read(zk_client, path)
    assert found is not None and (found[0].position.pos, found[0].process_id) == (300, 3)
    move(zk_client, path, "r2", BinlogPosition("bin.000001", 4))  # setl position set
    with pytest.raises(FencedError):
        store.write(Acked(BinlogPosition("bin.000001", 400), 4, run="r1"))
    found = read(zk_client, path)
    assert found is not None and found[0].position.pos == 4


def test_a_stopped_subscriptions_position_is_what_its_reader_acknowledged(
        cluster: Cluster, source: Database, target: Database) -> None:
    """No reader: batches are handed over, none acknowledged. Status shows the position a
    restart resumes from, running and after a stop (the stopped runner's outbox gone, it
    showed the handed-over batches' end)."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.t (id INT PRIMARY KEY, v INT)")
    cluster.apply([feed_channel("subpos", "feed-subpos", schema, ["t"], batch_size=5)],
                  sources(cluster, "feed-subpos"))
    cluster.set_status("subpos", "START")
    cluster.wait_running("subpos")
    started = cluster.pipeline_state("subpos").position
    for i in range(50):
        source.execute(f"INSERT INTO `{schema}`.t VALUES ({i}, {i})")
    wait_for(lambda: cluster.pipeline_state("subpos").window_used >= 1, 60,
             "batches handed over")
    assert cluster.pipeline_state("subpos").position == started
    cluster.set_status("subpos", "STOP")
    wait_for(lambda: cluster.pipeline_state("subpos").state in ("stopped", "not running"), 60,
             "the pipeline stopped")
    assert cluster.pipeline_state("subpos").position == started
