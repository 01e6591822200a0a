"""scripts/demo.py's wait for the pipeline, against the lines ``setl status`` prints (a
state of "not running" once let the demo's workload start before the pipeline had a
position)."""

from __future__ import annotations

import pytest

from manager import render
from scripts import demo
from shared.rpc import manager_pb2, model_pb2


def status_line(state: str) -> str:
    info = manager_pb2.ChannelInfo(status=model_pb2.ChannelStatus.Value("CHANNEL_STATUS_START"))
    info.channel.name = "demo"
    info.pipelines.append(manager_pb2.PipelineState(pipeline_id="demo.forward", state=state,
                                                    owner_node=1))
    line = next(line for line in render.pipelines([info]).splitlines()
                if line.startswith("demo."))
    return line


@pytest.mark.parametrize("state,runs", [("running", True), ("not running", False),
                                        ("starting", False),
                                        ("retrying", False)])
def test_only_the_state_running_counts(state: str, runs: bool) -> None:
    assert demo.running(status_line(state)) is runs
