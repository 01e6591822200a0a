"""A definition reaches only what the node's operator allows (issue 18), on real servers:
the manager refuses a definition whose password reference or processor is outside the
configured directories and stores nothing; a definition written straight into ZooKeeper
with such a reference makes the node pause the pipeline with the reason, without reading
the file — which here holds the right password, so a node that read it would replicate.
A processor outside the processor directories, written the same way, pauses its pipeline
at start, while the same node runs a channel whose processor is allowed. Sources are managed
like channels: listed and shown with their references, deleted only when no channel uses
them, also when an apply creating such a channel lands in the middle of the delete. The node
refuses a source outside its database_hosts, and one with tls: whose server offers none (a
whole channel over verified TLS: test_tls.py)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import grpc
import pytest
from kazoo.client import KazooClient

from manager import cli
from shared import definitions, zk
from shared.catalog import Catalog
from shared.errors import ConflictError
from shared.rpc import manager_pb2, node_pb2_grpc
from shared.sandbox import Sandbox
from shared.settings import ZkSettings
from tests.devcluster import (
    Cluster,
    Database,
    make_certificates,
    make_schema,
    one_way,
    wait_equal,
    wait_for,
)

TABLE = "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(20))"


def outside_secret(sandbox: Sandbox, tmp_path: Path) -> Path:
    """A file outside every secret directory holding the sandbox's real password."""
    folder = tmp_path / "not-a-secret-dir"
    folder.mkdir()
    path = folder / "pw"
    path.write_text(sandbox.password() + "\n")
    return path


def test_apply_refuses_references_and_processors_outside_and_stores_nothing(
        sandbox: Sandbox, tmp_path: Path, zk_client: KazooClient) -> None:
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, TABLE)
    cluster = Cluster(sandbox, tmp_path, "refused")
    servers = sandbox.servers()
    sources = [{"name": "source", "host": "127.0.0.1", "port": servers["source"].port,
                "user": "setl", "password": f"file:{outside_secret(sandbox, tmp_path)}"},
               {"name": "target", "host": "127.0.0.1", "port": servers["target"].port,
                "user": "setl", "password": "${HOME}"}]
    channel = one_way("refused", schema, ["items"])
    channel["pipelines"][0]["pairs"][0]["processor"] = "os:getpid"
    try:
        cluster.start_manager()
        errors = cluster.apply_errors([channel], sources)
        found = {e.split(": ")[1]: e for e in errors}
        assert sorted(found) == ["channels[0].pipelines[0].pairs[0].processor",
                                 "sources[0].password", "sources[1].password"], errors
        assert all(e.startswith("test.yaml:") for e in errors), errors
        assert "secret_dirs" in found["sources[0].password"]
        assert "env_prefix" in found["sources[1].password"]
        assert "processor_dirs" in found["channels[0].pipelines[0].pairs[0].processor"]
        paths = zk.ZkPaths(cluster.root)
        assert Catalog(zk_client, paths).source_names() == []
        assert not zk_client.exists(paths.channels) or not zk_client.get_children(paths.channels)
    finally:
        cluster.stop()
        source.close()
        target.close()


def test_setl_apply_names_file_line_and_field_of_each_escape_and_stores_nothing(
        sandbox: Sandbox, tmp_path: Path, zk_client: KazooClient,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI a user runs: a secret directory of the manager's own, and a file that leaves
    it by '..' and by a symlink, a variable without the prefix, a private and a standard
    processor; one good source beside them. Every refusal is one line with file, line and
    field; ZooKeeper holds nothing afterwards."""
    secrets, elsewhere = tmp_path / "secrets", tmp_path / "elsewhere"
    secrets.mkdir()
    elsewhere.mkdir()
    (elsewhere / "pw").write_text(sandbox.password() + "\n")
    (secrets / "pw").write_text(sandbox.password() + "\n")
    (secrets / "link").symlink_to(elsewhere / "pw")
    cluster = Cluster(sandbox, tmp_path, "escapes", security={"secret_dirs": [str(secrets)]})
    definition = tmp_path / "shop.yaml"
    definition.write_text(f"""\
sources:
  - name: good
    host: 127.0.0.1
    password: "file:{secrets}/pw"
  - name: dotdot
    host: 127.0.0.1
    password: "file:{secrets}/../elsewhere/pw"
  - name: symlink
    host: 127.0.0.1
    password: "file:{secrets}/link"
  - name: env
    host: 127.0.0.1
    password: "${{PATH}}"
channels:
  - name: shop
    pipelines:
      - name: forward
        source: good
        target: good
        pairs:
          - source: shop.orders
            target: shop_copy.orders
            processor: "subprocess:run"
            virtual_columns:
              - {{name: x, processor: "setl_examples:_private"}}
""")
    try:
        address = cluster.start_manager()
        code = cli.main(["--manager", address, "apply", "-f", str(definition)])
        _, err = capsys.readouterr()
        lines = err.splitlines()
        assert code != 0 and lines[-1] == f"setl: {definition}: 5 error(s); nothing was stored"
        where = [line.split(": password reference")[0].split(": processor")[0]
                 for line in lines[:-1]]
        assert where == [f"{definition}:7: sources[1].password",
                         f"{definition}:10: sources[2].password",
                         f"{definition}:13: sources[3].password",
                         f"{definition}:23: channels[0].pipelines[0].pairs[0].processor",
                         f"{definition}:25: channels[0].pipelines[0].pairs[0]"
                         ".virtual_columns[0].processor"], err
        assert f"this machine reads password files only under {secrets} (its 'security' " \
               f"settings: secret_dirs); {secrets}/../elsewhere/pw is outside (it leads to " \
               f"{elsewhere / 'pw'}). Put the file there" in lines[0]
        assert f"{secrets}/link is outside (it leads to {elsewhere / 'pw'})" in lines[1]
        assert "export the password as SETL_PATH and refer to ${SETL_PATH}" in lines[2]
        assert "module subprocess is not in the processor directories" in lines[3]
        assert "a name starting with '_' is private" in lines[4]
        assert sandbox.password() not in err
        paths = zk.ZkPaths(cluster.root)
        assert Catalog(zk_client, paths).source_names() == []
        assert Catalog(zk_client, paths).channel_names() == []
    finally:
        cluster.stop()


def test_the_node_refuses_a_reference_written_straight_into_zookeeper(
        sandbox: Sandbox, tmp_path: Path, zk_client: KazooClient) -> None:
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, TABLE, TABLE.replace(".items", ".kept"))
    cluster = Cluster(sandbox, tmp_path, "bypass")
    servers = sandbox.servers()
    secret = outside_secret(sandbox, tmp_path)
    text = f"""
sources:
  - {{name: source, host: 127.0.0.1, port: {servers['source'].port}, user: setl,
      password: "file:{secret}"}}
  - {{name: target, host: 127.0.0.1, port: {servers['target'].port}, user: setl,
      password: "file:{sandbox.secret_file}"}}
  - {{name: source-ok, host: 127.0.0.1, port: {servers['source'].port}, user: setl,
      password: "file:{sandbox.secret_file}"}}
channels:
  - name: bypass
    pipelines:
      - {{name: forward, source: source, target: target,
          pairs: [{{source: "{schema}.items", target: "{schema}.items"}}]}}
  - name: code
    pipelines:
      - {{name: forward, source: target, target: target,
          pairs: [{{source: "{schema}.items", target: "{schema}.copy",
                   virtual_columns: [{{name: pid, processor: "os:getpid"}}]}}]}}
  - name: allowed
    pipelines:
      - {{name: forward, source: source-ok, target: target,
          pairs: [{{source: "{schema}.items", target: "{schema}.kept",
                   processor: "setl_examples:skip_test_rows"}}]}}
"""
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        # as someone with ZooKeeper access would: no manager, no check at apply
        Catalog(zk_client, zk.ZkPaths(cluster.root)).apply(definitions.load_text(text))
        source.execute(f"INSERT INTO `{schema}`.items VALUES (1, 'must not arrive')")
        for channel in ("code", "allowed"):
            cluster.set_status(channel, "START")
        # the manager, which fixes where a pipeline starts, refuses the source's password
        # file itself; started straight in ZooKeeper, the node must refuse it too
        with pytest.raises(grpc.RpcError, match="this machine reads password files only"):
            cluster.set_status("bypass", "START")
        start_past_the_manager(zk_client, cluster, "bypass")
        for channel in ("bypass", "code"):
            wait_for(lambda name=channel: cluster.channel_status(name) == "PAUSE", 120,
                     f"the node to pause channel {channel}")
        # the control: the same node runs what its rules allow, a processor of conf/processors
        cluster.wait_running("allowed", 120)
        source.execute(f"INSERT INTO `{schema}`.items VALUES (2, 'test_dropped'), (3, 'kept')")
        wait_for(lambda: target.table(schema, "kept") == [(3, "kept")], 120,
                 "the allowed channel to copy row 3")
        error = cluster.pipeline_state("bypass").last_error
        assert f"password reference file:{secret}: this machine reads password files only " \
               "under" in error, error
        assert "secret_dirs" in error
        assert target.table(schema, "items") == []
        assert "event=pipeline_paused pipeline=bypass.forward" in node.output()
        # a processor outside the node's processor directories: refused before any row
        error = cluster.pipeline_state("code").last_error
        assert error.startswith("pipeline code.forward: processor os:getpid: module os is not "
                                "in the processor directories of this machine ("), error
        assert "event=pipeline_paused pipeline=code.forward" in node.output()
    finally:
        cluster.stop()
        source.close()
        target.close()


def test_sources_are_listed_shown_and_deleted_only_when_no_channel_uses_them(
        sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, TABLE)
    cluster = Cluster(sandbox, tmp_path, "sources")
    servers = sandbox.servers()
    reference = f"file:{sandbox.secret_file}"
    sources = [{"name": name, "host": "127.0.0.1", "port": servers[server].port,
                "user": "setl", "password": reference}
               for name, server in (("source", "source"), ("target", "target"),
                                    ("spare", "target"))]

    def setl(*args: str) -> tuple[int, str, str]:
        code = cli.main(["--manager", cluster.manager_address, *args])
        out, err = capsys.readouterr()
        return code, out, err

    try:
        cluster.start_manager()
        cluster.apply([one_way("sources", schema, ["items"])], sources)
        code, out, _ = setl("source", "list")
        assert code == 0
        assert [line.split()[0] for line in out.splitlines()[1:]] == ["source", "spare", "target"]
        assert out.count(reference) == 3 and sandbox.password() not in out
        code, out, _ = setl("-o", "json", "source", "show", "spare")
        assert code == 0 and json.loads(out)["password"] == reference
        # in use: refused, and the channel still runs on it
        code, _, err = setl("source", "delete", "target")
        assert code != 0
        assert "source 'target' is used by channel(s) sources; delete those channels" in err
        code, out, _ = setl("source", "delete", "spare")
        assert (code, out.strip()) == (0, "source spare deleted")
        code, _, err = setl("source", "show", "spare")
        assert code != 0 and "no source named 'spare'" in err
        # once the channel is gone, its sources can go too
        assert setl("channel", "delete", "sources")[0] == 0
        assert setl("source", "delete", "target")[0] == 0
        code, out, _ = setl("source", "list")
        assert [line.split()[0] for line in out.splitlines()[1:]] == ["source"]
    finally:
        cluster.stop()
        source.close()
        target.close()


def start_past_the_manager(zk_client: KazooClient, cluster: Cluster, channel: str) -> None:
    """Set a channel's status to START in ZooKeeper, as someone with access to it could."""
    zk_client.set(zk.ZkPaths(cluster.root).channel_status(channel), b"START")


def test_the_node_refuses_a_host_outside_its_allowlist_and_tls_to_a_server_without_it(
        sandbox: Sandbox, tmp_path: Path, zk_client: KazooClient) -> None:
    """Two channels the manager accepts and the node must refuse: one whose source lies
    outside the node's database_hosts (a listener there shows nobody connected), one whose
    source has tls: while its server offers none. Both pause with the reason; no row
    arrives."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, TABLE)
    certificates = make_certificates(tmp_path / "tls")
    faraway = socket.create_server(("127.0.0.2", 0))  # a database the node may not reach
    servers, secret = sandbox.servers(), f"file:{sandbox.secret_file}"
    plain_port = servers["source"].port
    sources = [{"name": "faraway", "host": "127.0.0.2", "port": faraway.getsockname()[1],
                "user": "setl", "password": secret},
               {"name": "plain", "host": "127.0.0.1", "port": plain_port, "user": "setl",
                "password": secret, "tls": {"ca": str(certificates.ca)}},
               {"name": "target", "host": "127.0.0.1", "port": servers["target"].port,
                "user": "setl", "password": secret}]
    channels = {name: one_way(name, schema, ["items"], max_retries=0)
                for name in ("outside", "notls")}
    channels["outside"]["pipelines"][0]["source"] = "faraway"
    channels["notls"]["pipelines"][0]["source"] = "plain"
    cluster = Cluster(sandbox, tmp_path, "refusals", security={
        "database_hosts": ["127.0.0.1"],
        "secret_dirs": [str(sandbox.secret_file.parent), str(certificates.ca.parent)]})
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        cluster.apply(list(channels.values()), sources)
        source.execute(f"INSERT INTO `{schema}`.items VALUES (1, 'must not arrive')")
        refusals = {"outside": "host 127.0.0.2 is not among the database hosts",
                    "notls": "offers no TLS"}
        for name, refusal in refusals.items():  # the manager, reading where to start, refuses
            with pytest.raises(grpc.RpcError, match=refusal):
                cluster.set_status(name, "START")
            start_past_the_manager(zk_client, cluster, name)  # and the node must, too
        for name in channels:
            wait_for(lambda name=name: cluster.channel_status(name) == "PAUSE", 120,
                     f"the node to pause channel {name}")
        outside = cluster.pipeline_state("outside").last_error
        assert "source faraway: host 127.0.0.2 is not among the database hosts this machine " \
               "may connect to (127.0.0.1; its 'security' settings: database_hosts)" in outside, \
               outside
        faraway.setblocking(False)
        with pytest.raises(BlockingIOError):  # a connection made and closed would be queued
            faraway.accept()
        notls = cluster.pipeline_state("notls").last_error
        assert f"source plain has tls: but the server at 127.0.0.1:{plain_port} offers no " \
               "TLS, so setl did not log in. Enable TLS on the server" in notls, notls
        assert target.table(schema, "items") == []
        log = node.output()
        assert "event=pipeline_paused pipeline=outside.forward" in log
        assert "event=pipeline_paused pipeline=notls.forward" in log
    finally:
        cluster.stop()
        faraway.close()
        source.close()
        target.close()


def test_a_channel_applied_while_its_source_is_deleted_keeps_the_source(
        zk_client: KazooClient, zk_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The delete reads every channel, then commits; an apply that creates a channel using
    the source in between must make the delete fail, not leave a channel whose source is
    gone. The apply runs on its own ZooKeeper session, exactly between the two steps."""
    paths = zk.ZkPaths(zk_root)
    deleting, other = Catalog(zk_client, paths), zk.connect(
        ZkSettings(zk_client.hosts[0][0] + f":{zk_client.hosts[0][1]}"))
    assert other is not None
    text = """
sources:
  - {name: a, host: 127.0.0.1, password: "${SETL_PW}"}
  - {name: b, host: 127.0.0.1, password: "${SETL_PW}"}
"""
    deleting.apply(definitions.load_text(text))
    late = definitions.load_text("""
channels:
  - name: late
    pipelines:
      - {name: p, source: a, target: b, pairs: [{source: s.t, target: s.t}]}
""", known_sources=["a", "b"])
    listed = Catalog.channel_names

    def apply_meanwhile(catalog: Catalog) -> list[str]:
        names = listed(catalog)
        if catalog is deleting:
            Catalog(other, paths).apply(late)  # another manager's apply, committed now
        return names

    monkeypatch.setattr(Catalog, "channel_names", apply_meanwhile)
    try:
        with pytest.raises(ConflictError) as caught:
            deleting.delete_source("a")
        assert str(caught.value) == ("definitions changed while trying to delete source a; "
                                     "try again")
    finally:
        zk.close(other)
    monkeypatch.undo()
    assert deleting.source_names() == ["a", "b"]
    assert deleting.channel_names() == ["late"]
    with pytest.raises(ConflictError) as caught:
        deleting.delete_source("a")
    assert "source 'a' is used by channel(s) late" in str(caught.value)


@pytest.mark.parametrize("tls", [False, True])
def test_the_nodes_rpc_takes_only_the_managers_token_and_one_row_condition(
        sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str], tls: bool) -> None:
    """A node with api.token refuses an RPC without it (its verify reads the sources); the
    manager passes it (nodes.token; over the node's TLS, verified with nodes.ca) and verify
    runs; a --where that would read beyond the table's rows (a subquery) is refused by the
    node."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, TABLE)
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    (tokens / "node").write_text("node-token-123\n")
    reference = f"file:{tokens / 'node'}"
    api: dict[str, object] = {"token": reference}
    nodes: dict[str, object] = {"token": reference}
    if tls:
        certificates = make_certificates(tmp_path / "node-tls")
        api["tls"] = {"cert": str(certificates.server_cert), "key": str(certificates.server_key)}
        nodes["ca"] = str(certificates.ca)
    name = f"nodetoken{'-tls' if tls else ''}"
    cluster = Cluster(sandbox, tmp_path, name,
                      security={"secret_dirs": [str(sandbox.secret_file.parent), str(tokens)]},
                      manager_settings={"nodes": nodes}, node_settings={"api": api})
    try:
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([one_way(name, schema, ["items"])])
        cluster.set_status(name, "START")
        cluster.wait_running(name)
        source.execute(f"INSERT INTO `{schema}`.items VALUES (1, 'a'), (2, 'b')")
        wait_equal(source, target, schema, ["items"])
        setl = ["--manager", cluster.manager_address, "verify", name]
        assert cli.main(setl) == 0
        capsys.readouterr()
        assert cli.main([*setl, "--where", "id IN (SELECT 1 FROM mysql.user)"]) == 2
        assert "--where cannot use SELECT" in capsys.readouterr().err
        [node] = cluster.call("ListNodes", manager_pb2.ListNodesRequest()).nodes
        with (grpc.secure_channel(node.address, grpc.ssl_channel_credentials(
                certificates.ca.read_bytes())) if tls else grpc.insecure_channel(
                node.address)) as channel:
            stream = node_pb2_grpc.NodeServiceStub(channel).Verify(
                manager_pb2.VerifyRequest(channel=name, pipeline="forward"))
            with pytest.raises(grpc.RpcError) as refused:
                list(stream)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "this node requires a token" in (refused.value.details() or "")
        # the node's own token is no definition's password
        errors = cluster.apply_errors([], [
            {"name": f"stolen{'-tls' if tls else ''}", "host": "127.0.0.1",
             "port": sandbox.servers()["source"].port, "user": "setl", "password": reference}])
        assert any("names one of setl's own secrets" in error for error in errors), errors
    finally:
        cluster.stop()
        source.close()
        target.close()
