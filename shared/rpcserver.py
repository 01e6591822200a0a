"""setl's gRPC servers (the manager's API, the node's RPC) made and bound one way.

gRPC sets ``SO_REUSEPORT`` on its listening sockets unless told not to, so a second server
bound to a port one of setl's servers holds (a manager started twice, a node given the
manager's address, another test's daemon) bound without an error, and the kernel shared the
connections between the two: calls went to either process at random. Here the option is
off, so a taken port is an error at start that names the address. Each server pings its
clients and lets them ping it (:mod:`shared.keepalive`): a reader whose host vanished is
dropped, its stream and slot freed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc

from shared.errors import SetlError
from shared.keepalive import Keepalive, server_options

OPTIONS = (("grpc.so_reuseport", 0),)  # a taken port is an error, never a shared one


def server(workers: int, interceptors: Sequence[grpc.ServerInterceptor] = (),
           keepalive: Keepalive = Keepalive()) -> grpc.Server:
    """A gRPC server with ``workers`` threads that binds its ports alone and drops a
    client that stops answering its pings (``keepalive``)."""
    return grpc.server(futures.ThreadPoolExecutor(max_workers=workers),
                       interceptors=list(interceptors),
                       options=[*OPTIONS, *server_options(keepalive)])


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


class Readers:
    """The subscription readers a server streams to at once. Each holds one of the server's
    threads for as long as it reads, and gRPC queues a call that finds every thread taken
    without a word: past the threads, a new reader would wait for ever, and so would every
    other call (``setl status``, a stop). So at most ``most`` readers, fewer than the
    threads, and the next one is refused (RESOURCE_EXHAUSTED: it tries again until its
    give_up_s) with what to do."""

    def __init__(self, most: int, server: str) -> None:
        self.most, self.server = most, server
        self._free = threading.BoundedSemaphore(most)

    @contextmanager
    def held(self, context: Any) -> Iterator[None]:
        if not self._free.acquire(blocking=False):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"{self.server} streams to at most {self.most} subscription readers "
                          "at once, and that many read now: stop a reader that is not needed, "
                          "or spread the subscriptions over more nodes (the manager relays "
                          "each reader: run the readers of one manager under its limit)")
        try:
            yield
        finally:
            self._free.release()
