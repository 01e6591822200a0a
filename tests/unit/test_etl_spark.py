"""A batch's extract/transform on Spark or in the node (node/spark.py, node/sparkerrors.py):
a worker's error as the driver sees it, a small batch in the node, Spark's warm-up and
start."""

from __future__ import annotations

import pytest

from node.changes import RowChange, TargetChange
from node.extract.etl import CompiledPipeline
from tests.unit.etl_helpers import compiled, insert


def test_a_worker_error_of_setls_own_kind_keeps_its_class_and_others_say_what_they_were() -> None:
    from node.sparkerrors import translate  # the driver's view of a failed Spark job
    from shared.errors import SetlError, ShardError, TransformError

    job = compiled("{source: s.t, target: s2.t}")
    trace = ("py4j.protocol.Py4JJavaError: An error occurred while calling collect.\n"
             "Traceback (most recent call last):\n  File \"node/extract/etl.py\", line 9, in _map\n"
             "shared.errors.TransformError: pair src:s.t: processor m:f failed on key (1,)\n"
             "\tat org.apache.spark.api.python.BasePythonRunner...\n")
    error = translate(Exception(trace), job)
    assert type(error) is TransformError
    assert str(error).endswith("extract/transform failed: pair src:s.t: processor m:f failed "
                               "on key (1,)")
    shard = translate(Exception(trace.replace("TransformError", "ShardError")), job)
    assert type(shard) is ShardError
    bare = translate(Exception("Traceback\nTypeError: unhashable type: 'set'\n\tat x"), job)
    assert type(bare) is SetlError and str(bare).endswith("TypeError: unhashable type: 'set'")


def test_a_small_batch_runs_in_the_node_with_the_errors_a_spark_job_gives() -> None:
    from node.extract.job import Part
    from node.jobs import JobSpec
    from node.spark import SparkRunner
    from shared.errors import SetlError, TransformError
    from shared.settings import SparkSettings

    runner = SparkRunner(SparkSettings("local[1]", "512m", (), local_max_rows=10))
    job = compiled("{source: s.t, target: s2.t, processor: 'setl_examples:mask_email'}")
    spec = JobSpec(1, False, changes_only=True)

    def run(pipeline: CompiledPipeline, change: RowChange) -> list[TargetChange]:
        assert runner.local(1)
        [result] = runner.run_job(pipeline, spec, [Part.of_changes([change])], local=True)
        return result.changes

    [out] = run(job, insert("s", "t", {"id": 1, "email": "a@b.org"}))
    assert out.table == "t" and out.after["email"].endswith("@b.org")
    with pytest.raises(TransformError, match=r"extract/transform failed: pipeline shop.fwd pair "
                                             r"src:s.t: processor setl_examples:mask_email failed"):
        run(job, insert("s", "t", {"id": 3, "email": 5}))
    broken = compiled("{source: s.t, target: s2.t}")
    object.__setattr__(broken, "pairs", None)  # a Python error inside E/T, not setl's own
    with pytest.raises(SetlError, match="extract/transform failed: TypeError") as raised:
        run(broken, insert("s", "t", {"id": 1}))
    assert type(raised.value) is SetlError
    assert runner._session is None  # no Spark was started for any of it


def test_a_warm_up_asked_for_after_the_stop_starts_no_spark(caplog) -> None:
    from node.spark import SparkRunner
    from shared.errors import SetlError
    from shared.settings import SparkSettings

    runner = SparkRunner(SparkSettings("local[1]", "512m", ()))
    runner.stop()  # the node is shutting down while the supervisor still reconciles
    runner.warm()
    assert runner._warming is not None
    runner._warming.join(10)
    assert runner._session is None
    assert "event=spark_warm_failed" in caplog.text and "shutting down" in caplog.text
    runner.warm()  # once only
    with pytest.raises(SetlError, match="Spark was stopped"):
        runner.context  # noqa: B018


def test_while_spark_starts_at_boot_a_large_batch_runs_in_the_node() -> None:
    """Until Spark has started and run its first job, ``start: boot`` runs every batch in
    the node but one transaction's too large for it; ``on_demand`` (the batch starts Spark)
    and ``local_max_rows: 0`` (every batch on Spark) wait for it, as they say."""
    from node.spark import STARTING_MAX_ROWS, SparkRunner
    from shared.settings import SparkSettings

    def runner(**settings: object) -> SparkRunner:
        return SparkRunner(SparkSettings("local[1]", "512m", (), **settings))  # type: ignore[arg-type]

    assert runner(local_max_rows=10, start="boot").local(STARTING_MAX_ROWS)
    assert not runner(local_max_rows=10, start="boot").local(STARTING_MAX_ROWS + 1)
    assert not runner(local_max_rows=10, start="on_demand").local(11)
    assert runner(local_max_rows=10, start="on_demand").local(10)
    assert not runner(local_max_rows=0, start="boot").local(1)
