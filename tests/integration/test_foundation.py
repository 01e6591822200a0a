"""Definitions end to end: CLI → manager (gRPC) → ZooKeeper → node, on real servers."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from kazoo.client import KazooClient

from manager import cli
from manager.client import ManagerClient
from shared import codec, zk
from shared.model import Channel
from shared.rpc import manager_pb2
from shared.sandbox import Sandbox, free_port
from tests.devcluster import BIN, SESSION_TIMEOUT_S, wait_for

CHANNEL_YAML = """
sources:
  - {{name: src, host: 127.0.0.1, port: {source_port}, user: setl, password: "file:{secret}"}}
  - {{name: dst, host: 127.0.0.1, port: {target_port}, user: setl, password: "file:{secret}"}}
channels:
  - name: {name}
    description: test channel
    pipelines:
      - name: forward
        source: src
        target: dst
        parallelism: {parallelism}
        pairs:
          - {{source: shop.orders, target: shop_copy.orders}}
"""


@pytest.fixture
def channel_file(tmp_path: Path, sandbox: Sandbox) -> Callable[..., Path]:
    servers = sandbox.servers()

    def write(name: str = "orders", parallelism: int = 5, text: str | None = None) -> Path:
        path = tmp_path / f"{name}-{parallelism}.yaml"
        path.write_text(text if text is not None else CHANNEL_YAML.format(
            name=name, parallelism=parallelism, source_port=servers["source"].port,
            target_port=servers["target"].port, secret=sandbox.secret_file))
        return path
    return write


def run_cli(capsys: pytest.CaptureFixture[str], address: str, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(["--manager", address, *args])
    out, err = capsys.readouterr()
    return code, out, err


def dump(client: KazooClient, path: str) -> dict[str, bytes]:
    """Every znode below ``path`` with its data, for before/after comparisons."""
    found = {}
    stack = [path]
    while stack:
        current = stack.pop()
        data, _ = client.get(current)
        found[current] = data
        stack += [f"{current}/{child}" for child in client.get_children(current)]
    return found


def test_apply_list_show_start_delete(start_manager, zk_client, zk_root, channel_file, capsys,
                                      sandbox):
    _, address = start_manager()
    paths = zk.ZkPaths(zk_root)

    code, out, err = run_cli(capsys, address, "apply", "-f", str(channel_file()))
    assert code == 0, err
    assert "channel  orders  created  1" in " ".join(out.split("\n")).replace("   ", "  ")
    stored = codec.channel_from_bytes(zk_client.get(paths.channel("orders"))[0])
    channel = codec.from_proto(stored.channel, Channel)
    assert stored.version == 1
    assert [str(p.source) for p in channel.pipelines[0].pairs] == ["src:shop.orders"]
    assert zk_client.get(paths.channel_status("orders"))[0] == b"STOP"
    # the password is stored as its reference, never as the value
    source_bytes = zk_client.get(paths.source("src"))[0]
    assert f"file:{sandbox.secret_file}".encode() in source_bytes
    assert sandbox.password().encode() not in source_bytes

    code, out, _ = run_cli(capsys, address, "-o", "json", "channel", "list")
    listed = json.loads(out)["channels"]
    assert [c["channel"]["name"] for c in listed] == ["orders"]
    assert listed[0]["status"] == "STOP"

    code, out, _ = run_cli(capsys, address, "channel", "show", "orders")
    assert code == 0 and "pair: src:shop.orders -> dst:shop_copy.orders" in out

    assert run_cli(capsys, address, "channel", "start", "orders")[0] == 0
    assert zk_client.get(paths.channel_status("orders"))[0] == b"START"
    code, _, err = run_cli(capsys, address, "channel", "delete", "orders")
    assert code == 1 and "stop it first: setl channel stop orders" in err
    assert zk_client.exists(paths.channel("orders"))

    assert run_cli(capsys, address, "channel", "stop", "orders")[0] == 0
    code, out, _ = run_cli(capsys, address, "channel", "delete", "orders")
    assert code == 0 and "deleted" in out
    assert not zk_client.exists(paths.channel("orders"))
    assert not zk_client.exists(paths.channel_state("orders"))
    code, _, err = run_cli(capsys, address, "channel", "show", "orders")
    assert code == 1 and "no channel named 'orders'" in err


def test_channel_show_as_yaml_applies_again(start_manager, channel_file, tmp_path, capsys):
    """``channel show -o yaml`` is a definitions file (the channel as its YAML said it, what
    setl reports under status:): applied again it changes nothing; edited, the edit is taken.
    Enum values and numbers are spelled as in the definitions."""
    _, address = start_manager()
    assert run_cli(capsys, address, "apply", "-f", str(channel_file(parallelism=3)))[0] == 0
    code, out, _ = run_cli(capsys, address, "-o", "yaml", "channel", "show", "orders")
    shown = yaml.safe_load(out)
    assert shown["status"]["status"] == "STOP" and shown["status"]["version"] == 1
    assert shown["channels"] == [{
        "name": "orders", "description": "test channel", "pipelines": [{
            "name": "forward", "source": "src", "target": "dst", "parallelism": 3,
            "pairs": [{"source": "shop.orders", "target": "shop_copy.orders"}]}]}]
    path = tmp_path / "shown.yaml"
    path.write_text(out)
    code, out, err = run_cli(capsys, address, "-o", "json", "apply", "--dry-run", "-f",
                             str(path))
    assert code == 0, err
    assert [(c["name"], c["action"]) for c in json.loads(out)["changes"]] == \
        [("orders", "unchanged")]
    shown["channels"][0]["pipelines"][0]["parallelism"] = 4
    path.write_text(yaml.safe_dump(shown))
    code, out, err = run_cli(capsys, address, "-o", "json", "apply", "-f", str(path))
    assert code == 0, err
    assert [(c["name"], c["action"], c["version"]) for c in json.loads(out)["changes"]] == \
        [("orders", "updated", 2)]


def test_apply_twice_changes_nothing_and_a_change_bumps_the_version(
        start_manager, zk_client, zk_root, channel_file, capsys):
    _, address = start_manager()
    paths = zk.ZkPaths(zk_root)
    assert run_cli(capsys, address, "apply", "-f", str(channel_file()))[0] == 0
    before = zk_client.get(paths.channel("orders"))[1]

    code, out, _ = run_cli(capsys, address, "-o", "json", "apply", "-f", str(channel_file()))
    assert code == 0
    assert {c["action"] for c in json.loads(out)["changes"]} == {"unchanged"}
    assert zk_client.get(paths.channel("orders"))[1].mzxid == before.mzxid

    code, out, _ = run_cli(capsys, address, "-o", "json", "apply", "-f",
                           str(channel_file(parallelism=3)))
    changes = {c["name"]: (c["action"], c.get("version")) for c in json.loads(out)["changes"]}
    assert changes["orders"] == ("updated", 2)
    stored = codec.channel_from_bytes(zk_client.get(paths.channel("orders"))[0])
    assert stored.version == 2 and stored.channel.pipelines[0].params.parallelism == 3


def test_dry_run_and_invalid_apply_leave_zookeeper_unchanged(
        start_manager, zk_client, zk_root, channel_file, capsys):
    _, address = start_manager()
    assert run_cli(capsys, address, "apply", "-f", str(channel_file()))[0] == 0
    before = dump(zk_client, zk_root)

    code, out, _ = run_cli(capsys, address, "apply", "--dry-run", "-f",
                           str(channel_file("other")))
    assert code == 0 and "dry run: nothing stored" in out
    # one good channel and one bad one in the same file: nothing at all is stored
    good = channel_file("fresh").read_text()
    bad = good + """  - name: broken
    pipelines:
      - name: p
        source: src
        target: nowhere
        parallelism: five
        pairs: [{source: a.b, target: c.d}]
"""
    code, _, err = run_cli(capsys, address, "apply", "-f", str(channel_file("bad", text=bad)))
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[-1].endswith("2 error(s); nothing was stored")
    assert "channels[1].pipelines[0].target: unknown source 'nowhere'" in lines[0]
    assert 'channels[1].pipelines[0].parallelism: expected an integer from 1 to 64, got "five"' \
        in lines[1]
    assert lines[0].startswith(f"{channel_file('bad', text=bad)}:")
    assert dump(zk_client, zk_root) == before


def test_standby_manager_takes_over_when_the_leader_dies(start_manager, zk_client, zk_root,
                                                         channel_file, capsys):
    first, first_address = start_manager()
    _, second_address = start_manager()
    both = f"{first_address},{second_address}"

    def status(address: str) -> manager_pb2.StatusResponse:
        from manager.client import ManagerClient
        return ManagerClient([address], timeout_s=2).call("Status", manager_pb2.StatusRequest())

    assert status(first_address).leader and not status(second_address).leader
    # a change sent to the standby is followed to the leader
    assert run_cli(capsys, second_address, "apply", "-f", str(channel_file("one")))[0] == 0

    killed_at = time.monotonic()
    first.kill()
    wait_for(lambda: status(second_address).leader, SESSION_TIMEOUT_S + 10, "standby to lead")
    took_s = time.monotonic() - killed_at
    assert zk_client.get(zk.ZkPaths(zk_root).leader)[0].decode() == second_address
    code, _, err = run_cli(capsys, both, "apply", "-f", str(channel_file("two")))
    assert code == 0, err
    assert zk_client.exists(zk.ZkPaths(zk_root).channel("two"))
    print(f"standby took over {took_s:.1f}s after kill -9 (session timeout {SESSION_TIMEOUT_S}s)")


def test_a_manager_restarted_at_once_after_kill_9_leads_past_its_own_stale_entry(
        zk_client, zk_root, start_manager, channel_file, capsys):
    """Killed while it leads, its leader entry outlives it until its ZooKeeper session
    expires. Started again at the same address, it must not name itself as the leader to
    follow: the entry is an earlier life of its own, and a change is taken at once."""
    first, address = start_manager()
    leader = zk.ZkPaths(zk_root).leader
    old_session = zk_client.exists(leader).ephemeralOwner
    first.kill()
    start_manager(address)  # (well within the old session's timeout)
    assert ManagerClient([address], timeout_s=2).call("Status", manager_pb2.StatusRequest()).leader
    code, _, err = run_cli(capsys, address, "apply", "-f", str(channel_file("again")))
    assert code == 0, err
    assert zk_client.exists(zk.ZkPaths(zk_root).channel("again"))
    assert zk_client.exists(leader).ephemeralOwner != old_session


def test_node_registers_reports_candidates_and_vanishes_when_killed(
        start_manager, start_node, zk_client, zk_root, channel_file, capsys):
    _, address = start_manager()
    paths = zk.ZkPaths(zk_root)
    assert run_cli(capsys, address, "apply", "-f", str(channel_file("orders")))[0] == 0
    node = start_node(3)

    def candidates() -> list[str]:
        info = manager_pb2.NodeInfo()
        info.ParseFromString(zk_client.get(paths.node(3))[0])
        return list(info.candidate_pipelines)

    wait_for(lambda: candidates() == ["orders.forward"], 15, "node 3 to report its candidates")
    _, out, _ = run_cli(capsys, address, "-o", "json", "node", "list")
    nodes = json.loads(out)["nodes"]
    assert [(n["id"], n["pid"]) for n in nodes] == [(3, node.pid)]

    node.kill()
    wait_for(lambda: not zk_client.exists(paths.node(3)), SESSION_TIMEOUT_S + 10,
             "node 3's entry to disappear after kill -9")
    _, out, _ = run_cli(capsys, address, "node", "list")
    assert "no nodes registered" in out


def test_node_stops_cleanly_on_sigterm(start_node, zk_client, zk_root):
    """With spark.start: boot (the default) the node starts Spark as it starts, before any
    pipeline asks, and still stops cleanly."""
    node = start_node(4, spark={"master": "local[1]", "driver_memory": "512m",
                                "start": "boot"})
    wait_for(lambda: "event=spark_started" in node.output(), 90, "Spark started at boot")
    assert "event=pipeline_assigned" not in node.output()
    assert node.terminate() == 0
    assert not zk_client.exists(zk.ZkPaths(zk_root).node(4))
    assert "event=node_stopped node=4" in node.output()


def test_cli_fails_with_one_line_when_no_manager_answers():
    port = free_port()
    done = subprocess.run([str(BIN / "setl"), "--manager", f"127.0.0.1:{port}", "channel", "list"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"setl: no manager answers at 127.0.0.1:{port}; start one with 'setl-manager' or point "
        "--manager (or SETL_MANAGER) at a running one")
    assert "Traceback" not in done.stdout + done.stderr


def test_manager_told_to_give_up_fails_with_one_line_when_zookeeper_stays_down(tmp_path):
    config = tmp_path / "manager.yaml"
    port = free_port()
    config.write_text(f"zookeeper: {{hosts: '127.0.0.1:{port}', connect_timeout_s: 1, "
                      "give_up_after_s: 2}\n")
    done = subprocess.run([str(BIN / "setl-manager"), "--config", str(config), "--listen",
                           f"127.0.0.1:{free_port()}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "event=zk_waiting" in done.stderr  # it said that it waits, before giving up
    last = done.stderr.strip().splitlines()[-1]
    assert last == (f"setl-manager: ZooKeeper at 127.0.0.1:{port} did not answer within 2s "
                    "(zookeeper.give_up_after_s); check that it runs and that 'zookeeper.hosts' "
                    "in the config names it")
    assert "Traceback" not in done.stderr


def test_bad_daemon_config_names_file_line_and_field(tmp_path):
    config = tmp_path / "node.yaml"
    config.write_text("listen: 127.0.0.1:0\nzookeeper:\n  hots: x\n")
    done = subprocess.run([str(BIN / "setl-node"), "--id", "1", "--config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"{config}:3: zookeeper.hots: unknown key; did you mean 'hosts'?" in done.stderr
