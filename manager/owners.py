"""Which node runs a pipeline (its ``mainstem`` znode names it, its entry under ``nodes/``
gives its address): where the manager forwards what only the owner can do (verify, a
subscription's stream)."""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from manager.views import Views
from shared.catalog import call
from shared.errors import SetlError
from shared.zk import ZkPaths


def address(views: Views, client: KazooClient, paths: ZkPaths, pipeline_id: str,
            channel: str, error: type[SetlError], why: str) -> str:
    """The gRPC address of the node running ``pipeline_id``; ``error`` (saying ``why`` the
    owner is needed) when none runs it or its address is unknown."""
    try:
        owner, _ = call("read a pipeline owner", client.get, paths.mainstem(pipeline_id))
    except NoNodeError:
        raise error(f"pipeline {pipeline_id} is not running on any node: start the channel "
                    f"(setl channel start {channel}), or wait for a node to take it over; "
                    f"{why}") from None
    node_id = int(owner.decode() or 0)
    for node in views.nodes():
        if node.id == node_id and node.address:
            return node.address
    raise error(f"node {node_id}, which runs pipeline {pipeline_id}, has no address in "
                "ZooKeeper; check that it is up (setl node list)")
