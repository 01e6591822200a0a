"""node/supervisor.py: which runners a reconcile stops, replaces and starts (no ZooKeeper:
a node that always holds the pipeline)."""

from __future__ import annotations

import functools

import pytest

from node import supervisor as supervisors
from node.pipeline import PipelineContext
from node.supervisor import Supervisor
from shared.catalog import ChannelRecord
from shared.definitions import load_text
from shared.model import ChannelStatus, DataSource
from shared.zk import ZkPaths
from tests.supervised import SHOP, Runner, definitions

DEFINITIONS = load_text(definitions(), "c.yaml")
SOURCES = {"s": 1, "t": 1}
PID = "shop.forward"


class Client:
    connected = True
    client_id = (1, b"")

    def add_listener(self, listener: object) -> None:
        pass


class Catalog:
    """The stored sources, and the channel's status as ZooKeeper has it now."""

    def __init__(self) -> None:
        self.status = (ChannelStatus.START, 1)

    def source(self, name: str) -> DataSource:
        return next(source for source in DEFINITIONS.sources if source.name == name)

    def status_at(self, name: str) -> tuple[ChannelStatus, int]:
        return self.status


@pytest.fixture
def node(monkeypatch: pytest.MonkeyPatch) -> tuple[Supervisor, Catalog, list[Runner]]:
    started: list[Runner] = []

    def runner(context: PipelineContext) -> Runner:
        started.append(Runner(context))
        return started[-1]
    monkeypatch.setattr(supervisors, "PipelineRunner", runner)
    catalog = Catalog()
    supervisor = Supervisor(1, Client(), ZkPaths("/x"), catalog, None)  # type: ignore[arg-type]
    monkeypatch.setattr(supervisor, "_acquire", lambda pid: (7, 1))
    monkeypatch.setattr(supervisor, "_release", lambda pid: None)
    return supervisor, catalog, started


def record(status: ChannelStatus, status_version: int, version: int = 1) -> ChannelRecord:
    return ChannelRecord(DEFINITIONS.channels[0], version, 0, status, status_version)


def test_a_failed_pipeline_whose_pause_gave_way_to_the_operators_start_starts_again(
        node: tuple[Supervisor, Catalog, list[Runner]]) -> None:
    supervisor, catalog, started = node
    supervisor.reconcile([record(ChannelStatus.START, 1)], SOURCES)
    assert len(started) == 1
    # it fails for good; its pause is refused (BadVersion): the operator ran
    # `setl channel start` meanwhile, at status version 2, and the channel stays started
    started[0].fail_for_good()
    catalog.status = (ChannelStatus.START, 2)
    supervisor.reconcile([record(ChannelStatus.START, 2)], SOURCES)
    assert len(started) == 2
    assert supervisor.running() == [PID]
    assert supervisor.runners[PID][0] is started[1]
    # and it runs on: a later reconcile at the same status leaves it be
    supervisor.reconcile([record(ChannelStatus.START, 2)], SOURCES)
    assert len(started) == 2 and started[1].alive


def test_a_failed_pipeline_is_not_started_again_while_its_status_is_unchanged(
        node: tuple[Supervisor, Catalog, list[Runner]]) -> None:
    supervisor, _, started = node
    supervisor.reconcile([record(ChannelStatus.START, 1)], SOURCES)
    started[0].fail_for_good()  # its pause not written yet (or given up on a stop)
    supervisor.reconcile([record(ChannelStatus.START, 1)], SOURCES)
    assert len(started) == 1
    assert supervisor.runners[PID][0] is started[0]


def test_a_failed_pipeline_whose_pause_landed_is_not_started_again(
        node: tuple[Supervisor, Catalog, list[Runner]]) -> None:
    supervisor, catalog, started = node
    supervisor.reconcile([record(ChannelStatus.START, 1)], SOURCES)
    started[0].fail_for_good()
    catalog.status = (ChannelStatus.PAUSE, 2)  # its pause, written over version 1
    supervisor.reconcile([record(ChannelStatus.PAUSE, 2)], SOURCES)
    assert len(started) == 1
    assert PID not in supervisor.runners


def test_a_failed_pipeline_is_not_started_again_from_a_snapshot_older_than_its_pause(
        node: tuple[Supervisor, Catalog, list[Runner]]) -> None:
    """The operator started the running channel again (status version 2); then the
    pipeline failed and paused the channel over version 2, after the node had read it."""
    supervisor, catalog, started = node
    supervisor.reconcile([record(ChannelStatus.START, 1)], SOURCES)
    started[0].fail_for_good()
    catalog.status = (ChannelStatus.PAUSE, 3)
    supervisor.reconcile([record(ChannelStatus.START, 2)], SOURCES)
    assert len(started) == 1


TWO_CHANNELS = load_text(definitions(SHOP + """\
  - name: stock
    pipelines:
      - name: forward
        source: s
        target: t
        pairs:
          - {source: stock.items, target: stock.items}
"""), "c.yaml")


def test_the_runners_of_a_changed_source_are_stopped_together(
        node: tuple[Supervisor, Catalog, list[Runner]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each was asked to stop only once the one before had ended (or waited 30 s for): a
    source many pipelines use held the reconcile that long per pipeline. These runners
    end only once all of them are asked (a stop each waits for, as a shared slow target)."""
    supervisor, _, started = node
    monkeypatch.setattr(supervisors, "STOP_WAIT_S", 5.0)  # a stop waited for one by one
    records = [ChannelRecord(channel, 1, 0, ChannelStatus.START, 1)
               for channel in TWO_CHANNELS.channels]
    supervisor.reconcile(records, SOURCES)
    first = list(started)
    assert len(first) == 2
    asked: list[Runner] = []
    waited_alone: list[Runner] = []

    def stop(runner: Runner) -> None:
        asked.append(runner)
        if len(asked) == len(first):
            for each in first:
                each.ended.set()

    def join(runner: Runner, wait_s: float) -> bool:
        if len(asked) < len(first):
            waited_alone.append(runner)
        return runner.ended.wait(wait_s)
    for runner in first:
        monkeypatch.setattr(runner, "request_stop", functools.partial(stop, runner))
        monkeypatch.setattr(runner, "join", functools.partial(join, runner))

    supervisor.reconcile(records, {"s": 2, "t": 1})  # source s redefined
    assert waited_alone == []
    assert not any(runner.alive for runner in first)
    assert len(started) == 4
    assert supervisor.running() == ["shop.forward", "stock.forward"]
    assert {runner for runner, _ in supervisor.runners.values()} == set(started[2:])


def test_a_runner_that_outlives_its_stop_is_not_replaced_until_it_ends(
        node: tuple[Supervisor, Catalog, list[Runner]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    supervisor, _, started = node
    monkeypatch.setattr(supervisors, "STOP_WAIT_S", 0.0)
    supervisor.reconcile([record(ChannelStatus.START, 1)], SOURCES)
    slow = started[0]
    monkeypatch.setattr(slow, "request_stop", lambda: None)  # a load still running
    supervisor.reconcile([record(ChannelStatus.START, 1, version=2)], SOURCES)
    assert len(started) == 1 and PID not in supervisor.runners
    slow.ended.set()
    supervisor.reconcile([record(ChannelStatus.START, 1, version=2)], SOURCES)
    assert len(started) == 2 and supervisor.runners[PID][0] is started[1]
