"""A runner's cursor never goes back over one set while it still ran: on a real ZooKeeper, a
runner that lost its session (its mainstem gone, so ``setl position set`` went ahead) and
publishes the batches it loaded before its fence leaves the operator's cursor in place."""

from __future__ import annotations

from kazoo.client import KazooClient

from node.cursor import Cursor, CursorMovedError, CursorPublisher, CursorStore
from shared import positions
from shared.model import BinlogPosition
from shared.zk import ZkPaths
from tests.devcluster import wait_for

PIPELINE = "cursormoved.p"


def at(pos: int) -> Cursor:
    return Cursor(BinlogPosition("binlog.000001", pos, f"0-41-{pos}", "41@127.0.0.1:3306"),
                  pos, run="r")


def test_a_stale_runner_never_writes_its_cursor_over_a_position_set_meanwhile(
        zk_client: KazooClient, zk_root: str) -> None:
    path = ZkPaths(zk_root).cursor(PIPELINE)
    store = CursorStore(zk_client, ZkPaths(zk_root), PIPELINE)
    assert store.first(at(4)) == at(4)
    errors: list[Exception] = []
    publisher = CursorPublisher(store, interval_s=0.01, on_error=errors.append)
    try:
        publisher.publish(at(100))
        wait_for(lambda: positions.load(zk_client, path) == at(100), 10, "the runner's cursor")
        # setl position set, the channel stopped and no mainstem left: written as it is
        operator = Cursor(BinlogPosition("binlog.000001", 500, "0-41-500", "41@127.0.0.1:3306"),
                          100, run="r")
        zk_client.set(path, operator.to_json())
        publisher.publish(at(200))  # a batch the old runner loaded before its fence
    finally:
        publisher.close()
    assert positions.load(zk_client, path) == operator
    assert errors and isinstance(errors[-1], CursorMovedError), errors
    assert "set by someone else" in str(errors[-1])
    # the next start reads the operator's cursor and writes after it
    fresh = CursorStore(zk_client, ZkPaths(zk_root), PIPELINE)
    assert fresh.load() == operator
    fresh.save(at(600))
    assert positions.load(zk_client, path) == at(600)
    # a cursor deleted meanwhile (setl position reset) is not made again by the old runner
    zk_client.delete(path)
    publisher = CursorPublisher(fresh, interval_s=0.01, on_error=errors.append)
    publisher.publish(at(700))
    publisher.close()
    assert positions.load(zk_client, path) is None


def test_a_cursor_write_whose_answer_was_lost_is_the_runners_own(
        zk_client: KazooClient, zk_root: str) -> None:
    """The connection drops after ZooKeeper applied the runner's write (a new cursor, then an
    update), so its answer never comes: the next write finds that write there and goes on
    (taken for someone else's, the cursor froze for the rest of the run). An operator's
    write in between still stops it."""
    import pytest
    from kazoo.exceptions import ConnectionLoss

    class Dropping:  # the real client, whose next write's answer is lost after it applied
        def __init__(self) -> None:
            self.drop = False

        def _done(self, result: object) -> object:
            if self.drop:
                self.drop = False
                raise ConnectionLoss()
            return result

        def create(self, *args: object, **kwargs: object) -> object:
            return self._done(zk_client.create(*args, **kwargs))

        def set(self, *args: object, **kwargs: object) -> object:
            return self._done(zk_client.set(*args, **kwargs))

        def __getattr__(self, name: str) -> object:
            return getattr(zk_client, name)

    client, path = Dropping(), ZkPaths(zk_root).cursor(PIPELINE)
    store = CursorStore(client, ZkPaths(zk_root), PIPELINE)  # type: ignore[arg-type]
    assert store.load() is None
    client.drop = True
    with pytest.raises(ConnectionLoss):
        store.save(at(100))  # made, unanswered
    store.save(at(200))
    assert positions.load(zk_client, path) == at(200)
    client.drop = True
    with pytest.raises(ConnectionLoss):
        store.save(at(300))  # set, unanswered
    store.save(at(400))
    assert positions.load(zk_client, path) == at(400)
    zk_client.set(path, at(900).to_json())  # setl position set meanwhile
    with pytest.raises(CursorMovedError):
        store.save(at(500))
    assert positions.load(zk_client, path) == at(900)


def test_an_owner_that_lost_the_pipeline_never_writes_over_the_new_owners_cursor(
        zk_client: KazooClient, zk_root: str) -> None:
    """Seen in the chaos soak: node 2, frozen, lost the pipeline to node 1, which read the
    cursor; node 2 woke with a new session and, stopping, published its newest cursor once
    more — over the version node 1 had read. Every save of node 1 was then refused as
    someone else's move, the cursor frozen at node 2's. An owner that lost the pipeline now
    writes nothing; one whose ownership ZooKeeper could not confirm for a moment writes when
    it can."""
    path = ZkPaths(zk_root).cursor(PIPELINE + "2")
    old = CursorStore(zk_client, ZkPaths(zk_root), PIPELINE + "2")
    old.first(at(4))
    old.save(at(100))
    new = CursorStore(zk_client, ZkPaths(zk_root), PIPELINE + "2")
    assert new.load() == at(100)  # node 1 took over
    errors: list[Exception] = []
    stale = CursorPublisher(old, interval_s=0.01, on_error=errors.append, owns=lambda: False)
    stale.publish(at(200))
    stale.close()  # node 2 stopping
    assert positions.load(zk_client, path) == at(100) and not errors
    new.save(at(300))  # refused as "set by someone else" before
    assert positions.load(zk_client, path) == at(300)
    owned = iter([False, False, True])  # ZooKeeper could not say twice, then yes
    publisher = CursorPublisher(new, interval_s=0.01, on_error=errors.append,
                                owns=lambda: next(owned, True))
    try:
        publisher.publish(at(400))
        wait_for(lambda: positions.load(zk_client, path) == at(400), 10, "the owner's cursor")
    finally:
        publisher.close()
    assert not errors
