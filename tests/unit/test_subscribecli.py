"""``setl subscribe``: where ``--from`` (and ``Subscriber(start=…)``) moves a subscription,
what a move leaves when the position cannot be set, and ``--table``: a view of the tables
the subscription has, which moves it only when told."""

from __future__ import annotations

import json
import math
import struct
import sys
from typing import Any, ClassVar

import pytest

from manager import cli, subscribecli, subscribejson
from manager.subscriber import move, start_request
from shared import codec, definitions
from shared.errors import ConfigError, PositionLostError
from shared.rpc import manager_pb2, model_pb2, subscription_pb2

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


# -- --table -------------------------------------------------------------------------------
DEFINITION = """\
sources:
  - {name: src, host: h}
  - {name: feed, type: subscription}
channels:
  - name: c
    pipelines:
      - name: p
        source: src
        target: feed
        pairs:
          - {source: shop.orders, target: shop.orders_v2}
          - {source: "`my.db`.`t[1]`", target: "`my.db`.`t[1]`"}
          - source: {namespace: logs, table: "orders_[0-1]"}
            target: {namespace: logs, table: "orders_[0-1]"}
          - source: {namespace: audit, table: "re:ev_\\\\d+"}
            target: {namespace: audit, table: "ods_{table}"}
"""


class Feed:
    """The subscription as ``Subscriber`` gives it: batches, and the acks it was sent."""

    acked: ClassVar[list[int]] = []
    batches: ClassVar[list[subscription_pb2.ChangeBatch]] = []
    look: ClassVar[bool | None] = None

    def __init__(self, *args: Any, look: bool = False) -> None:
        Feed.acked, Feed.look = [], look

    def __enter__(self) -> Feed:
        return self

    def __exit__(self, *args: Any) -> None:
        pass

    def __iter__(self) -> Any:
        return iter(Feed.batches)

    def ack(self, batch: subscription_pb2.ChangeBatch) -> None:
        Feed.acked.append(batch.batch_id)


class Definitions:
    """A manager that has the channel of DEFINITION."""

    def __init__(self) -> None:
        self.addresses, self.access, self.calls = ["m:1"], None, []
        self.channel = codec.to_proto(definitions.load_text(DEFINITION, "f.yaml").channels[0])

    def call(self, method: str, request: Any) -> Any:
        self.calls.append(method)
        assert method == "GetChannel" and request.name == "c"
        return manager_pb2.ChannelInfo(channel=self.channel)


def txn(number: int, *tables: tuple[str, str], ddl: str = "") -> subscription_pb2.Transaction:
    return subscription_pb2.Transaction(
        id=f"bin.000001:{number}", ddl=ddl, ddl_schema=tables[0][0] if ddl else "",
        changes=[] if ddl else [subscription_pb2.RowChange(op="I", schema=schema, table=table,
                                                          index=index)
                                for index, (schema, table) in enumerate(tables)])


@pytest.fixture
def feed(monkeypatch: pytest.MonkeyPatch) -> type[Feed]:
    monkeypatch.setattr(subscribecli, "Subscriber", Feed)
    Feed.batches = [
        subscription_pb2.ChangeBatch(batch_id=1, transactions=[
            txn(100, ("shop", "orders_v2")), txn(200, ("my.db", "t[1]"), ("my.db", "t1"))]),
        subscription_pb2.ChangeBatch(batch_id=2, transactions=[
            txn(300, ("logs", "orders_1")), txn(400, ("my.db", "x"), ddl="ALTER TABLE x"),
            txn(500, ("audit", "ods_ev_7"))])]
    return Feed


def subscribe(*argv: str) -> int:
    return subscribecli.run(cli._parser().parse_args(["subscribe", "c", *argv]),
                            Definitions())  # type: ignore[arg-type]


@pytest.mark.parametrize("pattern", [
    "shop.orders",      # the source's name of a renamed table
    "Shop.orders_v2",   # another case
    "`shop.orders_v2`", "shop.ordrs_v2", "my.db.t[1]", "`my.db`.t[1]", "logs.orders_2",
    "audit.ev_*"])
def test_a_table_pattern_that_matches_nothing_is_refused_before_anything_is_read(
        feed: type[Feed], pattern: str) -> None:
    with pytest.raises(ConfigError) as found:
        subscribe("--table", pattern, "--from", "latest")  # (nothing moved either)
    assert Feed.acked == []
    message = str(found.value)
    assert message.startswith(f"--table {pattern!r}") and (
        "matches no table of subscription c, which has audit.ods_{table}, logs.orders_0, "
        "logs.orders_1, `my.db`.`t[1]`, shop.orders_v2: give their names as the pairs write "
        "them (a renamed table by its target name" in message
        or "give schema.table" in message)


def test_a_table_pattern_is_a_view_that_acknowledges_nothing_unless_told(
        feed: type[Feed], capsys: pytest.CaptureFixture[str]) -> None:
    assert subscribe("--table", "`my.db`.`t[1]`", "--table", "logs.*") == 0
    printed = capsys.readouterr()
    assert [line.split(" {")[0] for line in printed.out.splitlines()] == [
        "bin.000001:200 #0 I my.db.t[1]", "bin.000001:300 #0 I logs.orders_1",
        "bin.000001:400 DDL my.db: ALTER TABLE x"]
    assert Feed.acked == [] and "--table is a view: nothing is acknowledged" in printed.err
    assert Feed.look  # a view never takes the subscription from its reader
    assert subscribe("--table", "audit.ods_ev_*", "--ack-filtered") == 0
    assert capsys.readouterr().out.startswith("bin.000001:500 #0 I audit.ods_ev_7")
    assert Feed.acked == [1, 2] and Feed.look is False
    assert subscribe() == 0 and Feed.acked == [1, 2]  # without --table: every batch
    assert Feed.look is False
    assert subscribe("--no-ack") == 0 and Feed.acked == [] and Feed.look
    with pytest.raises(ConfigError, match="give it with --table, and without --no-ack"):
        subscribe("--ack-filtered")


def test_a_pattern_is_checked_against_the_names_a_template_can_make() -> None:
    overlap = subscribecli._overlap
    assert overlap("ods_ev_*", "ods_*") and overlap("*_7", "ods_*") and overlap("o?s_x", "ods_*")
    assert not overlap("ev_*", "ods_*") and not overlap("ods", "ods_*")
    assert overlap("t[0-9]", "t[[]") is False and overlap("t[[]1]", "t[[]1]")
    assert overlap("[!a]x", "bx") and not overlap("[!a]x", "ax")
    assert not overlap("[a-c]", "[-]") and overlap("[a-c]", "[!a]")



@pytest.mark.parametrize(("typed", "printed"), [
    (0.1, "0.1"), (1.5, "1.5"), (3.14159, "3.14159"), (-2.5e-8, "-2.5e-08"),
    (16777216.0, "16777216.0"), (3.4028234663852886e38, "3.4028235e+38"),
    (1 / 3, "0.33333334")])
def test_a_float_column_prints_its_shortest_float32_digits(typed: float, printed: str
                                                            ) -> None:
    """A FLOAT's 0.1 printed as 0.10000000149011612 (the float32 read as a double)."""
    message = subscription_pb2.Value(float=typed)
    found = subscribejson.value(message)
    assert json.dumps(found) == printed
    assert struct.pack("<f", found) == struct.pack("<f", message.float)  # the same float32


def test_a_double_column_prints_as_it_is() -> None:
    assert subscribejson.value(subscription_pb2.Value(double=0.1)) == 0.1
    assert math.isinf(subscribejson.value(subscription_pb2.Value(float=math.inf)))


def test_text_a_terminal_must_not_get_is_printed_as_json_escapes_that_parse_to_it(
        feed: type[Feed], capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI escapes control characters for the terminal (``\\x7f``: no JSON escape):
    a DEL, a C1 control (latin1's 0x81, a NEL) in a text value made a line no JSON reader
    parsed, and the batch was acknowledged once printed (a review)."""
    note = "a\x7fb\x81c\x85d\u2028e\x1bf é"
    change = subscription_pb2.RowChange(
        op="I", schema="shop", table="orders_v2", index=0,
        after=[subscription_pb2.Field(name="note", value=subscription_pb2.Value(text=note))])
    Feed.batches = [subscription_pb2.ChangeBatch(batch_id=7, transactions=[
        subscription_pb2.Transaction(id="bin.000001:100", changes=[change])])]
    out = cli._Printable(sys.stdout)  # as cli.main wraps it
    for argv in (["-o", "json"], []):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sys, "stdout", out)
            assert subscribe(*argv) == 0
        line = capsys.readouterr().out.strip()
        found = json.loads(line if argv else line.split(" ", 4)[4])
        assert (found["changes"][0]["after"] if argv else found) == {"note": note}
        assert Feed.acked == [7] and "\x7f" not in line and "é" in line
