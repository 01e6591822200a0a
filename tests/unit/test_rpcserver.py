"""setl's gRPC servers bind their ports alone: a port another gRPC server holds is an error
at start that names the address, never a port shared with it (gRPC's default, SO_REUSEPORT,
let the kernel send calls to either server)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from shared import rpcserver
from shared.errors import SetlError


@pytest.fixture
def held() -> Iterator[tuple[grpc.Server, int]]:
    """A started gRPC server of setl's on a free port of 127.0.0.1."""
    server = rpcserver.server(2)
    port = rpcserver.listen(server, "127.0.0.1:0", None, "choose another")
    server.start()
    yield server, port
    server.stop(grace=0).wait()


def test_a_port_a_server_of_setls_holds_is_refused_with_the_address(held) -> None:
    _, port = held
    second = rpcserver.server(2)
    with pytest.raises(SetlError) as caught:
        rpcserver.listen(second, f"127.0.0.1:{port}", None, "choose another with --listen")
    assert str(caught.value) == (f"cannot listen on 127.0.0.1:{port}: the address is taken "
                                 "or invalid; choose another with --listen")


def test_a_port_a_default_grpc_server_holds_is_refused_too() -> None:
    other = grpc.server(futures.ThreadPoolExecutor(2))  # SO_REUSEPORT, as gRPC sets it
    port = other.add_insecure_port("127.0.0.1:0")
    other.start()
    try:
        # the hazard itself: a second default server shares the port without an error
        shared = grpc.server(futures.ThreadPoolExecutor(2))
        assert shared.add_insecure_port(f"127.0.0.1:{port}") == port
        with pytest.raises(SetlError, match=f"cannot listen on 127.0.0.1:{port}"):
            rpcserver.listen(rpcserver.server(2), f"127.0.0.1:{port}", None, "choose another")
    finally:
        other.stop(grace=0).wait()


def test_an_invalid_address_is_refused() -> None:
    with pytest.raises(SetlError, match="cannot listen on nowhere:notaport"):
        rpcserver.listen(rpcserver.server(1), "nowhere:notaport", None, "choose another")


def test_readers_past_the_limit_are_refused_and_other_calls_still_answer() -> None:
    """Two of three threads may stream to readers: the third reader is refused at once (not
    queued behind them unseen), a plain call still answers, and a reader gone frees its
    place."""
    readers, done = rpcserver.Readers(2, "this test's server"), threading.Event()

    def read(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        with readers.held(context):
            yield b"connected"
            while context.is_active() and not done.wait(0.05):  # as an outbox reads
                pass

    handler = grpc.method_handlers_generic_handler("t.T", {
        "Read": grpc.stream_stream_rpc_method_handler(read),
        "Ping": grpc.unary_unary_rpc_method_handler(lambda request, context: b"pong")})
    server = rpcserver.server(3)
    server.add_generic_rpc_handlers((handler,))
    port = rpcserver.listen(server, "127.0.0.1:0", None, "choose another")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stream = channel.stream_stream("/t.T/Read")
        ping = channel.unary_unary("/t.T/Ping")
        first, second = stream(iter(())), stream(iter(()))
        assert next(first) == b"connected" and next(second) == b"connected"
        with pytest.raises(grpc.RpcError) as refused:
            next(stream(iter(())))
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
        assert refused.value.details().startswith(  # type: ignore[attr-defined]
            "this test's server streams to at most 2 subscription readers at once")
        assert ping(b"", timeout=10) == b"pong"
        first.cancel()
        assert _once_let_in(stream) == b"connected"  # the cancelled reader's place
    finally:
        done.set()
        channel.close()
        server.stop(grace=0).wait()


def _once_let_in(stream: Any) -> bytes:
    """A reader's first message once the server lets it in (a place is freed when the
    handler of a reader gone sees it: at once, but on another thread)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return next(stream(iter(())))
        except grpc.RpcError as refused:
            if time.monotonic() > deadline:
                raise AssertionError(f"no reader let in 10 s after one went away: {refused}") \
                    from None
        time.sleep(0.05)
