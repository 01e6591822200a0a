"""Security of the manager's API (issue 15 part 4), on a real manager and ZooKeeper: with
api.token, a call without it or with another is refused with what to do, and ZooKeeper is
left exactly as it was; the status page and /metrics need the token too. A manager refuses
to listen beyond loopback without a token. Over TLS (a CA made with openssl here), the CLI
needs --ca, a client certificate when the manager asks for one, and refuses a server whose
certificate another CA signed."""

from __future__ import annotations

import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from manager import cli
from shared import zk
from shared.sandbox import Sandbox, free_port
from tests.devcluster import BIN, Certificates, Daemon, make_certificates, wait_for

TOKEN = "s3cret-api-token-for-tests"
CHANNEL = """
sources:
  - {{name: src, host: 127.0.0.1, port: {port}, user: setl, password: "file:{secret}"}}
channels:
  - name: guarded
    pipelines:
      - {{name: forward, source: src, target: src, pairs: [{{source: a.t, target: b.t}}]}}
"""


def dump(client: KazooClient, path: str) -> dict[str, bytes]:
    """Every znode below ``path`` with its data (ephemeral leader included)."""
    found, stack = {}, [path]
    while stack:
        current = stack.pop()
        found[current] = client.get(current)[0]
        stack += [f"{current}/{child}" for child in client.get_children(current)]
    return found


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def secured(daemons: list[Daemon], daemon_config: Callable[..., Path], tmp_path: Path,
            sandbox: Sandbox, zk_client: KazooClient, zk_root: str
            ) -> Callable[..., tuple[str, Daemon]]:
    """Start a manager with a token (in a file of its secret directory) and maybe TLS;
    return its address once it leads."""
    secrets = tmp_path / "manager-secrets"
    secrets.mkdir()
    (secrets / "api-token").write_text(TOKEN + "\n")

    def start(tls: dict[str, str] | None = None,
              readers: list[dict[str, object]] | None = None) -> tuple[str, Daemon]:
        address = f"127.0.0.1:{free_port()}"
        api: dict[str, object] = {"token": f"file:{secrets}/api-token"}
        if tls:
            api["tls"] = tls
        if readers:
            api["readers"] = readers
        config = daemon_config("manager", api=api, security={
            "secret_dirs": [str(secrets), str(sandbox.secret_file.parent)]})
        daemon = Daemon([str(BIN / "setl-manager"), "--config", str(config), "--listen",
                         address], tmp_path / f"manager-{address[10:]}.log")
        daemons.append(daemon)
        wait_for(lambda: zk_client.exists(zk.ZkPaths(zk_root).leader), 30, "the manager "
                 "to lead")
        wait_for(lambda: "event=manager_started" in daemon.output(), 30, "the manager")
        return address, daemon
    return start


def web_url(daemon: Daemon) -> str:
    line = next(line for line in daemon.output().splitlines()
                if "event=manager_started" in line)
    return line.split(" web=")[1].split()[0]


def test_without_the_token_nothing_changes_and_nothing_shows(
        secured, capsys, tmp_path: Path, sandbox: Sandbox, zk_client: KazooClient,
        zk_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SETL_TOKEN", raising=False)
    address, daemon = secured()
    definitions = tmp_path / "guarded.yaml"
    definitions.write_text(CHANNEL.format(port=sandbox.servers()["source"].port,
                                          secret=sandbox.secret_file))
    before = dump(zk_client, zk_root)

    code, _, err = run_cli(capsys, "--manager", address, "apply", "-f", str(definitions))
    assert code == 1
    assert err.strip() == ("setl: this manager requires a token: pass --token or set "
                           "SETL_TOKEN (the value, or file:PATH of a file holding it) to the "
                           "token its operator configured (api.token)")
    code, _, err = run_cli(capsys, "--manager", address, "--token", "guess", "apply", "-f",
                           str(definitions))
    assert code == 1 and "this manager refused the token given (--token or SETL_TOKEN)" in err
    assert dump(zk_client, zk_root) == before  # nothing stored, nothing touched

    monkeypatch.setenv("SETL_TOKEN", TOKEN)
    assert run_cli(capsys, "--manager", address, "apply", "-f", str(definitions))[0] == 0
    status = zk.ZkPaths(zk_root).channel_status("guarded")
    assert zk_client.get(status)[0] == b"STOP"
    monkeypatch.delenv("SETL_TOKEN")
    stored = dump(zk_client, zk_root)
    for args in (["channel", "start", "guarded"], ["channel", "delete", "guarded"],
                 ["--token", TOKEN + "x", "channel", "start", "guarded"]):
        code, _, err = run_cli(capsys, "--manager", address, *args)
        assert code == 1 and "token" in err, err
    assert dump(zk_client, zk_root) == stored
    token_file = tmp_path / "my-token"
    token_file.write_text(TOKEN)
    code, out, _ = run_cli(capsys, "--manager", address, "--token", f"file:{token_file}",
                           "channel", "list")
    assert code == 0 and "guarded" in out

    page = web_url(daemon)
    for path in ("", "fragment", "metrics"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{page}{path}", timeout=10)
        assert refused.value.code == 401
        assert b"guarded" not in refused.value.read()
    request = urllib.request.Request(f"{page}metrics",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        metrics = answer.read().decode()
    assert 'setl_manager_rpc_refused_total{reason="no_token"} 3.0' in metrics
    assert 'setl_manager_rpc_refused_total{reason="wrong_token"} 2.0' in metrics
    log = daemon.output()
    assert "event=rpc_refused method=/setl.v1.ManagerService/Apply reason=no_token" in log
    assert TOKEN not in log


READER = "s3cret-reader-token-for-tests"
READER_CHANNELS = """
sources:
  - {{name: src, host: 127.0.0.1, port: {port}, user: setl, password: "file:{secret}"}}
channels:
  - name: reader-guarded
    pipelines:
      - {{name: forward, source: src, target: src, pairs: [{{source: a.t, target: b.t}}]}}
  - name: reader-other
    pipelines:
      - {{name: forward, source: src, target: src, pairs: [{{source: a.t, target: c.t}}]}}
"""


def test_a_readers_token_reads_its_channel_and_does_nothing_else(
        secured, capsys, tmp_path: Path, sandbox: Sandbox, zk_client: KazooClient,
        zk_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """api.readers on a real manager: the reader's token (an environment variable here)
    passes to Subscribe of its own channel only (this one is no subscription: the manager
    itself says so), every admin call and a --from move are refused with what the token may
    do, ZooKeeper untouched; the status page does not take it."""
    monkeypatch.delenv("SETL_TOKEN", raising=False)
    monkeypatch.setenv("SETL_READER_GUARDED", READER)
    address, daemon = secured(readers=[{"token": "${SETL_READER_GUARDED}",
                                        "channels": ["reader-guarded"]}])
    definitions = tmp_path / "readers.yaml"
    definitions.write_text(READER_CHANNELS.format(port=sandbox.servers()["source"].port,
                                                  secret=sandbox.secret_file))
    assert run_cli(capsys, "--manager", address, "--token", TOKEN, "apply", "-f",
                   str(definitions))[0] == 0
    stored = dump(zk_client, zk_root)
    allowed = ("this token is a subscription reader's (api.readers[0] of the manager's "
               "configuration): it may only read channel reader-guarded (setl subscribe, "
               "Subscriber), not ")
    reader = ["--manager", address, "--token", READER]
    for args, doing in [
            (["channel", "start", "reader-guarded"], "SetChannelStatus (moving a "),
            (["channel", "delete", "reader-guarded"], "DeleteChannel"),
            (["channel", "list"], "ListChannels"),
            (["apply", "-f", str(definitions)], "Apply"),
            (["subscribe", "reader-guarded", "--from", "latest"], "SetChannelStatus (moving a "),
            (["subscribe", "reader-other"], "channel reader-other")]:
        code, _, err = run_cli(capsys, *reader, *args)
        assert code == 1 and f"{allowed}{doing}" in err, (args, err)
        assert "needs the manager's admin token (api.token)" in err
    assert dump(zk_client, zk_root) == stored  # nothing stopped, moved, redefined, deleted
    # its own channel: past the token check, to the manager's own answer
    code, _, err = run_cli(capsys, *reader, "subscribe", "reader-guarded", "--count", "1")
    assert code == 1 and "pipeline reader-guarded.forward writes src (mysql), not a " \
        "subscription" in err, err
    code, _, err = run_cli(capsys, "--manager", address, "--token", READER + "x", "subscribe",
                           "reader-guarded")
    assert code == 1 and "this manager refused the token given" in err

    page = web_url(daemon)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(
            f"{page}metrics", headers={"Authorization": f"Bearer {READER}"}), timeout=10)
    assert refused.value.code == 401
    request = urllib.request.Request(f"{page}metrics",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert 'setl_manager_rpc_refused_total{reason="not_allowed"} 6.0' in \
            answer.read().decode()
    log = daemon.output()
    assert "event=rpc_refused method=/setl.v1.ManagerService/Subscribe reason=not_allowed " \
        "caller=api.readers[0] channel=reader-other" in log
    assert "readers=1" in log and READER not in log and TOKEN not in log


def test_beyond_loopback_without_a_token_the_manager_does_not_start(
        daemon_config: Callable[..., Path]) -> None:
    config = daemon_config("manager")
    port = free_port()
    done = subprocess.run([str(BIN / "setl-manager"), "--config", str(config), "--listen",
                           f"0.0.0.0:{port}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"setl-manager: listen 0.0.0.0:{port} is reachable from other machines, but no "
        "api.token is set, so anyone reaching it could change definitions. Set api.token in "
        f"{config} (a ${{SETL_...}} or file: reference to the token), or listen on 127.0.0.1")


def client_certificate(certificates: Certificates, folder: Path) -> tuple[Path, Path]:
    """A client certificate signed by the test CA (openssl)."""
    cert, key, request = folder / "client.pem", folder / "client-key.pem", folder / "client.csr"
    for command in (
            ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=setl admin", "-keyout", key,
             "-out", request],
            ["x509", "-req", "-in", request, "-CA", certificates.ca, "-CAkey",
             certificates.ca.parent / "ca-key.pem", "-CAcreateserial", "-days", "2", "-out",
             cert]):
        subprocess.run(["openssl", *map(str, command)], check=True, capture_output=True)
    return cert, key


def test_tls_with_a_client_certificate(secured, capsys, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SETL_TOKEN", TOKEN)
    ours = make_certificates(tmp_path / "tls")
    stranger = make_certificates(tmp_path / "stranger")
    cert, key = client_certificate(ours, tmp_path / "tls")
    address, daemon = secured({"cert": str(ours.server_cert), "key": str(ours.server_key),
                               "client_ca": str(ours.ca)})
    trusted = ["--manager", address, "--ca", str(ours.ca), "--cert", str(cert), "--key",
               str(key)]

    code, out, err = run_cli(capsys, *trusted, "status")
    assert code == 0, err
    assert f"manager {address} (leader)" in out and "page https://127.0.0.1:" in out
    code, _, err = run_cli(capsys, "--manager", address, "status")
    assert code == 1 and "closed the connection; if it is a manager with TLS, give --ca" in err
    code, _, err = run_cli(capsys, "--manager", address, "--ca", str(stranger.ca), "--cert",
                           str(cert), "--key", str(key), "status")
    assert code == 1 and "no TLS connection to a manager at" in err and "check that --ca (or " \
        "SETL_CA) is the CA that signed the manager's certificate" in err, err
    code, _, err = run_cli(capsys, "--manager", address, "--ca", str(ours.ca), "status")
    assert code == 1 and "closed the connection during the TLS handshake; if it asks for a " \
        "client certificate, give --cert and --key" in err, err
    monkeypatch.delenv("SETL_TOKEN")
    code, _, err = run_cli(capsys, *trusted, "status")
    assert code == 1 and "this manager requires a token" in err  # TLS is not the token

    context = ssl.create_default_context(cafile=str(ours.ca))
    context.load_cert_chain(str(cert), str(key))
    request = urllib.request.Request(f"{web_url(daemon)}metrics",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10, context=context) as answer:
        assert b"setl_manager_leader 1.0" in answer.read()
