"""setl's gRPC servers bind their ports alone: a port another gRPC server holds is an error
at start that names the address, never a port shared with it (gRPC's default, SO_REUSEPORT,
let the kernel send calls to either server)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures

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
