"""A small threaded HTTP server for what the daemons show over HTTP: the node's and the
manager's Prometheus ``/metrics`` and the manager's status page.

The handler is a plain function from :class:`Request` to :class:`Response`, so what is
served is tested without a socket; this module only binds, threads and translates.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from shared.errors import SetlError

log = logging.getLogger("setl.http")
MAX_BODY = 64 * 1024  # a form or a webhook test, never more


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # names in lower case
    body: bytes = b""


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = field(default=())


def split_address(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def is_loopback(listen: str) -> bool:
    """Whether a ``host:port`` to listen on is reachable from this machine only."""
    host = split_address(listen)[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name, or empty (every interface)
        return False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    handle: Callable[[Request], Response]

    def __init__(self, address: tuple[str, int], family: int) -> None:
        self.address_family = family
        super().__init__(address, _Handler)

    def handle_error(self, request: object, client_address: tuple[str, int]) -> None:
        # e.g. plain HTTP to the TLS port, or a client gone mid-request: nothing to serve
        log.debug("event=http_connection_failed peer=%s", client_address[0], exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = 30  # a client that sends nothing (or keeps an idle connection) lets go of its thread

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
        request = Request(self.command, parts.path, parse_qs(parts.query),
                          {name.lower(): value for name, value in self.headers.items()},
                          self.rfile.read(length) if length else b"")
        try:
            response = self.server.handle(request)
        except Exception:
            log.exception("event=http_failed path=%s", parts.path)
            response = Response(500, b"internal error; see the daemon's log\n")
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in response.headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_POST = do_HEAD = _serve

    def log_message(self, format: str, *args: object) -> None:
        log.debug("event=http_request peer=%s %s", self.client_address[0], format % args)


class HttpServer:
    """Serves ``handle`` on ``listen`` (``host:port``; port 0 takes a free port) in
    background threads, over TLS when given a server context."""

    def __init__(self, listen: str, handle: Callable[[Request], Response], what: str,
                 tls: ssl.SSLContext | None = None) -> None:
        self.listen, self.handle, self.what, self.tls = listen, handle, what, tls
        self._server: _Server | None = None
        self.address = ""

    def start(self) -> str:
        """Bind and serve; the bound ``host:port``. SetlError says what to change when the
        address cannot be had."""
        host, port = split_address(self.listen)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            server = _Server((host, port), family)
        except OSError as exc:
            raise SetlError(f"cannot serve {self.what} on {self.listen}: {exc.strerror}; "
                            "choose another address in the configuration") from None
        server.handle = self.handle
        if self.tls is not None:  # the handshake runs in the request's thread, not accept's
            server.socket = self.tls.wrap_socket(server.socket, server_side=True,
                                                 do_handshake_on_connect=False)
        self._server = server
        bound = server.server_address[1]
        self.address = f"[{host}]:{bound}" if family == socket.AF_INET6 else f"{host}:{bound}"
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                         name=f"http-{self.what}", daemon=True).start()
        return self.address

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.address}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
