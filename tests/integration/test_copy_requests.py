"""The copies a changed definition asks for (``setl apply``: a table written somewhere it was
not before) are created in the ZooKeeper transaction that stores the definition: stored with
it or not at all. Asked afterwards, a ZooKeeper loss or a leader change between the two left
the new version stored with no copy asked, and applying again said "unchanged": the rows the
added table held never reached the target, with nothing said."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from shared import zk
from shared.catalog import Catalog
from shared.definitions import load_text
from shared.errors import ConflictError
from shared.model import Definitions
from shared.snapshotctl import SnapshotControl


def definitions(*tables: str) -> Definitions:
    return load_text("\n".join([
        "sources:", "  - {name: s, host: h1}", "  - {name: t, host: h2}", "channels:",
        "  - name: asked", "    pipelines:", "      - name: forward", "        source: s",
        "        target: t", "        pairs:",
        *(f"          - {{source: shop.{table}, target: shop.{table}}}" for table in tables)]
    ) + "\n", "c.yaml")


def test_the_copies_a_new_definition_asks_for_are_stored_with_it_or_not_at_all(
        zk_client: KazooClient, zk_root: str) -> None:
    paths = zk.ZkPaths(zk_root)
    catalog = Catalog(zk_client, paths)
    catalog.apply(definitions("orders"))
    control = SnapshotControl(zk_client, paths, "asked.forward")

    def meddled(name: str, version: int) -> list[tuple[str, bytes]]:
        # another manager's write between reading the definition and storing the new one
        data, _ = zk_client.get(paths.channel(name))
        zk_client.set(paths.channel(name), data)
        return [control.request("shop", "items", version=version)]

    with pytest.raises(ConflictError):
        catalog.apply(definitions("orders", "items"), requests=meddled)
    assert catalog.channel("asked").version == 1 and control.requests() == []

    [change] = [c for c in catalog.apply(definitions("orders", "items"), requests=lambda name,
                version: [control.request("shop", "items", version=version)])
                if c.kind == "channel"]
    assert (change.action, change.version) == ("updated", 2)
    [(_, request)] = control.requests()
    assert (request["schema"], request["table"], request["version"]) == ("shop", "items", 2)
    # applied again: unchanged, nothing asked twice
    [again] = [c for c in catalog.apply(definitions("orders", "items"), requests=lambda name,
               version: [control.request("shop", "items", version=version)])
               if c.kind == "channel"]
    assert again.action == "unchanged" and len(control.requests()) == 1
    # a dry run stores and asks nothing
    catalog.apply(definitions("orders"), dry_run=True, requests=lambda name, version: [
        control.request("shop", "orders", version=version)])
    assert catalog.channel("asked").version == 2 and len(control.requests()) == 1
