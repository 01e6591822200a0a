"""A copy's chunks kept apart from its progress, on a real ZooKeeper, with two owners: the
plan of a large copy (past jute.maxbuffer as one document) is written in parts and read by
the next owner; an old owner that plans and saves late is refused, and its plan, never
named by the state, goes with the new owner's next save; a finished copy's plan goes too."""

from __future__ import annotations

import json
import os

import pytest
from kazoo.client import KazooClient

from node.extract.chunks import SplitKey, chunks_of
from node.snapshot.state import SnapshotStore, TableCopy
from shared.errors import FencedError
from shared.zk import ZkPaths

PIPELINE = "snapplans.p"


def big(table: str, chunk_count: int) -> TableCopy:
    bounds = sorted(os.urandom(60).hex() for _ in range(chunk_count - 1))
    return TableCopy(f"s.{table}@1", "s", table, "", SplitKey("s", table, ("k",), "varchar"),
                     list(chunks_of(bounds)), chunk_count * 8192, apart=True)


def test_a_large_plan_is_read_by_the_next_owner_and_a_late_owners_plan_goes(
        zk_client: KazooClient, zk_root: str) -> None:
    paths = ZkPaths(zk_root)
    old = SnapshotStore(zk_client, paths, PIPELINE)
    assert old.load() == []
    copy = big("a", 12_000)  # 100M rows by a key longer than a UUID
    old.write_plan(copy)
    old.save([copy])
    header = json.loads(zk_client.get(old.plan_path(copy.id))[0])
    assert header["parts"] >= 2, header  # (each part well under jute.maxbuffer)
    copy.done = set(range(100))
    old.save([copy])
    assert len(zk_client.get(paths.snapshot(PIPELINE))[0]) < 1000

    new = SnapshotStore(zk_client, paths, PIPELINE)  # the next owner
    [found] = new.load()
    assert found.chunks == copy.chunks and found.done == copy.done
    late = big("b", 10)
    old.write_plan(late)  # the old owner plans a copy, and saves it late: refused
    new.save([found])
    with pytest.raises(FencedError):
        old.save([copy, late])
    assert sorted(zk_client.get_children(paths.snapshot_plans(PIPELINE))) == ["s.a@1", "s.b@1"]
    found.done = set(range(12_000))
    found.state = "done"
    new.save([found])  # finished: its plan goes, and the late owner's (named by no state)
    assert zk_client.get_children(paths.snapshot_plans(PIPELINE)) == []
    [finished] = SnapshotStore(zk_client, paths, PIPELINE).load()
    assert (finished.state, finished.total) == ("done", 12_000)
