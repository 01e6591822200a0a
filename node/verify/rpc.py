"""The node's side of ``setl verify``: the ``NodeService.Verify`` stream, a thin adapter
around :class:`node.verify.run.Verification` (which runs in a thread of its own while the
stream sends its progress), and the tie to the runner of the pipeline on this node."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from node.supervisor import Supervisor
from node.verify.report import Report
from node.verify.run import Context, Options, Progress, Verification, failed
from node.verify.run import options_problem as problem_of
from shared import codec
from shared.errors import ConfigError, NotFoundError, SetlError, VerifyError
from shared.model import BinlogPosition, MediaPair
from shared.rpc import manager_pb2

log = logging.getLogger("setl.node.verify")
_CODES: list[tuple[type[SetlError], grpc.StatusCode]] = [
    (ConfigError, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
]


def options_of(request: manager_pb2.VerifyRequest) -> Options:
    return Options(table=request.table, where=request.where.strip(),
                   chunk_size=request.chunk_size or 10_000, rate=request.rate,
                   repair=request.repair, columns=tuple(request.columns),
                   compare=request.compare or "auto",
                   settle_timeout_s=float(request.settle_timeout_s or 120),
                   shared_targets=frozenset(request.shared_targets),
                   other_pairs=tuple(codec.from_proto(pair, MediaPair)
                                     for pair in request.other_pairs))


def context_from(supervisor: Supervisor, node_id: int, pipeline_id: str,
                 spark: Any) -> Context:
    """The verify context of a pipeline this node runs; VerifyError when it does not."""
    entry = supervisor.runners.get(pipeline_id)
    runner = entry[0] if entry else None
    if runner is None or not runner.alive or runner.state != "running":
        raise VerifyError(f"pipeline {pipeline_id} is not running on node {node_id} "
                          f"({runner.state if runner else 'not here'}); verify runs where the "
                          "pipeline runs: start the channel, or retry once it runs")

    def applied() -> BinlogPosition | None:
        current = supervisor.runners.get(pipeline_id)
        if current is None or current[0] is not runner or not runner.alive:
            raise VerifyError(f"pipeline {pipeline_id} stopped on node {node_id} while "
                              "verify ran; run verify again once it runs")
        return runner.cursor.position if runner.cursor is not None else None
    ctx = runner.ctx
    sources = ctx.sources if runner.source is None else \
        {**ctx.sources, ctx.pipeline.source: runner.source}  # a replica set's primary now
    return Context(ctx.channel, ctx.pipeline, ctx.version, sources, spark, applied)


def stream(request: manager_pb2.VerifyRequest, context: Any,
           find: Callable[[str], Context]) -> Iterator[manager_pb2.VerifyProgress]:
    """Run one pipeline's verify, yielding its progress and, last, its report."""
    pipeline_id = f"{request.channel}.{request.pipeline}"
    options = options_of(request)
    try:
        problem = problem_of(options)
        if problem:
            raise ConfigError(problem)
        ctx = find(pipeline_id)
    except SetlError as exc:
        _abort(context, exc)
        return
    events: queue.Queue[tuple[str, Any]] = queue.Queue()
    cancelled = threading.Event()
    context.add_callback(cancelled.set)

    def work() -> None:
        try:
            run = Verification(ctx, options, lambda p: events.put(("progress", p)),
                               cancelled.is_set)
            events.put(("report", run.run()))
        except Exception as exc:  # every failure reaches the user as one message
            if not isinstance(exc, SetlError):
                log.exception("event=verify_failed pipeline=%s", pipeline_id)
            events.put(("error", failed(exc)))

    log.info("event=verify_started pipeline=%s table=%s repair=%s", pipeline_id,
             options.table or "*", options.repair)
    threading.Thread(target=work, name=f"verify-{pipeline_id}", daemon=True).start()
    while True:
        kind, item = events.get()
        if kind == "progress":
            yield progress_proto(item)
        elif kind == "report":
            log.info("event=verify_done pipeline=%s tables=%d differing=%d seconds=%.2f",
                     pipeline_id, len(item.tables), sum(t.keys for t in item.tables),
                     item.seconds)
            yield manager_pb2.VerifyProgress(pipeline_id=pipeline_id, phase="done",
                                             report=report_proto(item))
            return
        else:
            log.warning("event=verify_failed pipeline=%s error=%s", pipeline_id, item)
            _abort(context, item)
            return


def _abort(context: Any, exc: SetlError) -> None:
    code = next((code for kind, code in _CODES if isinstance(exc, kind)),
                grpc.StatusCode.FAILED_PRECONDITION)
    context.abort(code, str(exc))


def progress_proto(progress: Progress) -> manager_pb2.VerifyProgress:
    return manager_pb2.VerifyProgress(
        pipeline_id=progress.pipeline_id, table=progress.table, phase=progress.phase,
        chunks_done=progress.chunks_done, chunks_total=progress.chunks_total,
        rows_done=progress.rows_done, rows_total=progress.rows_total)


def report_proto(report: Report) -> manager_pb2.VerifyReport:
    tables = []
    for table in report.tables:
        tables.append(manager_pb2.TableVerdict(
            table=table.table, method=table.method, targets=table.targets, rows=table.rows,
            chunks=table.chunks, missing=table.counts.get("missing", 0),
            extra=table.counts.get("extra", 0), different=table.counts.get("different", 0),
            differing_keys=table.keys, unsettled=table.unsettled, seconds=table.seconds,
            rows_per_second=round(table.rows / table.seconds, 1) if table.seconds else 0,
            differences=[manager_pb2.KeyDifference(kind=kind, key=key, target=target)
                         for kind, key, target in table.differences],
            notes=table.notes, repaired=table.repaired, remaining=table.remaining,
            rechecked=table.rechecked))
    return manager_pb2.VerifyReport(
        pipeline_id=report.pipeline_id, tables=tables,
        skipped=[manager_pb2.SkippedTable(table=s.table, reason=s.reason)
                 for s in report.skipped], buffer=report.buffer, seconds=report.seconds)
