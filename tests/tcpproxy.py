"""A TCP proxy on 127.0.0.1 that a test can freeze: a host that vanished without a word.

Frozen, it forwards nothing more either way and accepts no new connection, but keeps every
socket open: no FIN, no RST reaches either end (as after a power cut, a partition, or a NAT
that dropped the flow). Only a peer's own keepalive can tell the connection is dead.
"""

from __future__ import annotations

import select
import socket
import threading
from types import TracebackType

POLL_S = 0.1  # how often a pump looks whether the proxy froze or closed


class FreezableProxy:
    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(POLL_S)
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.connections = 0  # connections forwarded
        self._frozen = threading.Event()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = [self._listener]
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def __enter__(self) -> FreezableProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def freeze(self) -> None:
        """Forward nothing more, accept nothing more, close nothing."""
        self._frozen.set()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            for sock in self._sockets:
                sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set() and not self._frozen.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._sockets += [client, upstream]
                self.connections += 1
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), name="proxy-pump",
                                 daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while not self._closed.is_set() and not self._frozen.is_set():
            try:
                readable, _, _ = select.select([source], [], [], POLL_S)
                if not readable:
                    continue
                data = source.recv(65536)
                if self._frozen.is_set():
                    return  # in flight when the host vanished: lost
                if not data:
                    sink.shutdown(socket.SHUT_WR)  # not frozen: an end closed, said on
                    return
                sink.sendall(data)
            except OSError:
                return
