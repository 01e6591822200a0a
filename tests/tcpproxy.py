"""A TCP relay on 127.0.0.1 that a test can freeze: a server, or a client, whose host vanished
without a word.

Frozen, it forwards nothing more either way, and a new connection goes no further than the
relay, but every socket stays open: no FIN, no RST reaches either end (as after a power cut,
a partition, or a NAT that dropped the flow: nothing is refused, nothing answers). Only a
peer's own keepalive or timeout can tell. ``thaw()`` forwards again; ``close()`` ends every
connection.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType


class Relay:
    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.upstream = (host, port)
        self.open = threading.Event()
        self.open.set()
        self.held = threading.Event()  # set once a frozen relay holds back some bytes
        self.closed = False
        self.connections = 0  # connections forwarded
        self.sockets: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True, name="relay").start()

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def freeze(self) -> None:
        self.held.clear()
        self.open.clear()

    def thaw(self) -> None:
        self.open.set()

    def close(self) -> None:
        self.closed = True
        self.open.set()
        for sock in [self.listener, *self.sockets]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.sockets.append(client)
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        self.open.wait()
        if self.closed:
            return
        try:
            server = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        self.sockets.append(server)
        self.connections += 1
        for a, b in ((client, server), (server, client)):
            threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, reader: socket.socket, writer: socket.socket) -> None:
        try:
            while data := reader.recv(65536):
                if not self.open.is_set():
                    self.held.set()
                self.open.wait()
                if self.closed:
                    return
                writer.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (reader, writer):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
