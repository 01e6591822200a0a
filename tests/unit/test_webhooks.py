"""A webhook that answers with a redirect gets no second request: urllib would carry the
``Authorization`` header to wherever the redirect points (tested with two real HTTP servers
on 127.0.0.1)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest

from manager.webhooks import Notifier, WebhookError
from shared.alarmrules import Webhook
from shared.confinement import Confinement


class Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str | None]]] = []
    location = ""

    def _answer(self) -> None:
        type(self).seen.append((self.path, self.headers.get("Authorization")))
        if type(self).location:
            self.send_response(302)
            self.send_header("Location", type(self).location)
        else:
            self.send_response(204)
        self.end_headers()

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


def serve(location: str) -> tuple[http.server.HTTPServer, type[Recorder]]:
    handler = type("Handler", (Recorder,), {"seen": [], "location": location})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler


@pytest.fixture
def servers() -> Iterator[tuple[tuple[http.server.HTTPServer, type[Recorder]], ...]]:
    elsewhere = serve("")
    redirecting = serve(f"http://127.0.0.1:{elsewhere[0].server_port}/stolen")
    yield redirecting, elsewhere
    for server, _ in (redirecting, elsewhere):
        server.shutdown()
        server.server_close()


def test_a_redirect_is_not_followed_with_the_token(servers, monkeypatch) -> None:
    (redirecting, asked), (_, elsewhere) = servers
    monkeypatch.setenv("SETL_HOOK_TOKEN", "hook-secret")
    hook = Webhook(f"http://127.0.0.1:{redirecting.server_port}/hook", "${SETL_HOOK_TOKEN}")
    notifier = Notifier((hook,), "127.0.0.1:7310", Confinement())
    with pytest.raises(WebhookError) as refused:
        notifier._post(hook, "hook-secret", b"{}")
    assert "answered HTTP 302, a redirect to" in str(refused.value)
    assert "setl does not follow redirects" in str(refused.value)
    assert asked.seen == [("/hook", "Bearer hook-secret")]
    assert elsewhere.seen == []  # the redirect's target never heard of the token
