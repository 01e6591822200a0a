"""A source is stored on its own, referenced by name from the channels: ``setl apply`` of a
source moved to another host changes no channel's version. The node kept running its
pipelines on the old host, however long; a changed source is a redefinition of every
pipeline that uses it (on a real ZooKeeper, the node's watcher and supervisor)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from node import supervisor as supervisors
from node.supervisor import Supervisor
from node.watcher import DefinitionWatcher
from shared.catalog import Catalog
from shared.definitions import load_text
from shared.zk import ZkPaths
from tests.devcluster import wait_for
from tests.supervised import Runner, definitions


def apply(catalog: Catalog, source_host: str, other_host: str = "h3") -> None:
    text = definitions(source_host=source_host,
                       more_sources=f"  - {{name: other, host: {other_host}}}\n")
    catalog.apply(load_text(text, "c.yaml"))


@pytest.fixture
def node(zk_client: KazooClient, zk_root: str,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Catalog, DefinitionWatcher,
                                                            Supervisor]]:
    monkeypatch.setattr(supervisors, "PipelineRunner", Runner)
    catalog = Catalog(zk_client, ZkPaths(zk_root))
    apply(catalog, "h1")
    zk_client.set(catalog.paths.channel_status("shop"), b"START")  # as `setl channel start`
    watcher = DefinitionWatcher(zk_client, catalog.paths, catalog)
    watcher.start()
    supervisor = Supervisor(1, zk_client, catalog.paths, catalog, spark=None)  # type: ignore[arg-type]
    refresh(watcher, supervisor)
    yield catalog, watcher, supervisor
    supervisor.stop_all(1.0)


def refresh(watcher: DefinitionWatcher, supervisor: Supervisor) -> None:
    """What the node does when its watcher wakes it."""
    stored = watcher.snapshot()
    supervisor.reconcile(stored.records, stored.sources)


def running(supervisor: Supervisor) -> Runner:
    return supervisor.runners["shop.forward"][0]  # type: ignore[return-value]


def test_a_source_moved_to_another_host_restarts_its_pipeline_there(
        node: tuple[Catalog, DefinitionWatcher, Supervisor]) -> None:
    catalog, watcher, supervisor = node
    first = running(supervisor)
    assert first.ctx.sources["s"].host == "h1"

    apply(catalog, "h9")  # the source moved; the channel is unchanged
    wait_for(watcher.changed.is_set, 10, "the node woken by the source's change")
    refresh(watcher, supervisor)
    assert not first.alive
    assert running(supervisor).ctx.sources["s"].host == "h9"


def test_a_source_no_pipeline_uses_restarts_nothing(
        node: tuple[Catalog, DefinitionWatcher, Supervisor]) -> None:
    catalog, watcher, supervisor = node
    first = running(supervisor)
    apply(catalog, "h1", other_host="h8")
    wait_for(watcher.changed.is_set, 10, "the node woken by the source's change")
    refresh(watcher, supervisor)
    assert running(supervisor) is first and first.alive
