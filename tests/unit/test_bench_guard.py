"""bench/guard.py: a benchmark run flags each of setl's figures more than 20% worse than the
last run's of the same scenario."""

from __future__ import annotations

import json

from bench import guard
from bench.measure import write_report

CATCHUP = "catch-up: 400,000 rows of sysbench prepare then 60s of oltp_write_only ({} rows)"


def catchup(rows: int, setl: float, p99: float, cpu: float, native: float) -> dict[str, object]:
    return {"scenario": CATCHUP.format(f"{rows:,}"), "setl_bulk_rows_per_s": setl,
            "setl_delay_p99_ms": p99, "setl_cpu_s_per_100k_rows": cpu,
            "native_bulk_rows_per_s": native, "rows": rows, "equal": True}


def test_what_got_worse_by_more_than_a_fifth_is_flagged_and_nothing_else() -> None:
    last = [catchup(1_000_000, 50_000, 30.0, 2.0, 60_000)]
    # other row counts, the same scenario; the rate 30% lower, the p99 and CPU higher
    found = guard.worse(last, [catchup(1_100_000, 35_000, 40.0, 2.6, 30_000)])
    scenario = guard.scenario_key(CATCHUP.format(1)) + ": "
    assert [line.removeprefix(scenario).split(":")[0] for line in found] == [
        "setl_bulk_rows_per_s 50000 → 35000 (-30%); the peers in the same runs",
        "setl_delay_p99_ms 30.0 → 40.0 (+33%); the peers in the same runs",
        "setl_cpu_s_per_100k_rows 2.0 → 2.6 (+30%); the peers in the same runs"]
    assert all(line.endswith("native_bulk_rows_per_s -50%") for line in found)
    # better, or worse by less than a fifth: nothing; the peers' figures are never flagged
    assert guard.worse(last, [catchup(1, 70_000, 24.5, 1.7, 10_000)]) == []
    assert guard.worse(last, [catchup(1, 41_000, 35.9, 2.39, 60_000)]) == []
    # delays below 5 ms in both runs are noise; another scenario is not compared
    assert guard.worse([catchup(1, 1, 1.0, 1, 1)], [catchup(1, 1, 4.0, 1, 1)]) == []
    assert guard.worse(last, [{**catchup(1, 1, 99.0, 9, 1), "scenario": "catch-up at 2x"}]) \
        == []


def test_a_report_says_what_got_worse_than_the_last_run(tmp_path, capsys) -> None:
    (tmp_path / "peers-20261101-000000.json").write_text(json.dumps({"results": [
        catchup(1_000_000, 50_000, 30.0, 2.0, 60_000)]}))
    (tmp_path / "peers-20261102-000000.json").write_text(json.dumps({"results": [
        catchup(1_000_000, 50_000, 10.0, 2.0, 60_000)]}))  # the last one
    (tmp_path / "peers-smoke.json").write_text(json.dumps({"results": []}))
    report, path = write_report(tmp_path, "peers", False, {}, [
        catchup(900_000, 48_000, 30.0, 2.0, 60_000)], {})
    assert report["against_last"]["last_run"] == "peers-20261102-000000.json"
    [line] = report["against_last"]["worse"]
    assert "setl_delay_p99_ms 10.0 → 30.0 (+200%)" in line
    assert line.endswith(" (than peers-20261102-000000.json)")
    assert f"WORSE: {line}" in capsys.readouterr().out
    assert json.loads(path.read_text())["against_last"] == report["against_last"]
    smoke, _ = write_report(tmp_path, "peers", True, {}, [], {})
    assert "against_last" not in smoke


def test_a_node_log_gives_the_batches_split_and_the_jobs_they_shared() -> None:
    from bench.measure import time_split

    log = "\n".join([
        "event=batch_loaded pipeline=p process_id=1 rows=100 et_ms=10.0 wait_ms=1.0 load_ms=4.0",
        "event=batch_loaded pipeline=p process_id=2 rows=0 et_ms=99.0 wait_ms=9.0 load_ms=9.0",
        "event=spark_job_gathered pipeline=p processIds=3,4,5",
        "event=batch_loaded pipeline=p process_id=3 rows=300 et_ms=30.0 wait_ms=3.0 load_ms=2.0",
        "event=spark_job_gathered pipeline=p processIds=6,7"])
    assert time_split(log) == {"et_ms": 20.0, "wait_ms": 2.0, "load_ms": 3.0, "rows": 200.0,
                               "batches": 2, "gathered_batches": 5, "gathered_jobs": 2}


def test_each_scenario_is_compared_with_the_newest_run_that_ran_it(tmp_path) -> None:
    """A run of other scenarios since (a verify alone) is no report of the catch-up."""
    (tmp_path / "peers-20261101-000000.json").write_text(json.dumps({"results": [
        catchup(1_000_000, 50_000, 10.0, 2.0, 60_000)]}))
    (tmp_path / "peers-20261102-000000.json").write_text(json.dumps({"results": [
        {"scenario": "verify 2,000,000 rows", "setl_verify_rows_per_s": 900_000}]}))
    (tmp_path / "peers-20261103-000000.json").write_text("not json")  # skipped
    found = guard.against_last(tmp_path, "peers", [
        catchup(1_000_000, 30_000, 10.0, 2.0, 60_000),
        {"scenario": "verify 2,000,000 rows", "setl_verify_rows_per_s": 600_000},
        {"scenario": "never run before", "setl_rows_per_s": 1}])
    assert found["last_run"] == "peers-20261103-000000.json"
    assert found["compared_with"] == {
        guard.scenario_key(CATCHUP.format(1)): "peers-20261101-000000.json",
        "verify 2,000,000 rows": "peers-20261102-000000.json"}
    assert [line.split(" (than ")[-1] for line in found["worse"]] == [
        "peers-20261101-000000.json)", "peers-20261102-000000.json)"]
    assert "setl_bulk_rows_per_s 50000 → 30000 (-40%)" in found["worse"][0]
