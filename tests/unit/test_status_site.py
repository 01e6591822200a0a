"""The manager's web port without a socket: the page shows pipelines (delay, history chart,
errors escaped), alarms and nodes; with a token every path needs it, a browser gets it
through a form and a cookie, a scraper through a bearer header."""

from __future__ import annotations

import re

import pytest

from manager.alarms import AlarmEvaluator
from manager.auth import TokenCheck
from manager.metrics import ManagerMetrics
from manager.monitor import Monitor, Observation
from manager.web import StatusSite
from manager.webhooks import Notifier
from shared.confinement import Confinement
from shared.httpserver import Request, Response
from shared.rpc import manager_pb2, model_pb2
from shared.settings import WebSettings
from shared.zk import ZkPaths

TOKEN = "page-token"


def monitor() -> Monitor:
    """A monitor that is never started: its observation is set by the test."""
    watched = Monitor(None, ZkPaths(), None, None, AlarmEvaluator(()),  # type: ignore[arg-type]
                      Notifier((), "m", Confinement()), WebSettings(poll_s=1))
    state = manager_pb2.PipelineState(
        pipeline_id="shop.forward", state="running", owner_node=2, delay_ms=1234,
        rows_per_second=56.7, window_used=1, window_size=5,
        position={"file": "mysql-bin.000003", "pos": 4567},
        last_error="Table 'shop.<script>' doesn't exist\nsecond line")
    info = manager_pb2.ChannelInfo(status=model_pb2.CHANNEL_STATUS_START, version=3,
                                   pipelines=[state])
    info.channel.name = "shop"
    info.channel.pipelines.add(name="forward", source="db1", target="db2")
    node = manager_pb2.NodeInfo(id=2, address="127.0.0.1:4000", host="h", pid=9,
                                metrics_address="127.0.0.1:7321",
                                running_pipelines=["shop.forward"])
    for at, delay in ((100.0, 0), (160.0, 4000), (220.0, 1234)):
        state.delay_ms = delay
        watched.history.add(at, [state])
    watched.latest = Observation(220.0, (info,), (node,))
    return watched


def site(token: str | None = None) -> StatusSite:
    watched, metrics = monitor(), ManagerMetrics()
    metrics.watch(watched, lambda: True)
    return StatusSite(watched, metrics, lambda: "manager m (leader)",
                      TokenCheck(token) if token else None)


def get(served: StatusSite, path: str, **headers: str) -> Response:
    return served.handle(Request("GET", path, {}, headers))


def text(response: Response) -> str:
    return response.body.decode()


def test_the_page_shows_each_pipeline_with_its_delay_and_history() -> None:
    page = get(site(), "/")
    assert page.status == 200 and page.content_type.startswith("text/html")
    found = re.search(r'<tr data-pipeline="shop.forward".*?</tr>', text(page), re.S)
    assert found is not None
    row = found.group(0)
    assert '<td class="delay" data-ms="1234">1234 ms</td>' in row
    assert "mysql-bin.000003:4567" in row and "<td>57</td>" in row and "<td>1/5</td>" in row
    assert "<polyline" in row and "delay over the last 2 min: highest 4000 ms, now 1234 ms" in row
    assert 'points="0.0,34.0 90.0,2.0 180.0,24.1"' in row  # the history fills the width
    assert "&lt;script&gt;" in row and "<script>'" not in row  # an error cannot inject
    assert 'data-node="2"' in text(page) and "127.0.0.1:7321" in text(page)
    assert '<script src="/page.js"></script>' in text(page)  # no inline script: CSP holds
    assert ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; "
            "frame-ancestors 'none'; form-action 'self'") in page.headers
    fragment = get(site(), "/fragment")
    assert 'data-pipeline="shop.forward"' in text(fragment) and "<html" not in text(fragment)
    assert "fetch(\"/fragment\"" in text(get(site(), "/page.js"))
    assert get(site(), "/nowhere").status == 404


def test_metrics_on_the_web_port() -> None:
    metrics = get(site(), "/metrics")
    assert metrics.status == 200
    assert 'setl_manager_pipelines{state="running"} 1.0' in text(metrics)
    assert "setl_manager_nodes 1.0" in text(metrics)
    assert 'setl_manager_channels{status="START"} 1.0' in text(metrics)
    assert "setl_manager_leader 1.0" in text(metrics)


@pytest.mark.parametrize("path", ["/", "/fragment", "/metrics"])
def test_with_a_token_nothing_shows_without_it(path: str) -> None:
    refused = get(site(TOKEN), path)
    assert refused.status == 401
    assert "shop.forward" not in text(refused)
    assert get(site(TOKEN), path, authorization="Bearer wrong").status == 401
    assert get(site(TOKEN), path, authorization=f"Bearer {TOKEN}").status == 200


def test_a_browser_gives_the_token_once_and_keeps_a_session_cookie() -> None:
    served = site(TOKEN)
    form = get(served, "/")
    assert 'name="token"' in text(form) and 'action="/login"' in text(form)
    wrong = served.handle(Request("POST", "/login", {}, {}, b"token=nope"))
    assert wrong.status == 401 and "not this manager" in text(wrong)
    assert not any(name == "Set-Cookie" for name, _ in wrong.headers)
    right = served.handle(Request("POST", "/login", {}, {}, f"token={TOKEN}".encode()))
    assert right.status == 303 and ("Location", "/") in right.headers
    cookie = dict(right.headers)["Set-Cookie"]
    assert TOKEN not in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    session = cookie.split(";")[0]
    assert get(served, "/", cookie=f"other=1; {session}").status == 200
    assert get(served, "/", cookie="setl_session=forged").status == 401
