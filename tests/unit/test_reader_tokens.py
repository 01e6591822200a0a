"""Subscription readers' own tokens (api.readers): on a real in-process server behind the
manager's interceptor, a reader's token reaches Subscribe and GetChannel of its channels
only; every other call, another channel, a move (Subscriber(start=...)) is refused with
PERMISSION_DENIED saying what the token may do; the admin token still does everything; the
tokens are resolved under the manager's rules, each its own."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from manager.auth import ApiInterceptor, Reader, TokenCheck, resolve_readers, resolve_token
from manager.client import Access, ManagerClient
from manager.subscriber import Subscriber
from shared.confinement import Confinement
from shared.errors import AuthenticationError, ConfigError, PermissionDeniedError
from shared.rpc import manager_pb2, manager_pb2_grpc, model_pb2, subscription_pb2
from shared.settings import ApiSettings, ManagerSettings, ReaderSettings

ADMIN = "admin-t0ken-with-enough-entropy"
ORDERS = "orders-reader-t0ken"
OTHER = "billing-reader-t0ken"


class Service(manager_pb2_grpc.ManagerServiceServicer):
    """Records the calls that reach it."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.entered = threading.Event()  # a Subscribe reached the servicer

    def Subscribe(self, requests: Iterator[subscription_pb2.SubscribeRequest],
                  context: object) -> Iterator[subscription_pb2.ChangeBatch]:
        self.entered.set()  # (the real one takes its share of the reading threads here)
        first = next(requests)
        self.calls.append(f"Subscribe {first.start.channel}")
        yield subscription_pb2.ChangeBatch(batch_id=0, epoch=1, stream=1)  # the hello
        yield subscription_pb2.ChangeBatch(batch_id=1, epoch=1, stream=1)

    def GetChannel(self, request: manager_pb2.GetChannelRequest,
                   context: object) -> manager_pb2.ChannelInfo:
        self.calls.append(f"GetChannel {request.name}")
        return manager_pb2.ChannelInfo(status=model_pb2.CHANNEL_STATUS_START)

    def SetChannelStatus(self, request: manager_pb2.SetChannelStatusRequest,
                         context: object) -> manager_pb2.ChannelInfo:
        self.calls.append(f"SetChannelStatus {request.name}")
        return manager_pb2.ChannelInfo()

    def Positions(self, request: manager_pb2.PositionsRequest,
                  context: object) -> manager_pb2.PositionsResponse:
        self.calls.append(f"Positions {request.channel}")
        return manager_pb2.PositionsResponse()

    def Status(self, request: object, context: object) -> manager_pb2.StatusResponse:
        self.calls.append("Status")
        return manager_pb2.StatusResponse(manager_address="answered")


@pytest.fixture
def served() -> Iterator[tuple[str, Service, list[str]]]:
    service, refused = Service(), []
    readers = (Reader(ORDERS.encode(), frozenset({"orders_feed"}), "api.readers[0]"),
               Reader(OTHER.encode(), frozenset({"billing", "ledger"}), "api.readers[1]"))
    server = grpc.server(futures.ThreadPoolExecutor(4), interceptors=[
        ApiInterceptor(TokenCheck(ADMIN), readers, refused.append)])
    manager_pb2_grpc.add_ManagerServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", service, refused
    server.stop(0)


def subscribe(address: str, token: str, channel: str) -> list[int]:
    with grpc.insecure_channel(address) as channel_:
        call = manager_pb2_grpc.ManagerServiceStub(channel_).Subscribe(
            iter([subscription_pb2.SubscribeRequest(start=subscription_pb2.SubscribeStart(
                channel=channel))]),
            metadata=(("authorization", f"Bearer {token}"),), timeout=5)
        return [batch.batch_id for batch in call]


def client(address: str, token: str) -> ManagerClient:
    return ManagerClient([address], timeout_s=5, access=Access(token=token))


def test_a_reader_subscribes_to_its_channel(served) -> None:
    address, service, refused = served
    assert subscribe(address, ORDERS, "orders_feed") == [0, 1]
    assert subscribe(address, OTHER, "ledger") == [0, 1]
    with Subscriber("orders_feed", managers=[address], access=Access(token=ORDERS),
                    give_up_s=5) as feed:
        batch = next(iter(feed))
        assert batch.batch_id == 1
    info = client(address, ORDERS).call("GetChannel",
                                        manager_pb2.GetChannelRequest(name="orders_feed"))
    assert info.status == model_pb2.CHANNEL_STATUS_START
    assert service.calls == ["Subscribe orders_feed", "Subscribe ledger",
                             "Subscribe orders_feed", "GetChannel orders_feed"]
    assert refused == []


def test_a_reader_reads_no_other_channel(served) -> None:
    address, service, refused = served
    with pytest.raises(grpc.RpcError) as caught:
        subscribe(address, ORDERS, "billing")
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert caught.value.details() == (
        "this token is a subscription reader's (api.readers[0] of the manager's "
        "configuration): it may only read channel orders_feed (setl subscribe, Subscriber), "
        "not channel billing; that needs the manager's admin token (api.token): ask its "
        "operator")
    with pytest.raises(PermissionDeniedError, match=r"it may only read channel orders_feed "
                       r".*not channel billing"):
        with Subscriber("billing", managers=[address], access=Access(token=ORDERS),
                        give_up_s=5) as feed:
            next(iter(feed))
    with pytest.raises(PermissionDeniedError, match="may only read channel billing, ledger"):
        client(address, OTHER).call("GetChannel",
                                    manager_pb2.GetChannelRequest(name="orders_feed"))
    assert service.calls == [] and refused == ["not_allowed"] * 3


@pytest.mark.parametrize(("method", "request_"), [
    ("SetChannelStatus", manager_pb2.SetChannelStatusRequest(
        name="orders_feed", status=model_pb2.CHANNEL_STATUS_STOP)),
    ("Positions", manager_pb2.PositionsRequest(channel="orders_feed")),
    ("Status", manager_pb2.StatusRequest()),
    ("Apply", manager_pb2.ApplyRequest()),
    ("DeleteChannel", manager_pb2.DeleteChannelRequest(name="orders_feed")),
])
def test_a_reader_calls_nothing_else_even_on_its_channel(served, method: str,
                                                         request_: object) -> None:
    address, service, refused = served
    with pytest.raises(PermissionDeniedError) as caught:
        client(address, ORDERS).call(method, request_)
    assert str(caught.value).startswith(
        "this token is a subscription reader's (api.readers[0] of the manager's "
        f"configuration): it may only read channel orders_feed (setl subscribe, Subscriber), "
        f"not {method}")
    assert "needs the manager's admin token (api.token)" in str(caught.value)
    assert service.calls == [] and refused == ["not_allowed"]


def test_a_reader_does_not_move_its_subscription(served) -> None:
    """Subscriber(start=...) (setl subscribe --from) stops the channel and sets its
    position: the admin API, refused before anything is stopped."""
    address, service, refused = served
    with pytest.raises(PermissionDeniedError, match=r"not SetChannelStatus \(moving a "
                       r"subscription, --from or Subscriber\(start=\.\.\.\)"):
        with Subscriber("orders_feed", managers=[address], access=Access(token=ORDERS),
                        start="latest", give_up_s=5) as feed:
            next(iter(feed))
    assert service.calls == [] and refused == ["not_allowed"]


def test_the_admin_token_does_everything_and_others_are_unauthenticated(served) -> None:
    address, service, refused = served
    assert subscribe(address, ADMIN, "billing") == [0, 1]
    admin = client(address, ADMIN)
    admin.call("SetChannelStatus", manager_pb2.SetChannelStatusRequest(name="orders_feed"))
    admin.call("Positions", manager_pb2.PositionsRequest(channel="orders_feed"))
    assert admin.call("Status", manager_pb2.StatusRequest()).manager_address == "answered"
    for token in ("not-" + ORDERS, ORDERS[:-1], ORDERS + "x", ""):
        with pytest.raises(grpc.RpcError) as caught:
            subscribe(address, token, "orders_feed")
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(AuthenticationError) as refused_call:
            client(address, token).call("Status", manager_pb2.StatusRequest())
        assert not isinstance(refused_call.value, PermissionDeniedError)
    with grpc.insecure_channel(address) as channel, pytest.raises(grpc.RpcError) as caught:
        list(manager_pb2_grpc.ManagerServiceStub(channel).Subscribe(
            iter([subscription_pb2.SubscribeRequest(start=subscription_pb2.SubscribeStart(
                channel="orders_feed"))]),
            metadata=(("authorization", f"Basic {ORDERS}"),), timeout=5))
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert service.calls == ["Subscribe billing", "SetChannelStatus orders_feed",
                             "Positions orders_feed", "Status"]
    assert "not_allowed" not in refused and len(refused) == 9


def _settings(tmp_path: Path, *readers: ReaderSettings) -> ManagerSettings:
    secrets = tmp_path / "secrets"
    secrets.mkdir(exist_ok=True)
    (secrets / "api-token").write_text(ADMIN + "\n")
    (secrets / "orders").write_text(ORDERS + "\n")
    return ManagerSettings(security=Confinement(secret_dirs=(secrets,)), file="manager.yaml",
                           api=ApiSettings(f"file:{secrets}/api-token", None, readers))


def test_reader_tokens_are_resolved_each_its_own(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SETL_READER_B", OTHER)
    settings = _settings(tmp_path, ReaderSettings(
        f"file:{tmp_path}/secrets/orders", ("orders_feed",), 4),
        ReaderSettings("${SETL_READER_B}", ("billing", "ledger"), 6))
    assert resolve_readers(settings, resolve_token(settings)) == (
        Reader(ORDERS.encode(), frozenset({"orders_feed"}), "api.readers[0]"),
        Reader(OTHER.encode(), frozenset({"billing", "ledger"}), "api.readers[1]"))
    for readers, message in [
        ((ReaderSettings("${SETL_READER_C}", ("c",), 5),),
         r"^manager.yaml:5: api.readers\[0\].token: password reference \$\{SETL_READER_C\}: "
         r"environment variable SETL_READER_C is not set"),
        ((ReaderSettings(f"file:{tmp_path}/elsewhere", ("c",), 7),),
         r"^manager.yaml:7: api.readers\[0\].token: password reference file:.*: this machine "
         r"reads password files only under"),
        ((ReaderSettings("${SETL_READER_B}", ("b",), 4),
          ReaderSettings("${SETL_READER_SAME}", ("c",), 6)),
         r"^manager.yaml:6: api.readers\[1\].token: \$\{SETL_READER_SAME\} holds the same "
         r"token as api.readers\[0\]: give each reader a token of its own"),
        ((ReaderSettings("${SETL_READER_ADMIN}", ("c",), 4),),
         r"^manager.yaml:4: api.readers\[0\].token: \$\{SETL_READER_ADMIN\} holds the admin "
         r"token \(api.token\), which may do everything: give the reader a token of its own"),
        ((ReaderSettings("${SETL_READER_EMPTY}", ("c",), 4),),
         r"^manager.yaml:4: api.readers\[0\].token: \$\{SETL_READER_EMPTY\} resolved to an "
         r"empty value"),
    ]:
        monkeypatch.setenv("SETL_READER_SAME", OTHER)
        monkeypatch.setenv("SETL_READER_ADMIN", ADMIN)
        monkeypatch.setenv("SETL_READER_EMPTY", "")
        wrong = dataclasses.replace(settings, api=dataclasses.replace(settings.api,
                                                                      readers=readers))
        with pytest.raises(ConfigError, match=message) as caught:
            resolve_readers(wrong, resolve_token(wrong))
        assert ADMIN not in str(caught.value) and OTHER not in str(caught.value)


def test_a_reader_s_stream_is_in_the_servicer_before_its_first_message(served) -> None:
    """The servicer holds the manager's share of threads for readers: a reader's stream that
    never sends its first message waits there, inside that share, not in the interceptor
    (where streams of a reader's token could take every thread: every call stalled)."""
    address, service, _ = served
    release, answer = threading.Event(), []

    def requests() -> Iterator[subscription_pb2.SubscribeRequest]:
        release.wait(10)
        yield subscription_pb2.SubscribeRequest(start=subscription_pb2.SubscribeStart(
            channel="orders_feed"))

    def read() -> None:
        with grpc.insecure_channel(address) as channel_:
            call = manager_pb2_grpc.ManagerServiceStub(channel_).Subscribe(
                requests(), metadata=(("authorization", f"Bearer {ORDERS}"),), timeout=10)
            answer.extend(batch.batch_id for batch in call)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert service.entered.wait(5), "the stream waited for its first message outside " \
            "the servicer"
    finally:
        release.set()
        reader.join(10)
    assert answer == [0, 1] and service.calls == ["Subscribe orders_feed"]
