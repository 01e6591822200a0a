"""A copy's chunks kept apart from its progress (node.snapshot.plans): the progress saved
after every window stays small whatever the table's size, the plan is written once (in
parts where it is large), an older document with the chunks inline still loads, and a copy
whose plan is missing fails instead of reading the whole table."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from node.extract.chunks import Chunk, SplitKey, chunks_of
from node.snapshot import plans
from node.snapshot.state import SnapshotStore, TableCopy
from shared.errors import CoordinationError
from shared.zk import ZkPaths

PID = "big.forward"


class FakeZk:
    """The few kazoo calls the store makes, on a dict (path: [data, version])."""

    def __init__(self) -> None:
        self.nodes: dict[str, list] = {}
        self.largest = 0  # the largest write, as ZooKeeper's jute.maxbuffer would see it
        self.zxid = 0
        self.zxids: dict[str, list[int]] = {}  # path: [czxid, mzxid]

    def _wrote(self, data: bytes) -> None:
        self.largest = max(self.largest, len(data))

    def create(self, path: str, data: bytes = b"", makepath: bool = False,
               include_data: bool = False) -> Any:
        if path in self.nodes:
            raise NodeExistsError()
        parent = path.rsplit("/", 1)[0]
        if parent and parent not in self.nodes:
            if not makepath:
                raise NoNodeError()
            self.create(parent, b"", makepath=True)
        self._wrote(data)
        self.nodes[path] = [data, 0]
        self.zxid += 1
        self.zxids[path] = [self.zxid, self.zxid]
        return (path, self.exists(path)) if include_data else path

    def set(self, path: str, data: bytes, version: int = -1) -> object:
        if path not in self.nodes:
            raise NoNodeError()
        if version not in (-1, self.nodes[path][1]):
            raise BadVersionError()
        self._wrote(data)
        self.nodes[path] = [data, self.nodes[path][1] + 1]
        self.zxid += 1
        self.zxids[path][1] = self.zxid
        return self.exists(path)

    def get(self, path: str) -> tuple[bytes, object]:
        if path not in self.nodes:
            raise NoNodeError()
        data, version = self.nodes[path]
        return data, type("Stat", (), {"version": version})()

    def exists(self, path: str) -> object:
        if path not in self.nodes:
            return None
        czxid, mzxid = self.zxids[path]
        return type("Stat", (), {"version": self.nodes[path][1], "czxid": czxid,
                                 "mzxid": mzxid})()

    def get_children(self, path: str) -> list[str]:
        if path not in self.nodes:
            raise NoNodeError()
        return [p[len(path) + 1:] for p in self.nodes if p.rsplit("/", 1)[0] == path]

    def delete(self, path: str, recursive: bool = False) -> None:
        if path not in self.nodes:
            raise NoNodeError()
        for found in [p for p in self.nodes if p == path or p.startswith(path + "/")]:
            del self.nodes[found]


def big_copy(chunk_count: int, key_length: int = 100) -> TableCopy:
    """A copy keyed by long random strings (incompressible as UUIDs are, but longer)."""
    bounds = sorted(os.urandom(key_length // 2).hex() for _ in range(chunk_count - 1))
    return TableCopy("big.t/x@1", "big", "t/x", "", SplitKey("big", "t/x", ("k",), "varchar"),
                     list(chunks_of(bounds)), chunk_count * 1000, apart=True)


def test_a_large_plan_is_written_once_in_parts_and_the_progress_stays_small() -> None:
    client = FakeZk()
    store = SnapshotStore(client, ZkPaths("/setl"), PID)  # type: ignore[arg-type]
    assert store.load() == []
    copy = big_copy(12_000)  # 100M rows by a UUID-like key, and more: ~1.2 MB of bounds
    assert len(json.dumps(TableCopy.to_json(
        TableCopy(**{**copy.__dict__, "apart": False}))).encode()) > 2**20  # (as it was)
    store.write_plan(copy)
    store.save([copy])
    path = store.plan_path(copy.id)
    assert "%2F" in path.rsplit("/", 1)[1]  # ("t/x": one znode name)
    header = json.loads(client.nodes[path][0])
    assert header["parts"] >= 2 and header["chunks"] == 12_000
    assert client.largest <= plans.PART_BYTES + 1024
    for window in range(0, 12_000, 8):  # a save after every window
        copy.done.update(range(window, window + 8))
        copy.read_rows += 8000
        if window == 6000:
            copy.done.discard(5000)  # (a window read again: done out of order)
        store.save([copy])
        assert len(client.nodes[store.path][0]) < 1000
    assert copy.state == "copying" and len(copy.done) == 11_999
    again = SnapshotStore(client, ZkPaths("/setl"), PID)  # type: ignore[arg-type]
    [loaded] = again.load()
    assert loaded.chunks == copy.chunks and loaded.done == copy.done
    assert loaded.apart and loaded.total == 12_000 and loaded.read_rows == copy.read_rows
    assert again.stored_progress()[0]["chunks"] == 12_000  # (status: no plan read)
    # finished: the plan goes once the state that says so is saved
    loaded.done.add(5000)
    loaded.state = "done"
    again.save([loaded])
    assert path not in client.nodes and plans.names(client, store.plans_path) == set()
    [finished] = SnapshotStore(client, ZkPaths("/setl"), PID).load()  # type: ignore[arg-type]
    assert (finished.state, finished.total, len(finished.done)) == ("done", 12_000, 12_000)


def test_a_small_plan_round_trips_every_bound_type_in_one_part() -> None:
    chunks = [Chunk(0, None, "a\"b", False), Chunk(1, "a\"b", b"\x00\xff", False),
              Chunk(2, b"\x00\xff", 2**63, False), Chunk(3, 2**63, None, False),
              Chunk(4, None, None, True)]
    client = FakeZk()
    assert plans.write(client, "/p/x", chunks) == 1  # type: ignore[arg-type]
    assert plans.read(client, "/p/x") == chunks  # type: ignore[arg-type]
    with pytest.raises(NodeExistsError):  # immutable: never written over
        plans.write(client, "/p/x", chunks[:1])  # type: ignore[arg-type]


def test_an_older_state_with_the_chunks_inline_loads_and_goes_on_inline() -> None:
    """A node upgraded mid-copy: the document an older setl saved (chunks inline, done
    ones as [null, null, false]) loads with its bounds, and is saved as it was."""
    client = FakeZk()
    paths = ZkPaths("/setl")
    older = {"id": "s.t@1", "schema": "s", "table": "t", "where": "",
             "key": {"schema": "s", "table": "t", "columns": ["id"], "data_type": "int"},
             "rows": 30, "read_rows": 10, "state": "copying", "error": "", "started": 1.0,
             "finished": 0.0, "done": "0", "request": "", "total": 3,
             "chunks": [[None, None, False], ["[10]", "[20]", False], ["[20]", None, False]]}
    client.create(paths.snapshot(PID), json.dumps([older]).encode(), makepath=True)
    store = SnapshotStore(client, paths, PID)  # type: ignore[arg-type]
    [copy] = store.load()
    assert not copy.apart and copy.done == {0} and copy.total == 3
    assert copy.chunks[1:] == [Chunk(1, 10, 20, False), Chunk(2, 20, None, False)]
    copy.done.add(1)
    store.save([copy])
    saved = json.loads(client.nodes[paths.snapshot(PID)][0])[0]
    assert saved["chunks"] == [[None, None, False], [None, None, False], ["[20]", None, False]]


def test_a_copy_whose_plan_is_missing_fails_saying_what_to_do() -> None:
    client = FakeZk()
    store = SnapshotStore(client, ZkPaths("/setl"), PID)  # type: ignore[arg-type]
    store.load()
    copy = big_copy(50)
    store.write_plan(copy)
    store.save([copy])
    client.delete(store.plan_path(copy.id), recursive=True)  # by hand
    [loaded] = SnapshotStore(client, ZkPaths("/setl"), PID).load()  # type: ignore[arg-type]
    assert loaded.state == "failed" and loaded.chunks == [] and loaded.finished
    assert "chunks' plan in ZooKeeper is not there" in loaded.error
    assert "setl snapshot big --table big.t/x" in loaded.error
    # a plan half written (its writer stopped before the header) is not a plan either
    client.create(store.plan_path(copy.id), b"", makepath=True)
    [loaded] = SnapshotStore(client, ZkPaths("/setl"), PID).load()  # type: ignore[arg-type]
    assert loaded.state == "failed" and "no plan header" in loaded.error


def test_orphan_plans_go_after_a_save_but_not_one_written_and_not_saved_yet() -> None:
    client = FakeZk()
    paths = ZkPaths("/setl")
    first = SnapshotStore(client, paths, PID)  # type: ignore[arg-type]
    first.load()
    orphan = big_copy(10)
    first.write_plan(orphan)  # planned, then the node died before the state named it
    store = SnapshotStore(client, paths, PID)  # type: ignore[arg-type]
    assert store.load() == []
    fresh = TableCopy(**{**big_copy(10).__dict__, "id": "big.t/x@2"})
    store.write_plan(fresh)  # (another thread saves before this copy is appended)
    store.save([])
    assert plans.names(client, paths.snapshot_plans(PID)) == {"big.t/x@2"}
    store.save([fresh])
    store.save([])  # (cancelled and pruned)
    assert plans.names(client, paths.snapshot_plans(PID)) == set()


def test_a_state_past_zookeepers_limit_is_not_sent_and_says_what_to_do() -> None:
    """ZooKeeper drops the connection of a request past jute.maxbuffer (the node's session,
    cursor and leadership with it, at every try): such a save is refused before it is sent,
    and the state saved before stays."""
    client = FakeZk()
    store = SnapshotStore(client, ZkPaths("/setl"), PID)  # type: ignore[arg-type]
    store.load()
    few = [TableCopy(**{**big_copy(2).__dict__, "id": f"big.t{i}@1", "table": f"t{i}"})
           for i in range(10)]
    store.save(few)
    many = [TableCopy(**{**copy.__dict__, "id": f"big.t{i}@1", "table": f"t{i}"})
            for i, copy in enumerate(few * 400)]
    with pytest.raises(CoordinationError, match=r"copies' state would take \d+ KB in "
                       r"ZooKeeper.*4000 copies, 4000 under way.*ask fewer tables at once"):
        store.save(many)
    assert client.largest < 10_000
    assert [copy.table for copy in SnapshotStore(
        client, ZkPaths("/setl"), PID).load()] == [f"t{i}" for i in range(10)]  # type: ignore[arg-type]


def test_a_plan_too_large_for_zookeeper_fails_its_copy_saying_what_to_do(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from node.snapshot.plan import fits
    from shared.errors import ConfigError

    copy = big_copy(2000)
    fits(PID, "big", "t", copy.chunks, 3)  # (~100 KB compressed)
    monkeypatch.setattr(plans, "MOST_BYTES", 50_000)
    with pytest.raises(ConfigError, match=r"big.t splits into 2000 chunks whose bounds take "
                       r"0.1 MB in ZooKeeper .*larger chunks \(snapshot_chunk_size, now 3\)"):
        fits(PID, "big", "t", copy.chunks, 3)
