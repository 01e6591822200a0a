"""The manager's web port: the status page (``/``, refreshed from ``/fragment``), its script
and style, and Prometheus ``/metrics``. Read-only: nothing here changes anything.

When the API has a token, so does every path here: a browser gives it once in a form and
gets a session cookie derived from it (HttpOnly, SameSite=Strict); a scraper or script sends
``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import parse_qs

from manager import page
from manager.auth import SESSION_COOKIE, TokenCheck
from manager.metrics import PROMETHEUS_TEXT, ManagerMetrics
from manager.monitor import Monitor
from shared.httpserver import Request, Response

log = logging.getLogger("setl.manager.web")
HTML = "text/html; charset=utf-8"
SECURITY_HEADERS = (
    ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; "
                                "frame-ancestors 'none'; form-action 'self'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
)


class StatusSite:
    def __init__(self, monitor: Monitor, metrics: ManagerMetrics, role: Callable[[], str],
                 check: TokenCheck | None, secure: bool = False) -> None:
        self.monitor, self.metrics, self.role, self.check = monitor, metrics, role, check
        self.secure = secure  # served over TLS: the cookie is sent only over TLS too

    def handle(self, request: Request) -> Response:
        if request.path == "/login" and request.method == "POST" and self.check is not None:
            return self._login(request)
        if self.check is not None and not self._allowed(request):
            if request.path in ("/", "/index.html"):
                return self._html(page.login(), 401)
            if request.path in ("/page.css", "/page.js"):
                return self._static(request.path)
            return Response(401, b"this manager requires its API token: send "
                            b"'Authorization: Bearer <token>'\n",
                            headers=(("WWW-Authenticate", 'Bearer realm="setl"'),))
        if request.path in ("/", "/index.html"):
            return self._html(page.page(self._fragment(), self.monitor.settings.poll_s))
        if request.path == "/fragment":
            return self._html(self._fragment())
        if request.path == "/metrics":
            return Response(200, self.metrics.text(), PROMETHEUS_TEXT)
        if request.path in ("/page.css", "/page.js"):
            return self._static(request.path)
        return Response(404, b"not found: the status page is at /, metrics at /metrics\n")

    def _fragment(self) -> str:
        seen = self.monitor.latest
        history = {pid: self.monitor.history.of(pid) for pid in self.monitor.history.samples}
        return page.fragment(seen, history, self.monitor.history.span_s,
                             self.monitor.alarms(), self.role())

    def _allowed(self, request: Request) -> bool:
        assert self.check is not None
        if self.check.problem(request.headers.get("authorization")) is None:
            return True
        cookie = _cookies(request.headers.get("cookie", "")).get(SESSION_COOKIE)
        return cookie is not None and self.check.session_problem(cookie) is None

    def _login(self, request: Request) -> Response:
        assert self.check is not None
        token = parse_qs(request.body.decode("utf-8", "replace")).get("token", [""])[0]
        if self.check.problem(f"Bearer {token}") is not None:
            log.warning("event=web_refused reason=%s", "no_token" if not token else
                        "wrong_token")
            return self._html(page.login("That is not this manager's token."), 401)
        cookie = (f"{SESSION_COOKIE}={self.check.session}; Path=/; HttpOnly; "
                  f"SameSite=Strict{'; Secure' if self.secure else ''}")
        return Response(303, b"", headers=(("Location", "/"), ("Set-Cookie", cookie)))

    def _html(self, text: str, status: int = 200) -> Response:
        return Response(status, text.encode(), HTML, SECURITY_HEADERS)

    def _static(self, path: str) -> Response:
        if path == "/page.js":
            return Response(200, page.SCRIPT.encode(), "text/javascript; charset=utf-8")
        return Response(200, page.STYLE.encode(), "text/css; charset=utf-8")


def _cookies(header: str) -> dict[str, str]:
    found = {}
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name:
            found[name] = value
    return found
