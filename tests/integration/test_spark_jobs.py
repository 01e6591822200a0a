"""node/spark.py on a real local Spark: a batch's job on the workers gives what the same job
gives in the node, its bytes handed over as files (a local master's ``Handoff``) that are gone
once the job ended, failed or not, and the folder gone with the session."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
from array import array
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from bench import rowsevents
from node.extract.etl import CompiledPipeline
from node.extract.job import Part
from node.jobs import JobSpec, PartResult
from node.spark import TASK_EVENTS_MAX, SparkRunner
from shared.errors import SetlError
from shared.model import DataMedia, MediaPair, Pipeline
from shared.patterns import NamePattern
from shared.settings import SparkSettings

LAYOUT = rowsevents.schema("items", [("id", rowsevents.INT), ("name", rowsevents.VARCHAR),
                                     ("qty", rowsevents.INT), ("note", rowsevents.VARCHAR)])


def _compiled() -> CompiledPipeline:
    media = DataMedia("source", NamePattern.parse("bench"), NamePattern.parse("items"))
    pair = MediaPair(source=media, target=dataclasses.replace(media, datasource="target"))
    return CompiledPipeline.compile("test.forward", 1, Pipeline("forward", "source", "target",
                                                                (pair,)))


def _part(first: int, rows: int, note: int) -> Part:
    events = rowsevents.insert_events(LAYOUT, 7, [(i, f"item {i}", i * 2, "x" * note)
                                                  for i in range(first, first + rows)])
    return Part({1: LAYOUT}, b"".join(events), array("I", map(len, events)),
                array("I", [1] * len(events)), array("I", range(len(events))))


def _statements(results: list[PartResult]) -> list[tuple[str, int, list[str]]]:
    return [(unit.table, unit.rows, [str(sql) for sql in unit.sqls])
            for result in results for unit in result.units]


@pytest.fixture(scope="module")
def runner():
    found = SparkRunner(SparkSettings("local[2]", "512m", (), local_max_rows=0))
    yield found
    found.stop()


def test_a_job_on_the_workers_gives_what_it_gives_in_the_node(runner) -> None:
    compiled = _compiled()
    # a part past what a task carries (768 KiB), a small one and one without events
    parts = [_part(0, 12_000, 80), _part(100_000, 50, 3),
             Part({}, b"", array("I"), array("I"), array("I"))]
    assert len(parts[0].events) > TASK_EVENTS_MAX
    spec = JobSpec(1, True, load_batch_size=1000)
    on_spark = runner.run_job(compiled, spec, parts, local=False)
    in_node = runner.run_job(compiled, spec, parts, local=True)
    assert runner._handoff is not None  # a local master hands the bytes over as files
    assert _statements(on_spark) == _statements(in_node)
    assert [result.rows for result in on_spark] == [12_000, 50, 0]
    assert sum(unit.rows for result in on_spark for unit in result.units) == 12_050
    assert list(runner._handoff.root.iterdir()) == []  # what the job wrote is gone


def test_a_failed_job_says_why_and_leaves_no_files(runner) -> None:
    part = _part(0, 2_000, 10)
    broken = part._replace(events=part.events[:len(part.events) // 2])  # events cut short
    with pytest.raises(SetlError, match=r"pipeline test\.forward: extract/transform failed"):
        runner.run_job(_compiled(), JobSpec(2, True), [_part(5_000, 10, 1), broken],
                       local=False)
    assert runner._handoff is not None
    assert list(runner._handoff.root.iterdir()) == []
    # and the next job runs as ever
    [done] = runner.run_job(_compiled(), JobSpec(3, True), [_part(0, 10, 1)], local=False)
    assert done.rows == 10


def _at_once(runner: SparkRunner, jobs: list[tuple[JobSpec, list[Part]]]) -> list[Any]:
    """The batches' jobs sent from threads at the same moment, as a pipeline's E/T threads
    send them under a backlog; each one's results, or its error."""
    start = threading.Barrier(len(jobs), timeout=30)

    def send(spec: JobSpec, parts: list[Part]) -> Any:
        start.wait()
        try:
            return runner.run_job(_compiled(), spec, parts, local=False)
        except SetlError as exc:
            return exc

    with ThreadPoolExecutor(len(jobs)) as pool:
        return list(pool.map(lambda job: send(*job), jobs))


def test_batches_sent_at_once_share_jobs_and_each_gets_its_own_results(runner,
                                                                       caplog) -> None:
    jobs = [(JobSpec(10 + n, True, load_batch_size=1000), [_part(n * 10_000, 2_000 + n, 20),
                                                            _part(900_000 + n * 10, 3, 1)])
            for n in range(6)]
    with caplog.at_level(logging.DEBUG, logger="setl.node.spark"):
        found = _at_once(runner, jobs)
    # two jobs go at once; the batches that came meanwhile wait and go together, as the
    # node's log says
    assert re.search(r"event=spark_job_gathered pipeline=test\.forward processIds=1\d,1\d",
                     caplog.text), caplog.text
    for (spec, parts), results in zip(jobs, found, strict=True):
        assert _statements(results) == _statements(runner.run_job(_compiled(), spec, parts,
                                                                  local=True))
        assert [result.rows for result in results] == [2_000 + spec.process_id - 10, 3]


def test_a_batch_that_fails_beside_others_fails_alone(runner) -> None:
    bad = _part(0, 2_000, 10)
    jobs = [(JobSpec(20, True), [_part(0, 3_000, 10)]),
            (JobSpec(21, True), [bad._replace(events=bad.events[:len(bad.events) // 2])]),
            (JobSpec(22, True), [_part(5_000, 3_000, 10)]),
            (JobSpec(23, True), [_part(9_000, 3_000, 10)])]
    found = _at_once(runner, jobs)
    assert isinstance(found[1], SetlError)
    assert "pipeline test.forward: extract/transform failed" in str(found[1])
    assert [[result.rows for result in results] for results in found[0:1] + found[2:]] == \
        [[3_000], [3_000], [3_000]]
    assert list(runner._handoff.root.iterdir()) == []


def test_a_job_without_room_for_its_files_goes_through_spark(runner, caplog) -> None:
    assert runner._handoff is not None
    root = runner._handoff.root
    root.rmdir()  # no folder: neither the node nor a worker can write a file
    try:
        parts = [_part(0, 9_000, 80), _part(50_000, 20, 3)]
        spec = JobSpec(4, True, load_batch_size=1000)
        on_spark = runner.run_job(_compiled(), spec, parts, local=False)
    finally:
        root.mkdir()
    assert "event=spark_handoff_full pipeline=test.forward processId=4" in caplog.text
    assert _statements(on_spark) == _statements(runner.run_job(_compiled(), spec, parts,
                                                               local=True))
    assert [result.rows for result in on_spark] == [9_000, 20]


def test_the_handoff_folder_goes_with_the_session(runner) -> None:  # the module's last
    assert runner._handoff is not None
    root = runner._handoff.root
    assert root.is_dir() and os.access(root, os.W_OK)
    runner.stop()
    assert not Path(root).exists()
