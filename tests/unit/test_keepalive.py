"""The daemons' gRPC keepalive settings (``keepalive`` in conf/manager.yaml and
conf/node.yaml): read with defaults, a bad value refused at load naming file, line and
field, and options that never make a setl server refuse a setl client's pings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from manager.auth import node_access
from manager.client import Access
from shared.errors import ConfigError
from shared.keepalive import MAX_S, MIN_S, Keepalive, channel_options, server_options
from shared.settings import load_manager, load_node

LOADERS = [pytest.param(load_manager, id="manager"), pytest.param(load_node, id="node")]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "settings.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("load", LOADERS)
def test_keepalive_pings_after_20_s_and_drops_10_s_later_by_default(
        tmp_path: Path, load: Callable[[Path], object]) -> None:
    assert load(write(tmp_path, "log_level: info\n")).keepalive == Keepalive(20, 10)  # type: ignore[attr-defined]
    assert load(None).keepalive == Keepalive(20, 10)  # type: ignore[attr-defined]


@pytest.mark.parametrize("load", LOADERS)
def test_keepalive_values_are_read(tmp_path: Path, load: Callable[[Path], object]) -> None:
    path = write(tmp_path, "keepalive:\n  idle_s: 1\n  timeout_s: 3\n")
    assert load(path).keepalive == Keepalive(idle_s=1, timeout_s=3)  # type: ignore[attr-defined]


@pytest.mark.parametrize("load", LOADERS)
@pytest.mark.parametrize(("text", "expected"), [
    ("keepalive:\n  idle_s: 0\n",
     'settings.yaml:2: keepalive.idle_s: expected an integer from 1 to 3600, got "0"'),
    ("keepalive:\n  timeout_s: -5\n",
     'settings.yaml:2: keepalive.timeout_s: expected an integer from 1 to 3600, got "-5"'),
    ("keepalive: {idle_s: 1.5}\n",
     'settings.yaml:1: keepalive.idle_s: expected an integer from 1 to 3600, got "1.5"'),
    ("keepalive: {idle_s: 3601}\n",
     'settings.yaml:1: keepalive.idle_s: expected an integer from 1 to 3600, got "3601"'),
    ("keepalive: {idle: 5}\n",
     "settings.yaml:1: keepalive.idle: unknown key; did you mean 'idle_s'?"),
    ("keepalive: 20\n", 'settings.yaml:1: keepalive: expected a mapping, got "20"'),
], ids=["zero", "negative", "fraction", "too-long", "unknown-key", "not-a-mapping"])
def test_a_bad_keepalive_names_file_line_and_field(
        tmp_path: Path, load: Callable[[Path], object], text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert str(caught.value).splitlines() == [f"{tmp_path}/{expected}"]


@pytest.mark.parametrize("bad", [0, -1, MAX_S + 1, 2.5, True])
def test_a_keepalive_made_in_code_is_checked_too(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"keepalive.idle_s: expected whole seconds from 1 "
                                          rf"to 3600, got {bad!r}"):
        Keepalive(idle_s=bad)  # type: ignore[arg-type]


def test_a_server_accepts_pings_as_often_as_any_client_may_send_them() -> None:
    """gRPC answers a client that pings more often than the server allows with GOAWAY
    too_many_pings, which would cut healthy streams: a setl server allows the shortest
    idle_s a client may have."""
    quickest = dict(channel_options(Keepalive(idle_s=MIN_S, timeout_s=MIN_S)))
    allowed = dict(server_options(Keepalive(idle_s=MAX_S, timeout_s=MAX_S)))
    assert allowed["grpc.http2.min_ping_interval_without_data_ms"] <= \
        quickest["grpc.keepalive_time_ms"]
    assert allowed["grpc.keepalive_permit_without_calls"] == 1
    for options in (quickest, allowed):  # a quiet stream is pinged for as long as it lasts
        assert options["grpc.http2.max_pings_without_data"] == 0


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_the_clients_channels_ping_the_server_they_call(
        monkeypatch: pytest.MonkeyPatch, tls: bool) -> None:
    """What ``Access.channel`` hands gRPC: the reader's, the CLI's and the manager's channels
    to nodes are all made there."""
    made: list[dict[str, object]] = []
    monkeypatch.setattr(grpc, "insecure_channel",
                        lambda address, options: made.append(dict(options)))
    monkeypatch.setattr(grpc, "secure_channel",
                        lambda address, credentials, options: made.append(dict(options)))
    Access(ca=b"a CA" if tls else None, keepalive=Keepalive(7, 3)).channel("127.0.0.1:1")
    [options] = made
    assert (options["grpc.keepalive_time_ms"], options["grpc.keepalive_timeout_ms"],
            options["grpc.http2.ping_timeout_ms"],
            options["grpc.max_receive_message_length"]) == (7000, 3000, 3000, -1)


def test_the_manager_calls_its_nodes_with_its_own_keepalive(tmp_path: Path) -> None:
    """A node whose host vanished under a relay or a verify is noticed on the manager's own
    settings (the relay's call fails; the reader's stream ends as when a subscription
    moves)."""
    settings = load_manager(write(tmp_path, "keepalive:\n  idle_s: 2\n  timeout_s: 4\n"))
    assert node_access(settings).keepalive == Keepalive(idle_s=2, timeout_s=4)
