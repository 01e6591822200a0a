"""The node's /metrics: what a runner counts through PipelineMetrics, what its snapshot
shows, the process tree's memory, and the HTTP server that serves it."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from node.metrics import NodeMetrics, PipelineMetrics, tree_rss_bytes
from shared.errors import SetlError
from shared.httpserver import HttpServer, Request, is_loopback
from shared.rpc import manager_pb2


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def scrape(metrics: NodeMetrics, states: list[manager_pb2.PipelineState]) -> str:
    handle = metrics.serve(lambda: states)
    response = handle(Request("GET", "/metrics", {}, {}))
    assert response.status == 200 and response.content_type.startswith("text/plain")
    return response.body.decode()


LABELS = (("channel", "shop"), ("pipeline", "forward"))


def labels(**extra: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((*LABELS, *extra.items())))


def test_counters_and_stage_histograms_from_what_the_runner_reports() -> None:
    metrics = NodeMetrics()
    counted = PipelineMetrics("shop", "forward", metrics)
    counted.batch_loaded(100, et_s=0.02, wait_s=0.0, load_s=0.3)
    counted.batch_loaded(50, et_s=2.0, wait_s=1.5, load_s=0.004, skipped=3)
    counted.retried()
    counted.retried()
    counted.paused()
    found = samples(scrape(metrics, []))
    assert found[("setl_pipeline_rows_total", LABELS)] == 150
    assert found[("setl_pipeline_batches_total", LABELS)] == 2
    assert found[("setl_pipeline_rows_skipped_total", LABELS)] == 3
    assert found[("setl_pipeline_retries_total", LABELS)] == 2
    assert found[("setl_pipeline_pauses_total", LABELS)] == 1
    assert found[("setl_pipeline_extract_transform_seconds_sum", LABELS)] == pytest.approx(2.02)
    assert found[("setl_pipeline_load_seconds_bucket", labels(le="0.005"))] == 1
    assert found[("setl_pipeline_load_wait_seconds_bucket", labels(le="1.0"))] == 1
    assert found[("setl_pipeline_load_wait_seconds_count", LABELS)] == 2
    assert not any(name.endswith("_created") for name, _ in found)


def test_gauges_from_the_runners_snapshots() -> None:
    state = manager_pb2.PipelineState(
        pipeline_id="shop.forward", state="retrying", delay_ms=2500, rows_per_second=12.5,
        window_used=3, window_size=5, window_peak=4,
        free_door={"requested": 9, "loaded": 6, "missing": 1, "rejected": 2, "pending": 7})
    found = samples(scrape(NodeMetrics(), [state]))
    assert found[("setl_pipeline_delay_seconds", LABELS)] == 2.5
    assert found[("setl_pipeline_rows_per_second", LABELS)] == 12.5
    assert found[("setl_pipeline_window_batches", LABELS)] == 3
    assert found[("setl_pipeline_window_size_batches", LABELS)] == 5
    assert found[("setl_pipeline_window_peak_batches", LABELS)] == 4
    assert found[("setl_pipeline_state", labels(state="retrying"))] == 1
    assert found[("setl_pipeline_state", labels(state="running"))] == 0
    assert {outcome: found[("setl_free_door_requests_total", labels(outcome=outcome))]
            for outcome in ("requested", "loaded", "missing", "rejected")} == {
        "requested": 9, "loaded": 6, "missing": 1, "rejected": 2}
    assert found[("setl_free_door_pending_requests", LABELS)] == 7
    assert found[("setl_node_pipelines_running", ())] == 0
    assert found[("setl_node_spark_jobs_total", ())] == 0  # Spark never started here
    assert ("setl_subscription_unacked_batches", LABELS) not in found  # no subscription


def test_a_subscriptions_reader_and_what_it_has_not_acknowledged() -> None:
    state = manager_pb2.PipelineState(pipeline_id="shop.forward", subscriber="", unacked=4)
    found = samples(scrape(NodeMetrics(), [state]))
    assert found[("setl_subscription_unacked_batches", LABELS)] == 4
    assert found[("setl_subscription_readers", LABELS)] == 0
    state.subscriber = "ipv4:10.0.0.7:51234"
    assert samples(scrape(NodeMetrics(), [state]))[("setl_subscription_readers", LABELS)] == 1


def test_resident_memory_counts_the_children_too() -> None:
    child = subprocess.Popen(["sleep", "60"])
    try:
        comm = Path(f"/proc/{child.pid}/comm")
        while comm.read_text().strip() != "sleep":  # until the fork has become the sleep
            time.sleep(0.01)
        by_kind = tree_rss_bytes(os.getpid())
        assert by_kind["node"] > 10 * 2**20  # this Python process
        assert by_kind["other"] > 0  # the sleep
    finally:
        child.kill()
        child.wait()
    found = samples(scrape(NodeMetrics(), []))
    assert found[("setl_node_resident_memory_bytes", (("process", "node"),))] > 10 * 2**20


def test_served_over_http_and_a_taken_port_says_which_setting() -> None:
    metrics = NodeMetrics()
    PipelineMetrics("shop", "forward", metrics).batch_loaded(7, 0.1, 0.0, 0.1)
    server = HttpServer("127.0.0.1:0", metrics.serve(lambda: []), "node 1's metrics "
                        "(metrics.listen)")
    address = server.start()
    try:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as answer:
            assert samples(answer.read().decode())[("setl_pipeline_rows_total", LABELS)] == 7
        taken = HttpServer(address, metrics.serve(lambda: []), "node 1's metrics "
                           "(metrics.listen)")
        with pytest.raises(SetlError, match=rf"cannot serve node 1's metrics \(metrics.listen\) "
                           rf"on {address}: Address already in use; choose another"):
            taken.start()
    finally:
        server.stop()


@pytest.mark.parametrize(("listen", "loopback"), [
    ("127.0.0.1:1", True), ("127.9.9.9:1", True), ("localhost:1", True), ("[::1]:1", True),
    ("0.0.0.0:1", False), ("[::]:1", False), (":1", False), ("10.0.0.1:1", False),
    ("metrics.example:1", False)])
def test_loopback_addresses(listen: str, loopback: bool) -> None:
    assert is_loopback(listen) is loopback
