"""A runner's table copies' state is never saved over another owner's: on a real ZooKeeper,
an old owner whose session was lost and that saves late is refused (its copies stop), and
the new owner's copy stays."""

from __future__ import annotations

import json
import re

import pytest
from kazoo.client import KazooClient

from node.extract.chunks import Chunk, SplitKey
from node.snapshot.state import SnapshotStore, TableCopy
from shared.errors import CoordinationError, FencedError
from shared.zk import ZkPaths

PIPELINE = "snapfenced.p"


def copy(table: str) -> TableCopy:
    return TableCopy(f"s.{table}@1", "s", table, "", SplitKey("s", table, ("id",), "int"),
                     [Chunk(0, None, 10, False), Chunk(1, 10, None, False)], 20)


def test_a_late_save_of_an_old_owner_never_drops_the_new_owners_copy(
        zk_client: KazooClient, zk_root: str) -> None:
    old = SnapshotStore(zk_client, ZkPaths(zk_root), PIPELINE)
    assert old.load() == []
    old.save([copy("a")])  # the first save makes the state
    old.save([copy("a")])
    new = SnapshotStore(zk_client, ZkPaths(zk_root), PIPELINE)  # the next owner
    assert [found.table for found in new.load()] == ["a"]
    new.save([copy("a"), copy("b")])  # a copy it started
    assert [found["table"] for found in old.stored_progress()] == ["s.a", "s.b"]  # (a read
    with pytest.raises(FencedError, match="written by someone else"):  # for status only)
        old.save([copy("a")])
    assert [found.table for found in new.load()] == ["a", "b"]
    new.save([copy("b")])  # the new owner goes on
    assert [found.table for found in SnapshotStore(zk_client, ZkPaths(zk_root),
                                                   PIPELINE).load()] == ["b"]
    # deleted meanwhile (setl position reset): not made again by the old state's owner
    zk_client.delete(ZkPaths(zk_root).snapshot(PIPELINE))
    with pytest.raises(FencedError):
        new.save([copy("b")])
    assert not zk_client.exists(ZkPaths(zk_root).snapshot(PIPELINE))


def test_a_state_that_cannot_be_read_is_said_and_stops_no_node(
        zk_client: KazooClient, zk_root: str) -> None:
    """A state this release cannot read (another release's, or one edited by hand: a review
    found a chunk of one that stopped every node taking the pipeline, its status read
    raising out of the node's loop): the runner's load says what is wrong and what to do,
    and the status read keeps what it had."""
    store = SnapshotStore(zk_client, ZkPaths(zk_root), PIPELINE)
    saved = copy("a").to_json()
    saved["chunks"][1] = None
    zk_client.create(store.path, json.dumps([saved]).encode(), makepath=True)
    with pytest.raises(CoordinationError, match=r"its table copies' state in ZooKeeper \("
                       + re.escape(store.path) + r"\) cannot be read \(TypeError: .*setl "
                       "snapshot CHANNEL --table"):
        store.load()
    assert store.stored_progress() == []
