"""Operating setl (issue 15), on real servers with a running pipeline: Prometheus scrapes of
the node (counters, stage histograms, delay, window, Spark jobs, the process tree's memory)
and of the manager; the status page loaded in headless Chromium, its pipeline row and delay
present and its script refreshing it; an alarm that fires once and resolves once at a
webhook receiver, shown by 'setl status' and the page meanwhile; the delay alarm of a
change subscription whose reader lags."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from manager import cli
from manager.subscriber import Subscriber
from shared.httpserver import HttpServer, Request, Response
from shared.rpc import manager_pb2
from shared.sandbox import Sandbox
from tests.devcluster import ROOT, Cluster, Database, make_schema, one_way, wait_equal, wait_for

ITEMS = "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(40))"
HOOK_TOKEN = "hook-secret-7"


class Receiver:
    """A webhook receiver: every POST body (JSON) with its Authorization header."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, object], str]] = []
        self.server = HttpServer("127.0.0.1:0", self.handle, "the test's webhook receiver")

    def handle(self, request: Request) -> Response:
        if request.method == "POST":
            self.received.append((json.loads(request.body), request.headers.get(
                "authorization", "")))
        return Response(204, b"")

    def about(self, rule: str, subject: str) -> list[dict[str, object]]:
        return [body for body, _ in self.received
                if body["rule"] == rule and body["subject"] == subject]


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    found.server.start()
    yield found
    found.server.stop()


@pytest.fixture(scope="module")
def operated(sandbox: Sandbox, receiver: Receiver,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A manager polling every second with a 'paused' rule and a webhook, and node 1 that
    sends every batch to Spark (so that Spark jobs happen)."""
    running = Cluster(sandbox, tmp_path_factory.mktemp("operating"), "operating",
                      local_max_rows=0, env={"SETL_HOOK_TOKEN": HOOK_TOKEN},
                      manager_settings={"web": {"poll_s": 1}, "alarms": {
                          "rules": [{"name": "paused", "when": "paused",
                                     "pipelines": ["ops-alarm.*"]},
                                    {"name": "lag", "when": "delay", "above_ms": 1500,
                                     "pipelines": ["ops-lag.*"]},
                                    {"name": "stalled", "when": "not_running", "for_s": 2,
                                     "pipelines": ["ops-stall.*"]}],
                          "webhooks": [{"url": f"{receiver.server.url}/hook",
                                        "token": "${SETL_HOOK_TOKEN}"}]}})
    running.start_manager()
    running.start_node(1)
    yield running
    running.stop()


def status(cluster: Cluster) -> manager_pb2.StatusResponse:
    return cluster.call("Status", manager_pb2.StatusRequest())


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode()


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def start(cluster: Cluster, name: str, schema: str) -> None:
    cluster.apply([one_way(name, schema, ["items"], batch_timeout_ms=100)])
    cluster.set_status(name, "START")
    cluster.wait_running(name)


def test_node_and_manager_metrics_of_a_running_pipeline(
        operated: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, ITEMS)
    start(operated, "ops-metrics", schema)
    for batch in range(3):  # three transactions of ten rows
        source.script("BEGIN", *(f"INSERT INTO `{schema}`.items VALUES ({batch * 10 + i}, "
                                 f"'row {i}')" for i in range(10)), "COMMIT")
    wait_equal(source, target, schema, ["items"])
    node = next(n for n in status(operated).nodes if n.id == 1)
    assert node.metrics_address
    labels = frozenset({("channel", "ops-metrics"), ("pipeline", "forward")})

    def scraped() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
        found = samples(get(f"http://{node.metrics_address}/metrics"))
        batches = found.get(("setl_pipeline_batches_total", labels))
        counted = found.get(("setl_pipeline_rows_total", labels), 0) >= 30 and all(
            found[(f"setl_pipeline_{stage}_seconds_count", labels)] == batches
            for stage in ("extract_transform", "load_wait", "load"))  # not mid-batch
        return found if counted else None
    found = wait_for(scraped, 30, "the node's metrics to count the 30 rows")
    assert found[("setl_pipeline_rows_total", labels)] == 30
    batches = found[("setl_pipeline_batches_total", labels)]
    assert batches >= 1  # the three transactions, in one batch or more
    assert found[("setl_pipeline_load_seconds_sum", labels)] > 0
    assert found[("setl_pipeline_delay_seconds", labels)] >= 0
    assert found[("setl_pipeline_window_size_batches", labels)] == 5
    assert found[("setl_pipeline_state", labels | {("state", "running")})] == 1
    assert found[("setl_pipeline_retries_total", labels)] == 0
    assert found[("setl_free_door_requests_total", labels | {("outcome", "rejected")})] == 0
    assert found[("setl_node_spark_jobs_total", frozenset())] >= 1  # local_max_rows: 0
    memory = {kind: found[("setl_node_resident_memory_bytes", frozenset({("process", kind)}))]
              for kind in ("node", "spark_jvm", "spark_python_workers")}
    assert memory["node"] > 50 * 2**20 and memory["spark_jvm"] > 100 * 2**20
    assert memory["spark_python_workers"] > 0

    page = status(operated).web_url
    manager = wait_for(lambda: (found := samples(get(f"{page}metrics"))).get(
        ("setl_manager_pipelines", frozenset({("state", "running")})), 0) >= 1 and found,
        20, "the manager's metrics to see the pipeline running")
    assert manager[("setl_manager_leader", frozenset())] == 1
    assert manager[("setl_manager_nodes", frozenset())] == 1
    assert manager[("setl_manager_channels", frozenset({("status", "START")}))] >= 1
    operated.set_status("ops-metrics", "STOP")


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Chromium is missing: run scripts/install-system-packages.sh"
    return found


def browse(url: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium, alone: a fresh profile, nothing fetched from elsewhere."""
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
               f"--user-data-dir={profile}", *args, url]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@contextmanager
def writing(sandbox: Sandbox, schema: str) -> Iterator[None]:
    """A row inserted on the source every 20 ms meanwhile (so the page has rows/s to show)."""
    stop = threading.Event()

    def write() -> None:
        db, key = Database(sandbox, "source"), 1000
        while not stop.wait(0.02):
            db.execute(f"INSERT INTO `{schema}`.items VALUES ({key}, 'written meanwhile')")
            key += 1
        db.close()
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        yield
    finally:
        stop.set()
        writer.join(10)


def test_the_status_page_in_a_real_browser(
        operated: Cluster, sandbox: Sandbox, source: Database, target: Database,
        tmp_path: Path) -> None:
    schema = make_schema(source, target, ITEMS)
    start(operated, "ops-page", schema)
    with writing(sandbox, schema):
        shown_in_browser(operated, tmp_path)
    wait_equal(source, target, schema, ["items"])
    operated.set_status("ops-page", "STOP")


def polls(page: str) -> float:
    return samples(get(f"{page}metrics"))[("setl_manager_polls_total", frozenset())]


def shown_in_browser(operated: Cluster, tmp_path: Path) -> None:
    url = status(operated).web_url
    wait_for(lambda: 'data-pipeline="ops-page.forward" data-state="running"' in get(url), 20,
             "the manager to have read the running pipeline")
    wait_for(lambda: operated.pipeline_state("ops-page").rows_per_second > 0, 30,
             "rows arriving")
    seen = polls(url)  # a few points of history for the chart
    wait_for(lambda: polls(url) >= seen + 5, 20, "five more polls of the manager")
    # time enough for the script to fetch /fragment at least once (poll_s: 1)
    loaded = browse(url, tmp_path / "profile", "--virtual-time-budget=4000", "--dump-dom")
    dom = loaded.stdout
    assert loaded.returncode == 0 and "<html" in dom, loaded.stderr[-2000:]
    row = re.search(r'<tr data-pipeline="ops-page.forward" data-state="running">.*?</tr>',
                    dom, re.S)
    assert row is not None, dom[:3000]
    delay = re.search(r'<td class="delay" data-ms="(\d+)">(\d+ ms|[\d.]+ s)</td>', row.group(0))
    assert delay is not None, row.group(0)
    assert "<polyline" in row.group(0)  # the delay chart
    refreshed = re.search(r'<body[^>]*data-refreshed="(\d+)"', dom)
    assert refreshed is not None and int(refreshed.group(1)) >= 1, "the script did not refresh"
    assert 'data-node="1"' in dom
    folder = Path(os.environ.get("SETL_SCREENSHOTS") or tmp_path)
    folder = folder if folder.is_absolute() else ROOT / folder
    shot = folder / f"status-page-{time.strftime('%Y%m%d-%H%M%S')}.png"
    taken = browse(url, tmp_path / "profile-2", "--window-size=1400,700",
                   "--hide-scrollbars", f"--screenshot={shot}")
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_an_alarm_fires_once_and_resolves_once_at_the_webhook(
        operated: Cluster, source: Database, target: Database, receiver: Receiver,
        capsys: pytest.CaptureFixture[str]) -> None:
    schema = make_schema(source, target, ITEMS)
    start(operated, "ops-alarm", schema)
    operated.set_status("ops-alarm", "PAUSE")
    wait_for(lambda: receiver.about("paused", "ops-alarm"), 30, "the alarm at the webhook")
    body, authorization = next((b, a) for b, a in receiver.received
                               if b["rule"] == "paused" and b["subject"] == "ops-alarm")
    assert authorization == f"Bearer {HOOK_TOKEN}"
    assert (body["state"], body["when"], body["manager"]) == (
        "firing", "paused", operated.manager_address)
    assert "channel ops-alarm is paused" in str(body["message"])

    capsys.readouterr()
    assert cli.main(["--manager", operated.manager_address, "status"]) == 0
    shown = capsys.readouterr().out
    assert re.search(r"FIRING\s+paused\s+ops-alarm\s", shown), shown
    page = status(operated).web_url
    assert 'data-alarm="paused/ops-alarm"' in get(f"{page}fragment")

    seen = polls(page)
    wait_for(lambda: polls(page) >= seen + 3, 20, "three more evaluations while still paused")
    operated.set_status("ops-alarm", "START")
    wait_for(lambda: len(receiver.about("paused", "ops-alarm")) >= 2, 30,
             "the resolution at the webhook")
    sent = receiver.about("paused", "ops-alarm")
    assert [item["state"] for item in sent] == ["firing", "resolved"]
    assert sent[0]["id"] == sent[1]["id"] and sent[1]["resolved_at"]
    assert operated.manager is not None
    log = operated.manager.output()
    assert len(re.findall(r"event=alarm_firing rule=paused when=paused subject=ops-alarm ",
                          log)) == 1
    assert len(re.findall(r"event=alarm_resolved rule=paused when=paused subject=ops-alarm ",
                          log)) == 1
    assert HOOK_TOKEN not in log
    operated.set_status("ops-alarm", "STOP")


def test_a_subscription_whose_reader_lags_raises_the_delay_alarm(
        operated: Cluster, receiver: Receiver, source: Database, target: Database) -> None:
    """A subscription nobody reads: its batches wait for a reader, its window fills and
    its delay grows past the rule's 1.5 s (firing); a reader takes everything and
    acknowledges it (resolved)."""
    schema = make_schema(source, target, ITEMS)
    servers = operated.sandbox.servers()
    operated.apply([{"name": "ops-lag", "pipelines": [{
        "name": "forward", "source": "source", "target": "ops-feed", "parallelism": 1,
        "batch_timeout_ms": 100,
        "pairs": [{"source": f"{schema}.items", "target": f"{schema}.items"}]}]}],
        [{"name": "source", "host": "127.0.0.1", "port": servers["source"].port,
          "user": "setl", "password": f"file:{operated.sandbox.secret_file}"},
         {"name": "ops-feed", "type": "subscription"}])
    operated.set_status("ops-lag", "START")
    operated.wait_running("ops-lag")
    source.execute(f"INSERT INTO `{schema}`.items VALUES (0, 'unread')")
    wait_for(lambda: operated.pipeline_state("ops-lag").unacked >= 1, 30,
             "the first batch waiting for a reader")
    source.execute(f"INSERT INTO `{schema}`.items VALUES (1, 'unread')")  # in the window
    written = 2
    wait_for(lambda: receiver.about("lag", "ops-lag.forward"), 30, "the delay alarm")
    firing = receiver.about("lag", "ops-lag.forward")[0]
    assert (firing["state"], firing["when"]) == ("firing", "delay")
    assert operated.pipeline_state("ops-lag").window_used >= 1  # held for its reader

    read: set[int] = set()
    with Subscriber("ops-lag", managers=operated.manager_address, retry_s=0.2) as feed:
        for batch in feed:
            read.update(int(field.value.int) for txn in batch.transactions
                        for change in txn.changes for field in change.after
                        if field.name == "id")
            feed.ack(batch)
            if len(read) == written:
                break
        wait_for(lambda: len(receiver.about("lag", "ops-lag.forward")) >= 2, 30,
                 "the delay alarm resolved once the reader caught up")
    assert read == set(range(written))
    assert [item["state"] for item in receiver.about("lag", "ops-lag.forward")] == [
        "firing", "resolved"]
    operated.set_status("ops-lag", "STOP")


def test_a_started_pipeline_no_node_runs_raises_the_not_running_alarm(
        operated: Cluster, receiver: Receiver, source: Database, target: Database) -> None:
    """A started channel whose pipeline only a node that is not there may own: no runner,
    so no delay and no pause to tell it, only that it is not running (firing); stopped on
    purpose, it is not stuck (resolved)."""
    schema = make_schema(source, target, ITEMS)
    operated.apply([one_way("ops-stall", schema, ["items"], nodes=[9])])
    operated.set_status("ops-stall", "START")
    wait_for(lambda: receiver.about("stalled", "ops-stall.forward"), 30,
             "the not_running alarm")
    firing = receiver.about("stalled", "ops-stall.forward")[0]
    assert (firing["state"], firing["when"]) == ("firing", "not_running")
    assert firing["message"] == ("pipeline ops-stall.forward is not running, its channel "
                                 "ops-stall started: no node holds it")
    operated.set_status("ops-stall", "STOP")
    wait_for(lambda: len(receiver.about("stalled", "ops-stall.forward")) >= 2, 30,
             "the not_running alarm resolved once the channel stopped")
    assert [item["state"] for item in receiver.about("stalled", "ops-stall.forward")] == [
        "firing", "resolved"]
