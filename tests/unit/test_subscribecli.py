"""``setl subscribe``: where ``--from`` (and ``Subscriber(start=…)``) moves a subscription,
and what a move leaves when the position cannot be set."""

from __future__ import annotations

from typing import Any

import pytest

from manager.subscriber import move, start_request
from shared.errors import ConfigError, PositionLostError
from shared.rpc import manager_pb2, model_pb2

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


@pytest.mark.parametrize(("start", "file", "pos", "gtid"), [
    ("mysql-bin.000003:4", "mysql-bin.000003", 4, ""),  # the example the error gives
    ("my-host-bin.000012:1234", "my-host-bin.000012", 1234, ""),
    ("0-1-100", "", 0, "0-1-100"),
    ("0-1-100, 1-2-7", "", 0, "0-1-100,1-2-7"),
    (f"{UUID}:1-23", "", 0, f"{UUID}:1-23"),
    (f"{UUID}:23", "", 0, f"{UUID}:1-23"),  # one transaction's GTID: everything up to it
    (f"{UUID.upper()}:1-5:7-9,{UUID}:tag:8", "", 0, f"{UUID.upper()}:1-5:7-9,{UUID}:tag:1-8"),
])
def test_from_takes_every_kind_of_position(start: str, file: str, pos: int, gtid: str
                                           ) -> None:
    request = start_request("c", "p", start)
    assert (request.to.file, request.to.pos, request.to.gtid, request.latest) == \
        (file, pos, gtid, False)
    assert (request.channel, request.pipeline, request.action, request.replay) == \
        ("c", "p", "set", True)
    assert start_request("c", "", "latest").latest


@pytest.mark.parametrize("start", ["", "mysql-bin.000003", "bin:0", "0-1", "x:y", "0-1-a",
                                   f"{UUID}:", "soon"])
def test_from_refuses_what_is_not_a_position_saying_what_is(start: str) -> None:
    with pytest.raises(ConfigError, match="give latest, FILE:POS"):
        start_request("c", "", start)


class Manager:
    """A manager whose channel stops and starts as told; setting a position fails."""

    def __init__(self, error: Exception | None = None) -> None:
        self.status, self.error = model_pb2.CHANNEL_STATUS_START, error
        self.calls: list[str] = []

    def call(self, method: str, request: Any) -> Any:
        if method == "SetChannelStatus":
            self.status = request.status
            self.calls.append(model_pb2.ChannelStatus.Name(request.status))
        elif method == "Positions":
            self.calls.append("set")
            if self.error is not None:
                raise self.error
        running = self.status == model_pb2.CHANNEL_STATUS_START
        return manager_pb2.ChannelInfo(status=self.status, pipelines=[
            manager_pb2.PipelineState(pipeline_id="c.p", state="running" if running
                                      else "stopped", owner_node=1 if running else 0)])


def test_a_move_stops_sets_and_starts() -> None:
    manager = Manager()
    move(manager, "c", "", "mysql-bin.000003:4", 5)  # type: ignore[arg-type]
    assert manager.calls == ["CHANNEL_STATUS_STOP", "set", "CHANNEL_STATUS_START"]


def test_a_move_that_cannot_set_the_position_starts_the_channel_again() -> None:
    manager = Manager(PositionLostError("source db has no binlog file mysql-bin.000001"))
    with pytest.raises(PositionLostError, match=r"not moved to mysql-bin\.000001:4: source db "
                       r"has no binlog file .*its channel was started again"):
        move(manager, "c", "", "mysql-bin.000001:4", 5)  # type: ignore[arg-type]
    assert manager.calls == ["CHANNEL_STATUS_STOP", "set", "CHANNEL_STATUS_START"]
    assert manager.status == model_pb2.CHANNEL_STATUS_START
