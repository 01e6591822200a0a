"""A pipeline that fails for good pauses its channel; when ZooKeeper refused that write, a
later retry must not pause the channel over what someone decided meanwhile (on a real
ZooKeeper: the operator looked at the failure and ran ``setl channel start``)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from node import pause
from node import supervisor as supervisors
from node.supervisor import Supervisor
from shared.catalog import Catalog
from shared.definitions import load_text
from shared.model import ChannelStatus
from shared.retry import RetryPolicy
from shared.zk import ZkPaths
from tests.supervised import Runner, definitions
from tests.unit.test_runner_state import runner


@pytest.fixture
def catalog(zk_client: KazooClient, zk_root: str) -> Catalog:
    found = Catalog(zk_client, ZkPaths(zk_root))
    found.apply(load_text(definitions(), "c.yaml"))
    zk_client.set(found.paths.channel_status("shop"), b"START")  # as `setl channel start`
    return found


def refuse_first_pause(zk_client: KazooClient, path: str, meanwhile: Callable[[], None],
                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The node's first write of ``path`` gets no answer; ``meanwhile`` runs as it fails."""
    real = zk_client.set

    def refused(at: str, data: bytes, *args: Any, **kwargs: Any) -> Any:
        if at != path:
            return real(at, data, *args, **kwargs)
        monkeypatch.setattr(zk_client, "set", real)
        meanwhile()
        raise ConnectionLoss()
    monkeypatch.setattr(zk_client, "set", refused)


def failed_for_good(zk_client: KazooClient, catalog: Catalog, version: int = 1) -> None:
    found = runner()
    found.ctx.client, found.ctx.paths, found.ctx.version = zk_client, catalog.paths, version
    found.publish = lambda: None  # type: ignore[method-assign]
    found._fail_for_good("definition error")


def test_a_pause_zookeeper_refused_is_written_on_the_retry(
        zk_client: KazooClient, catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_first_pause(zk_client, catalog.paths.channel_status("shop"), lambda: None,
                       monkeypatch)
    failed_for_good(zk_client, catalog)
    assert catalog.status("shop") is ChannelStatus.PAUSE


def test_a_late_pause_never_overrules_the_operators_start(
        zk_client: KazooClient, catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pause was refused; the operator started the channel again meanwhile. The retry
    paused it over the operator's decision, and the pipeline stayed paused."""
    path = catalog.paths.channel_status("shop")
    refuse_first_pause(zk_client, path, lambda: zk_client.set(path, b"START"), monkeypatch)
    failed_for_good(zk_client, catalog)
    assert catalog.status("shop") is ChannelStatus.START


def test_a_redefined_channel_is_not_paused_for_the_old_definition(
        zk_client: KazooClient, catalog: Catalog) -> None:
    failed_for_good(zk_client, catalog, version=0)  # the runner of an earlier definition
    assert catalog.status("shop") is ChannelStatus.START


class Failing(Runner):
    """A runner (no source to read) that fails for good when told, as a runner does: it
    pauses its channel, then ends."""

    def fail_for_good(self) -> None:
        self.state = "failed"
        ctx = dataclasses.replace(self.ctx, backoff=RetryPolicy(delay_s=0.0, max_delay_s=0.0))
        pause.pause_channel(ctx, self.pipeline_id, threading.Event())
        self.ended.set()


@pytest.fixture
def supervisor(zk_client: KazooClient, catalog: Catalog,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[Supervisor]:
    monkeypatch.setattr(supervisors, "PipelineRunner", Failing)
    found = Supervisor(1, zk_client, catalog.paths, catalog, spark=None)  # type: ignore[arg-type]
    reconcile(catalog, found)
    yield found
    found.stop_all(1.0)


def reconcile(catalog: Catalog, supervisor: Supervisor) -> None:
    """What the node does when its watcher wakes it."""
    supervisor.reconcile(catalog.channels(), catalog.source_versions())


def running(supervisor: Supervisor) -> Failing:
    return supervisor.runners["shop.forward"][0]  # type: ignore[return-value]


def test_a_failed_pipeline_runs_again_when_the_operators_start_overruled_its_pause(
        zk_client: KazooClient, catalog: Catalog, supervisor: Supervisor,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The pause gave way to the operator's start; the channel stayed started with the same
    definition, and the node kept the dead runner for good: the start did nothing."""
    first = running(supervisor)
    path = catalog.paths.channel_status("shop")
    refuse_first_pause(zk_client, path, lambda: zk_client.set(path, b"START"), monkeypatch)
    first.fail_for_good()
    assert catalog.status("shop") is ChannelStatus.START
    reconcile(catalog, supervisor)
    assert running(supervisor) is not first
    assert supervisor.running() == ["shop.forward"]


def test_a_failed_pipeline_whose_pause_landed_stays_stopped(
        catalog: Catalog, supervisor: Supervisor) -> None:
    first = running(supervisor)
    first.fail_for_good()
    assert catalog.status("shop") is ChannelStatus.PAUSE
    reconcile(catalog, supervisor)
    assert "shop.forward" not in supervisor.runners
    assert supervisor.running() == []
