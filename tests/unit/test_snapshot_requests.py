"""How a pipeline's runner takes the copies asked of it (:mod:`node.snapshot.controller`): a
request for a newer definition is left to the runner of that one, a request is deleted only
once its copy is saved, a failed copy or an unsaved state is the pipeline's last error, and
finished copies are kept small and not forever (:mod:`node.snapshot.state`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from manager import render
from node import pipeline as pipelines
from node.extract.chunks import SplitKey, chunks_of
from node.snapshot.controller import Snapshots
from node.snapshot.state import KEPT_FINISHED, KEPT_S, TableCopy, failed_problem, pruned
from shared.errors import ConfigError, CoordinationError
from shared.model import PipelineParams
from shared.rpc import manager_pb2

PID = "shop.forward"


class Store:
    """The ZooKeeper side: requests, and the saved copies (a save may fail)."""

    def __init__(self, *requests: dict[str, Any]) -> None:
        self.waiting = {f"/r/request-{i:010d}": request for i, request in enumerate(requests)}
        self.saved: list[dict[str, Any]] | None = None
        self.failing = False
        self.planned: list[str] = []
        self.forgotten: list[str] = []

    def requests(self) -> list[tuple[str, dict[str, Any]]]:
        return sorted(self.waiting.items())

    def taken(self, znode: str) -> None:
        self.waiting.pop(znode, None)

    def save(self, copies: list[TableCopy]) -> None:
        if self.failing:
            raise OSError("ZooKeeper away")
        self.saved = [copy.to_json() for copy in copies]

    def control(self) -> dict[str, Any]:
        return {}

    def write_plan(self, copy: TableCopy) -> None:
        self.planned.append(copy.id)

    def forget(self, copy: TableCopy) -> None:
        self.forgotten.append(copy.id)


class Compiled:
    version = 7

    def wants(self, schema: str, table: str) -> bool:
        return table != "gone"

    def stored(self, schema: str, table: str) -> tuple[str, str]:
        return schema, table

    def configured_keys(self, schema: str, table: str) -> tuple[str, ...]:
        return ()


def snapshots(store: Store, monkeypatch: pytest.MonkeyPatch) -> Snapshots:
    def plan(self: Snapshots, schema: str, table: str, where: str) -> TableCopy:
        if not self.compiled.wants(schema, table):
            raise ConfigError(f"pipeline {self.pipeline_id}: table {schema}.{table} is not "
                              "replicated by this pipeline, so it cannot be copied by it")
        return TableCopy(f"{schema}.{table}@1", schema, table, where,
                         SplitKey(schema, table, ("id",), "int"), list(chunks_of([10, 20])), 30)

    monkeypatch.setattr(Snapshots, "_plan", plan)
    return Snapshots(PID, None, Compiled(), PipelineParams(), None, store, None)  # type: ignore[arg-type]


def request(table: str, version: int, asked: float = 1.0) -> dict[str, Any]:
    return {"schema": "shop", "table": table, "where": "", "asked": asked, "version": version}


def test_a_request_for_a_newer_definition_is_left_to_its_runner(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The old runner, stopping after an apply, must not take (and fail) the copy of a table
    only the new definition pairs."""
    store = Store(request("added", 8), request("gone", 7))
    found = snapshots(store, monkeypatch)
    found._take_requests()
    assert list(store.waiting.values()) == [request("added", 8)]  # left for version 8
    [failed] = found.copies  # a table this version does not pair: failed, and said
    assert (failed.table, failed.state) == ("gone", "failed")
    assert found.problem().startswith(
        "pipeline shop.forward: the copy of shop.gone failed: table shop.gone is not "
        "replicated by this pipeline")
    assert "setl snapshot status shop" in found.problem()
    assert "setl snapshot shop --table shop.gone" in found.problem()


def test_a_request_is_deleted_only_once_its_copy_is_saved(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(request("orders", 7))
    found = snapshots(store, monkeypatch)
    store.failing = True
    with pytest.raises(CoordinationError, match=r"the copy of shop.orders waits: its state "
                       "cannot be saved to ZooKeeper"):
        found._take_requests()
    assert len(store.waiting) == 1 and found.copies == [] and not found._queue
    assert "cannot be saved to ZooKeeper: OSError: ZooKeeper away" in found.problem()
    store.failing = False
    found._take_requests()
    assert store.waiting == {} and [c.table for c in found.copies] == ["orders"]
    assert len(found._queue) == 3 and found.problem() == ""
    # saved, and the delete failed: the request seen again starts no second copy
    store.waiting["/r/request-0000000000"] = request("orders", 7)
    found._take_requests()
    assert store.waiting == {} and len(found.copies) == 1 and len(found._queue) == 3


def test_a_save_that_fails_is_said_until_one_goes_through(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store()
    found = snapshots(store, monkeypatch)
    store.failing = True
    assert not found._save()
    assert found.problem().startswith("pipeline shop.forward: the table copies' state cannot "
                                      "be saved to ZooKeeper")
    store.failing = False
    assert found._save() and found.problem() == ""


def test_stopping_a_runner_stops_its_copies_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before Load drains: a request taken meanwhile may be for the replacing runner."""
    runner = object.__new__(pipelines.PipelineRunner)
    runner.stop_event, runner._select_stop = pipelines.threading.Event(), \
        pipelines.threading.Event()
    runner._snapshots = snapshots(Store(), monkeypatch)
    runner.state = "running"
    runner.request_stop()
    assert runner._snapshots._stop.is_set()
    assert runner.state == "stopping"  # (status showed "running" until the runner ended)


def copy(table: str, state: str, started: float, finished: float = 0.0,
         error: str = "") -> TableCopy:
    return TableCopy(f"shop.{table}@{started}", "shop", table, "",
                     SplitKey("shop", table, ("id",), "int"), list(chunks_of([10, 20])), 30,
                     state=state, started=started, finished=finished, error=error)


def test_finished_copies_are_saved_without_their_chunks_and_pruned() -> None:
    now = 10 * KEPT_S
    done = copy("done", "done", now - 5, now - 1)
    done.done = {0, 1, 2}
    saved = done.to_json()
    assert saved["chunks"] == [] and saved["total"] == 3
    again = TableCopy.from_json(json.loads(json.dumps(saved)))
    assert (again.total, len(again.done), again.state) == (3, 3, "done")
    running = copy("running", "copying", 1)  # under way: kept, with its chunks
    assert len(running.to_json()["chunks"]) == 3
    old = copy("old", "done", 1, now - KEPT_S - 1)
    many = [copy(f"t{i}", "cancelled", i, now - 100 + i) for i in range(KEPT_FINISHED + 5)]
    kept = pruned([running, old, done, *many], now)
    assert running in kept and done in kept and old not in kept
    assert len(kept) == KEPT_FINISHED + 1 and many[0] not in kept


def test_a_failed_copy_is_the_last_error_until_its_table_is_copied_again() -> None:
    now = 1000.0
    failed = copy("orders", "failed", 10, 11, error=f"pipeline {PID}: no key")
    assert failed_problem(PID, [failed], now) == (
        "pipeline shop.forward: the copy of shop.orders failed: no key; see setl snapshot "
        "status shop; once fixed, copy it again: setl snapshot shop --table shop.orders")
    assert failed_problem(PID, [failed, copy("orders", "copying", 20)], now) == ""
    assert failed_problem(PID, [failed], now + 2 * 86_400) == ""  # a day on: the log has it


def test_status_lists_failed_copies_beside_those_under_way() -> None:
    found = [manager_pb2.TableCopy(table="shop.a", state="failed", error="no key\nmore"),
             manager_pb2.TableCopy(table="shop.b", state="failed", error="old"),
             manager_pb2.TableCopy(table="shop.b", state="done", chunks=2, chunks_done=2),
             manager_pb2.TableCopy(table="shop.c", state="copying", chunks=4, chunks_done=1),
             manager_pb2.TableCopy(table="shop.d", state="done")]
    state = manager_pb2.PipelineState(pipeline_id=PID, state="running", owner_node=1,
                                      snapshots=found)
    text = render.pipelines([manager_pb2.ChannelInfo(pipelines=[state])])
    lines = text.splitlines()
    assert any("shop.a" in line and "failed" in line and "no key" in line for line in lines)
    assert any("shop.c" in line and "copying" in line and "1/4" in line for line in lines)
    assert "shop.b" not in text and "shop.d" not in text  # copied again; done


def test_zookeeper_not_answering_at_a_start_is_no_failure() -> None:
    """The catalog's calls say an outage as ZooKeeperUnavailableError, not kazoo's own
    error: the start counted it as a failure, so a minute's outage paused the channel and
    left its runner dead on the node. It is a start abandoned (the node starts it again)."""
    from types import SimpleNamespace

    from shared.errors import OwnershipLostError, ZooKeeperUnavailableError

    class Away:
        def load(self) -> None:
            raise ZooKeeperUnavailableError("ZooKeeper did not answer in 5 s")

    runner = object.__new__(pipelines.PipelineRunner)
    runner.ctx = SimpleNamespace(pipeline=SimpleNamespace(params=None))
    runner.cursor, runner.cursors = None, Away()
    with pytest.raises(OwnershipLostError, match="ZooKeeper did not answer"):
        runner._run_once(None)  # type: ignore[arg-type]


def test_a_copys_done_chunks_are_saved_without_their_bounds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole state is written as chunks are done: a chunk done is never read again, so
    its bounds are not saved (a chaos soak's 600 KB a save ran ZooKeeper out of memory). It
    is saved as an unbounded chunk, which an older setl reads too (a null stopped it: a
    review), and by one look at ``done``: a chunk Load marks done meanwhile was saved
    unbounded and not done — read again as the whole table."""
    from node.snapshot import state
    running = copy("running", "copying", 1)
    running.done = {0, 2}
    saved = json.loads(json.dumps(running.to_json()))
    assert saved["chunks"][0] == saved["chunks"][2] == [None, None, False]
    again = TableCopy.from_json(saved)
    assert again.done == {0, 2} and again.total == 3
    assert (again.chunks[1].low, again.chunks[1].high) == (running.chunks[1].low,
                                                           running.chunks[1].high)
    assert [len(chunk) for chunk in saved["chunks"]] == [3, 3, 3]  # (as an older setl unpacks)
    ranges = state._ranges

    def meanwhile(done: set[int]) -> str:  # Load's thread marks chunk 1 done in between
        running.done.add(1)
        return ranges(done)
    monkeypatch.setattr(state, "_ranges", meanwhile)
    raced = running.to_json()
    assert raced["done"] == "0,2" and raced["chunks"][1] != [None, None, False]
