"""The manager API's token: checked by a gRPC interceptor on a real in-process server before
the service sees a call; what the CLI's client says when refused; where a manager may listen
without a token."""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from manager.auth import (
    NO_TOKEN,
    WRONG_TOKEN,
    TokenCheck,
    TokenInterceptor,
    exposure_problem,
    resolve_token,
)
from manager.client import ManagerClient, access_from
from shared.confinement import Confinement
from shared.errors import AuthenticationError, ConfigError, ManagerUnavailableError, SetlError
from shared.rpc import manager_pb2, manager_pb2_grpc
from shared.settings import ApiSettings, ManagerSettings, WebSettings

TOKEN = "t0ken-with-enough-entropy"


class Answering(manager_pb2_grpc.ManagerServiceServicer):
    """Counts the calls that reach the service."""

    def __init__(self) -> None:
        self.calls = 0

    def Status(self, request: object, context: object) -> manager_pb2.StatusResponse:
        self.calls += 1
        return manager_pb2.StatusResponse(manager_address="answered")

    def Verify(self, request: object, context: object) -> Iterator[manager_pb2.VerifyProgress]:
        self.calls += 1
        yield manager_pb2.VerifyProgress(phase="checking")
        yield manager_pb2.VerifyProgress(phase="done")


@pytest.fixture
def served() -> Iterator[tuple[str, Answering, list[str]]]:
    service, refused = Answering(), []
    server = grpc.server(futures.ThreadPoolExecutor(2), interceptors=[
        TokenInterceptor(TokenCheck(TOKEN), refused.append)])
    manager_pb2_grpc.add_ManagerServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", service, refused
    server.stop(0)


def status(address: str, token: str | None) -> manager_pb2.StatusResponse:
    client = ManagerClient([address], timeout_s=5, access=access_from(token))
    return client.call("Status", manager_pb2.StatusRequest())


def test_the_right_token_reaches_the_service(served, monkeypatch) -> None:
    address, service, refused = served
    monkeypatch.delenv("SETL_TOKEN", raising=False)
    assert status(address, TOKEN).manager_address == "answered"
    monkeypatch.setenv("SETL_TOKEN", TOKEN)
    assert status(address, None).manager_address == "answered"
    assert (service.calls, refused) == (2, [])


def test_no_token_or_a_wrong_one_is_refused_before_the_service(served, monkeypatch) -> None:
    address, service, refused = served
    monkeypatch.delenv("SETL_TOKEN", raising=False)
    with pytest.raises(AuthenticationError, match="this manager requires a token: pass "
                       "--token or set SETL_TOKEN"):
        status(address, None)
    with pytest.raises(AuthenticationError, match=r"this manager refused the token given "
                       r"\(--token or SETL_TOKEN\)"):
        status(address, "not-" + TOKEN)
    with pytest.raises(AuthenticationError, match="refused the token"):
        status(address, TOKEN[:-1])  # a prefix is not the token
    assert (service.calls, refused) == (0, [NO_TOKEN, WRONG_TOKEN, WRONG_TOKEN])


def test_a_token_file_for_the_cli(served, tmp_path: Path) -> None:
    address, _, _ = served
    (tmp_path / "token").write_text(TOKEN + "\n")
    assert status(address, f"file:{tmp_path / 'token'}").manager_address == "answered"
    with pytest.raises(SetlError, match=r"--token .*nowhere: cannot read: No such file"):
        access_from(f"file:{tmp_path / 'nowhere'}")
    with pytest.raises(SetlError, match="--cert and --key go together"):
        access_from(None, None, str(tmp_path / "token"), None)


def test_check_compares_bearer_values_only() -> None:
    check = TokenCheck(TOKEN)
    assert check.problem(f"Bearer {TOKEN}") is None
    assert check.problem(f"bearer {TOKEN}") is None
    assert check.problem(None) == NO_TOKEN
    assert check.problem(f"Basic {TOKEN}") == WRONG_TOKEN
    assert check.problem(TOKEN) == WRONG_TOKEN
    assert TOKEN not in check.session and check.session_problem(check.session) is None
    assert TokenCheck(TOKEN + "x").session != check.session


def test_the_token_is_resolved_under_the_managers_rules(tmp_path: Path, monkeypatch) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "api-token").write_text(TOKEN + "\n")
    rules = Confinement(secret_dirs=(secrets,))
    settings = ManagerSettings(security=rules, api=ApiSettings(f"file:{secrets}/api-token"),
                               file="manager.yaml")
    assert resolve_token(settings).problem(f"Bearer {TOKEN}") is None  # type: ignore[union-attr]
    outside = dataclasses.replace(settings, api=ApiSettings(f"file:{tmp_path}/elsewhere"))
    with pytest.raises(ConfigError, match=r"manager.yaml: api.token: password reference "
                       r"file:.*: this machine reads password files only under"):
        resolve_token(outside)
    monkeypatch.setenv("SETL_API_TOKEN", "")
    empty = dataclasses.replace(settings, api=ApiSettings("${SETL_API_TOKEN}"))
    with pytest.raises(ConfigError, match=r"api\.token resolved to an empty value"):
        resolve_token(empty)
    assert resolve_token(ManagerSettings()) is None


@pytest.mark.parametrize(("listen", "web", "token", "refused"), [
    ("127.0.0.1:7310", "127.0.0.1:0", "", None),
    ("localhost:7310", "[::1]:7311", "", None),
    ("0.0.0.0:7310", "127.0.0.1:0", "", "listen 0.0.0.0:7310"),
    ("10.1.2.3:7310", "127.0.0.1:0", "", "listen 10.1.2.3:7310"),
    ("mgr.example:7310", "127.0.0.1:0", "", "listen mgr.example:7310"),
    ("127.0.0.1:7310", "0.0.0.0:7311", "", "web.listen 0.0.0.0:7311"),
    ("0.0.0.0:7310", "0.0.0.0:7311", "${SETL_API_TOKEN}", None),
])
def test_beyond_loopback_only_with_a_token(listen: str, web: str, token: str,
                                           refused: str | None) -> None:
    settings = ManagerSettings(listen=listen, web=WebSettings(web), api=ApiSettings(token),
                               file="conf/manager.yaml")
    problem = exposure_problem(settings)
    if refused is None:
        assert problem is None
    else:
        assert problem is not None and problem.startswith(
            f"{refused} is reachable from other machines, but no api.token is set")
        assert "Set api.token in conf/manager.yaml" in problem


def test_a_streaming_call_is_refused_without_the_token_too(served, monkeypatch) -> None:
    monkeypatch.delenv("SETL_TOKEN", raising=False)
    address, service, refused = served
    request = manager_pb2.VerifyRequest(channel="c")
    stream = ManagerClient([address], access=access_from(TOKEN)).stream("Verify", request)
    assert [m.phase for m in stream] == ["checking", "done"]
    with pytest.raises(AuthenticationError, match="requires a token"):
        list(ManagerClient([address], access=access_from(None)).stream("Verify", request))
    assert service.calls == 1 and refused == ["no_token"]


class Slow(manager_pb2_grpc.ManagerServiceServicer):
    """A manager that takes a call and answers it too late."""

    def Status(self, request: object, context: object) -> manager_pb2.StatusResponse:
        time.sleep(1.5)
        return manager_pb2.StatusResponse(manager_address="late")


def test_a_manager_that_takes_a_call_and_answers_late_is_not_called_absent() -> None:
    """A deadline passed on a manager that took the call says so (a change may have been
    made), not "no manager answers"; one passed on a listener that never speaks gRPC does."""
    server = grpc.server(futures.ThreadPoolExecutor(2))
    manager_pb2_grpc.add_ManagerServiceServicer_to_server(Slow(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    mute = socket.socket()
    mute.bind(("127.0.0.1", 0))
    mute.listen(1)  # the kernel accepts the connection; nothing ever answers on it
    try:
        with pytest.raises(ManagerUnavailableError, match=r"took the call \(Status\) but did "
                           r"not answer within 0.5 s.*may or may not have been made"):
            ManagerClient([f"127.0.0.1:{port}"], timeout_s=0.5).call(
                "Status", manager_pb2.StatusRequest())
        with pytest.raises(ManagerUnavailableError, match=r"no manager answers at 127\.0\.0\.1"):
            ManagerClient([f"127.0.0.1:{mute.getsockname()[1]}"], timeout_s=0.5).call(
                "Status", manager_pb2.StatusRequest())
    finally:
        mute.close()
        server.stop(0)
