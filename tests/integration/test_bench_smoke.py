"""The benchmark code on tiny sizes, each run on a sandbox of its own: numbers are reported
only for copies found equal (pt-table-sync, CHECKSUM TABLE)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STREAMS = ("setl", "native", "native_parallel")  # every copy bench.peers measures


RUN_LIMIT_S = 270  # under pytest's own limit (setup.cfg: timeout = 300), so that a run
# that takes too long fails with its log instead of pytest's thread dump


def smoke_run(module: str, tmp_path: Path, *args: str, report: str = "") -> dict:
    """``python -m module --smoke``: its report (``report``-smoke.json; by default the
    module's name). Output goes to a file, not a pipe, so that a
    server the run leaves behind cannot keep the test waiting for the pipe to close."""
    results, log = tmp_path / "results", tmp_path / f"{module}.log"
    with log.open("w") as out:
        try:
            done = subprocess.run([sys.executable, "-m", module, "--smoke", *args,
                                   "--results", str(results)], cwd=ROOT, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=RUN_LIMIT_S, check=False)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{module} still running after {RUN_LIMIT_S} s:\n"
                                 + log.read_text(errors="replace")[-6000:]) from None
    assert done.returncode == 0, log.read_text(errors="replace")[-6000:]
    name = report or module.removeprefix("bench.")
    return json.loads((results / f"{name}-smoke.json").read_text())


def test_bench_peers_smoke_run_reports_every_scenario(tmp_path: Path) -> None:
    report = smoke_run("bench.peers", tmp_path, "--profile", "--work", str(tmp_path / "work"))
    assert (tmp_path / "results" / "peers-smoke.png").stat().st_size > 10_000
    by_kind = {result["scenario"].split(" ")[0]: result for result in report["results"]}
    assert set(by_kind) == {"full", "setl", "verify", "bulk", "oltp_write_only", "noisy",
                            "catch-up:"}
    # every copy, the parallel replica's too, compared equal: figures are given only then
    assert all(result["equal"] and not result["differences"] for result in report["results"])
    tuning = report["native_tuning"]  # as the servers said
    assert tuning["native replica (serial)"]["slave_parallel_threads"] == 0
    assert tuning["native parallel (4 threads, optimistic)"] == {
        "slave_parallel_threads": 4, "slave_parallel_mode": "optimistic"}
    bulk = by_kind["bulk"]
    assert all(bulk[f"{name}_rows_per_s"] > 0 for name in STREAMS)
    for name in STREAMS[1:]:
        ratio = bulk["setl_rows_per_s"] / bulk[f"{name}_rows_per_s"]
        assert abs(bulk[f"ratio_setl_{name}"] - ratio) < 0.01 * max(1.0, ratio)
    delays = [r for r in report["results"] if "setl_delay_p50_ms" in r]
    assert len(delays) == 3 and delays[-1] is by_kind["noisy"]
    for result in delays:
        for name in STREAMS:
            assert 0 <= result[f"{name}_delay_p50_ms"] <= result[f"{name}_delay_p99_ms"]
            assert result[f"{name}_drain_s"] >= 0
    catchup = by_kind["catch-up:"]
    for name in STREAMS:
        assert catchup[f"{name}_bulk_rows_per_s"] > 0 and catchup[f"{name}_oltp_rows_per_s"] > 0
        assert catchup[f"{name}_total_s"] > 0
    # the bulk part's rows replayed straight into the target as setl's batches: its wall
    assert 0 < catchup["target_wall_bulk_rows"] <= catchup["bulk_rows"]
    assert catchup["target_wall_bulk_rows_per_s"] > 0 and catchup["target_wall_bulk_batches"] > 0
    assert catchup["setl_bulk_of_target_wall"] == round(
        catchup["setl_bulk_rows_per_s"] / catchup["target_wall_bulk_rows_per_s"], 2)
    stages = catchup["setl_cpu_us_per_row_by_stage"]  # py-spy's samples of the node, by stage
    assert stages["select: binlog framing"] > 0 and sum(stages.values()) > 0
    assert report["node_peak_rss_mb"] > 100
    copy, racing = by_kind["full"], by_kind["setl"]  # setl's snapshot, alone and racing writes
    assert copy["setl_rows_per_s"] > 0 and copy["ratio_setl_mydumper"] > 0
    assert "racing sysbench" in racing["scenario"] and racing["setl_rows_per_s"] > 0
    check = by_kind["verify"]  # setl verify and pt-table-checksum, findings as pt-table-sync's
    assert check["setl_verify_rows_per_s"] > 0 and check["pt_table_checksum_rows_per_s"] > 0
    assert check["pt_table_checksum_both_servers_rows_per_s"] > 0
    assert check["same_findings"] and check["setl_found"] == check["corrupted"]
    assert sum(check["corrupted"].values()) == 6 and check["repair_requests"] == 6
    assert by_kind["full"]["mydumper_myloader_rows_per_s"] > 0


def test_bench_stream_smoke_run_reports_equal_copies(tmp_path: Path) -> None:
    report = smoke_run("bench.stream", tmp_path)
    assert [r["scenario"] for r in report["results"]] == [
        "bulk insert (batch_size 2000)", "bulk insert (batch_size 10000)",
        "steady 100 tx/s for 3s"]
    assert all(r["equal"] for r in report["results"])
    steady = report["results"][-1]
    # a busy machine may write fewer than 100 × 3 in the 3 s; the target holds each one
    assert 0 < steady["transactions"] == steady["target_rows"] <= 300
    assert 0 < steady["delay_p50_ms"] <= steady["delay_p99_ms"] <= steady["delay_max_ms"]


def test_bench_subscribe_smoke_run_reads_every_change_equal(tmp_path: Path) -> None:
    report = smoke_run("bench.subscribe", tmp_path, "--work", str(tmp_path / "work"))
    catchup, stream = report["results"]
    assert catchup["equal"] and stream["equal"]  # each reader's copy equal to the source
    # setl's readers and the anchor read the same row changes
    assert catchup["cli_changes"] == catchup["client_changes"] == catchup["anchor_changes"] > 0
    assert catchup["client_of_anchor"] > 0 and catchup["cli_changes_per_s"] > 0
    assert stream["beats"] == stream["beats_written"] > 0
    assert 0 <= stream["delay_p50_ms"] <= stream["delay_p99_ms"]


def test_bench_sparkjob_smoke_run_measures_the_nodes_spark_job(tmp_path: Path) -> None:
    report = smoke_run("bench.sparkjob", tmp_path)
    [result] = report["results"]
    assert result["scenario"] == "defaults"
    assert 0 < result["empty_job_p50_ms"] <= result["empty_job_p95_ms"]
    assert result["job_500_rows_p50_ms"] > 0 and result["cpu_s_per_100k_rows"] > 0
    assert result["start_cpu_s"] > 0 and result["node_cpu_s_per_100k_rows"] > 0


def test_bench_decode_smoke_run_measures_select_alone(tmp_path: Path) -> None:
    report = smoke_run("bench.decode", tmp_path, "--work", str(tmp_path / "work"))
    [result] = report["results"]
    assert result["scenario"].startswith("frame")
    assert result["rows_per_s"] > 0 and result["cpu_us_per_row"] > 0
    assert result["cpu_us_per_event"] >= result["cpu_us_per_row"]


def test_bench_decode_worker_smoke_run_times_the_workers_decoder(tmp_path: Path) -> None:
    report = smoke_run("bench.decode", tmp_path, "--worker", "--work", str(tmp_path / "work"),
                       report="decode-worker")
    kinds = {(r["scenario"].split(" events")[0], r["scenario"][-7:]) for r in report["results"]}
    assert {kind for kind, _ in kinds} == {"decode insert (prepare)", "decode insert",
                                           "decode update", "decode delete", "decode all"}
    assert {charset for _, charset in kinds} == {"utf8mb4", " latin1"}
    for result in report["results"]:
        assert result["rows"] >= result["events"] > 0
        assert result["decode_rows_cpu_us_per_row"] > 0


def test_chaos_soak_one_fault_of_each_kind_ends_with_the_promises_kept(tmp_path: Path) -> None:
    """``make chaos`` in short: every kind of fault once, under load on two nodes, racing
    one copy of each kind (``--copies``: a snapshot of a keyed table, one of the keyless
    table that must be refused, a free-door backfill)."""
    from bench.chaos import FAULTS

    # (Spark on demand: two JVMs warm from boot on a 2-core CI machine beside the rest)
    report = smoke_run("bench.chaos", tmp_path, "--rounds", "1", "--every", "2", "--seed", "7",
                       "--spark-start", "on_demand", "--copies", "--copy-every", "3600")
    assert report["ok"], report
    assert report["faults"] == dict.fromkeys(FAULTS, 1)
    assert all(fault["healed_s"] is not None for fault in report["log"])
    assert report["takeover_s"]["max"] > 0
    assert report["violation_count"] == 0 and report["divergences"] == []
    assert report["snapshots_checked"] > 50 and report["transfers"] > 100
    assert report["rows_compared"] > 4000  # sysbench's two tables and the bank's
    # a keyless table with duplicates and a unique-key swap table, compared per table
    assert report["tables"]["kl"]["source_rows"] > 20 and report["tables"]["sl"]["equal"]
    assert all(table["equal"] for table in report["tables"].values()), report["tables"]
    copies = report["copies"]  # each ended as it must, with every request served
    assert copies["failures"] == [] and copies["backfills"] == 1, copies
    assert copies["copies_by_state"] == {"sbtest1:done": 1}, copies
    assert copies["rows_copied"] >= 2000 and copies["ask_errors"] == 0, copies
    assert copies["keyless_refused"] == 1 and "no primary key" in copies["keyless_refused_why"][0]
