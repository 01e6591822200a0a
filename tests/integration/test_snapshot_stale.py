"""A stopped attempt's (or an old owner's) snapshot writes on a real ZooKeeper: a thread
still splitting a table when its attempt stopped saves nothing when it wakes, a stale save
is fenced as soon as the next attempt loaded, and an old owner paused after its save never
deletes the plan of a copy the new owner planned meanwhile (review_plans19)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from kazoo.client import KazooClient

from node.extract.chunks import SplitKey, chunks_of
from node.snapshot import plans
from node.snapshot.controller import Snapshots
from node.snapshot.state import SnapshotStore, TableCopy
from shared import zk
from shared.errors import FencedError
from shared.model import PipelineParams
from shared.settings import ZkSettings
from shared.zk import ZkPaths
from tests.unit.test_snapshot_requests import Compiled

PID = "stale.p"


def copy(table: str, chunk_count: int, copy_id: str = "") -> TableCopy:
    return TableCopy(copy_id or f"s.{table}@1", "s", table, "",
                     SplitKey("s", table, ("id",), "int"),
                     list(chunks_of([i * 10 for i in range(1, chunk_count)])),
                     chunk_count * 10, apart=True)


class Requests(SnapshotStore):
    """A store whose requests are a dict shared by the attempts (as the znodes are)."""

    def __init__(self, client: KazooClient, root: str, waiting: dict[str, Any]) -> None:
        super().__init__(client, ZkPaths(root), PID)
        self.waiting = waiting

    def requests(self) -> list[tuple[str, dict[str, Any]]]:
        return sorted(self.waiting.items())

    def taken(self, znode: str) -> None:
        self.waiting.pop(znode, None)

    def control(self) -> dict[str, Any]:
        return {}


def saved(client: KazooClient, root: str) -> dict[str, str]:
    data = client.get(ZkPaths(root).snapshot(PID))[0]
    return {item["id"]: item["state"] for item in json.loads(data)}


def test_a_stopped_attempt_still_splitting_leaves_its_request_to_the_next(
        zk_client: KazooClient, zk_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    waiting: dict[str, Any] = {}
    release, entered = threading.Event(), threading.Event()

    def plan(self: Snapshots, schema: str, table: str, where: str) -> TableCopy:
        if table == "big":  # a stepped split of a large table: minutes
            entered.set()
            release.wait(30)
        return copy(table, 3, f"{schema}.{table}@{id(self)}")

    monkeypatch.setattr(Snapshots, "_plan", plan)
    first = Requests(zk_client, zk_root, waiting)
    first.load()
    small = copy("small", 3)
    first.write_plan(small)
    first.save([small])
    one = Snapshots(PID, None, Compiled(), PipelineParams(), None, first, None)
    one.load()
    waiting["/r/request-1"] = {"schema": "s", "table": "big", "where": "", "asked": 1,
                               "version": 7}
    thread = threading.Thread(target=one._take_requests)
    thread.start()
    assert entered.wait(30)
    one.halt()  # the attempt stops (its stop() waits 10 s only), the next one starts
    two = Snapshots(PID, None, Compiled(), PipelineParams(), None,
                    Requests(zk_client, zk_root, waiting), None)
    two.load()
    release.set()
    thread.join(30)
    # the stopped attempt wrote no plan, saved nothing and left the request
    assert list(waiting) == ["/r/request-1"]
    assert plans.names(zk_client, ZkPaths(zk_root).snapshot_plans(PID)) == {"s.small@1"}
    assert saved(zk_client, zk_root) == {"s.small@1": "copying"}
    two._take_requests()  # the next attempt takes it
    assert waiting == {}
    after = Requests(zk_client, zk_root, {}).load()
    assert sorted((c.table, c.state, len(c.chunks)) for c in after) == [
        ("big", "copying", 3), ("small", "copying", 3)]


def test_a_stale_attempts_save_is_fenced_once_the_next_one_loaded(
        zk_client: KazooClient, zk_root: str) -> None:
    stale = SnapshotStore(zk_client, ZkPaths(zk_root), PID)
    stale.load()
    x = copy("x", 3)
    stale.write_plan(x)
    stale.save([x])
    nxt = SnapshotStore(zk_client, ZkPaths(zk_root), PID)
    [loaded] = nxt.load()
    # the stopped attempt's thread wakes after the next attempt loaded, before it saved
    with pytest.raises(FencedError):
        stale.save([x, copy("y", 2)])
    loaded.done, loaded.state = {0, 1, 2}, "done"
    nxt.save([loaded])  # the next attempt goes on: its save is not fenced
    assert saved(zk_client, zk_root) == {"s.x@1": "done"}
    assert [(c.id, c.state) for c in SnapshotStore(zk_client, ZkPaths(zk_root), PID).load()] \
        == [("s.x@1", "done")]


class Unclaimed(SnapshotStore):
    """A new owner of the release before this one: its load does not write the state back."""

    def _claim(self) -> tuple[list[TableCopy], int | None]:
        return self._read()


class Paused:
    """The old owner's client: its next listing of the plans runs ``meanwhile`` first (it
    stopped between its save and its drop of the plans: SIGSTOP, GC, a slow network)."""

    def __init__(self, real: KazooClient) -> None:
        self.real = real
        self.meanwhile: Any = None

    def get_children(self, path: str, *args: Any, **kwargs: Any) -> Any:
        if path.endswith("snapshot-plans") and self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()
        return self.real.get_children(path, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@pytest.mark.parametrize("new_owner", [SnapshotStore, Unclaimed])
def test_an_old_owner_paused_after_its_save_keeps_the_new_owners_plan(
        zk_client: KazooClient, zk_root: str, zk_hosts: str, new_owner: type) -> None:
    paths = ZkPaths(zk_root)
    other = zk.connect(ZkSettings(zk_hosts))
    try:
        b = new_owner(other, paths, PID)
        y = copy("y", 5)
        b_copies: list[TableCopy] = []

        def new_owner_loads_and_plans() -> None:  # (its save comes after the old one's drop)
            b_copies.extend(b.load())
            b.write_plan(y)

        client = Paused(zk_client)
        a = SnapshotStore(client, paths, PID)  # type: ignore[arg-type]
        a.load()
        x = copy("x", 3)
        a.write_plan(x)
        a.save([x])
        client.meanwhile = new_owner_loads_and_plans
        x.done, x.state = {0, 1, 2}, "done"
        a.save([x])  # the old owner's last save (its copy finished), paused after it
        b.save([*b_copies, y])
        assert plans.names(zk_client, paths.snapshot_plans(PID)) >= {"s.y@1"}
        after = SnapshotStore(other, paths, PID).load()  # a restart, or the next owner
        assert [(c.id, c.state, len(c.chunks)) for c in after if c.id == "s.y@1"] == [
            ("s.y@1", "copying", 5)]
    finally:
        zk.close(other)


def test_an_old_owner_paused_across_a_position_reset_keeps_the_new_owners_plan(
        zk_client: KazooClient, zk_root: str, zk_hosts: str) -> None:
    paths = ZkPaths(zk_root)
    other = zk.connect(ZkSettings(zk_hosts))
    try:
        b = SnapshotStore(other, paths, PID)
        y = copy("y", 4)

        def reset_then_new_owner_saves() -> None:  # (the state deleted and made again)
            other.delete(paths.snapshot(PID))
            assert b.load() == []
            b.write_plan(y)
            b.save([y])

        client = Paused(zk_client)
        a = SnapshotStore(client, paths, PID)  # type: ignore[arg-type]
        a.load()
        x = copy("x", 3)
        a.write_plan(x)
        client.meanwhile = reset_then_new_owner_saves
        a.save([x])  # made the state (version 0), then paused before its plans' clean-up
        assert plans.names(zk_client, paths.snapshot_plans(PID)) >= {"s.y@1"}
        after = SnapshotStore(other, paths, PID).load()
        assert [(c.id, c.state, len(c.chunks)) for c in after] == [("s.y@1", "copying", 4)]
    finally:
        zk.close(other)
