"""setl's gRPC servers (the manager's API, the node's RPC) made and bound one way.

gRPC sets ``SO_REUSEPORT`` on its listening sockets unless told not to, so a second server
bound to a port one of setl's servers holds (a manager started twice, a node given the
manager's address, another test's daemon) bound without an error, and the kernel shared the
connections between the two: calls went to either process at random. Here the option is
off, so a taken port is an error at start that names the address.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent import futures

import grpc

from shared.errors import SetlError

OPTIONS = (("grpc.so_reuseport", 0),)  # a taken port is an error, never a shared one


def server(workers: int, interceptors: Sequence[grpc.ServerInterceptor] = ()) -> grpc.Server:
    """A gRPC server with ``workers`` threads that binds its ports alone."""
    return grpc.server(futures.ThreadPoolExecutor(max_workers=workers),
                       interceptors=list(interceptors), options=list(OPTIONS))


def listen(rpc: grpc.Server, address: str, credentials: grpc.ServerCredentials | None,
           fix: str) -> int:
    """Bind ``address`` (TLS with ``credentials``); the port bound. A taken or invalid
    address raises, its message ending with ``fix`` (what to do)."""
    try:
        port = rpc.add_secure_port(address, credentials) if credentials else \
            rpc.add_insecure_port(address)
    except RuntimeError:  # grpcio ≥ 1.5x raises where older ones returned 0
        port = 0
    if port == 0:
        raise SetlError(f"cannot listen on {address}: the address is taken or invalid; {fix}")
    return port
