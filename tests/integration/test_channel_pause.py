"""A pipeline that fails for good pauses its channel; when ZooKeeper refused that write, a
later retry must not pause the channel over what someone decided meanwhile (on a real
ZooKeeper: the operator looked at the failure and ran ``setl channel start``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from shared.catalog import Catalog
from shared.definitions import load_text
from shared.model import ChannelStatus
from shared.zk import ZkPaths
from tests.unit.test_runner_state import runner

DEFINITIONS = """\
sources:
  - {name: s, host: h1}
  - {name: t, host: h2}
channels:
  - name: shop
    pipelines:
      - name: forward
        source: s
        target: t
        pairs:
          - {source: shop.orders, target: shop.orders}
"""


@pytest.fixture
def catalog(zk_client: KazooClient, zk_root: str) -> Catalog:
    found = Catalog(zk_client, ZkPaths(zk_root))
    found.apply(load_text(DEFINITIONS, "c.yaml"))
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
