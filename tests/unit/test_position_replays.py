"""manager.positions: a move back over what a target holds (``setl position set --replay``,
``setl position reset``) is a replay; over keyless source tables it is refused until
--keyless-duplicates, naming them; a reset needs --replay exactly when it replays and says
what a reset to ``latest`` skips. ZooKeeper, the catalog and the servers are fakes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss, NoNodeError

from manager import heldrows, positionrows
from manager import positions as manager_positions
from shared import members, positions, tablekeys
from shared.catalog import ChannelRecord
from shared.definitions import load_text
from shared.errors import ConflictError
from shared.model import BinlogPosition, ChannelStatus
from shared.rpc import manager_pb2
from shared.zk import ZkPaths

HELD = BinlogPosition("binlog.000002", 900, "0-11-50", "11@h1:3306")  # the targets' rows
END = BinlogPosition("binlog.000003", 400, "0-11-80", "11@h1:3306")  # the source's end
KEYS = {("shop", "kl"): None, ("shop", "orders"): ("id",), ("shop", "notes"): None}


class Zk:
    def __init__(self) -> None:
        self.nodes: dict[str, bytes] = {}

    def exists(self, path: str) -> bool:
        return path in self.nodes

    def get(self, path: str) -> tuple[bytes, SimpleNamespace]:
        if path not in self.nodes:
            raise NoNodeError
        return self.nodes[path], SimpleNamespace(version=0)  # (no write counts versions)

    def set(self, path: str, data: bytes, version: int = -1) -> None:
        self.nodes[path] = data

    def create(self, path: str, data: bytes, makepath: bool = False) -> None:
        self.nodes[path] = data

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        self.nodes.pop(path, None)


class Catalog:
    def __init__(self, text: str) -> None:
        self.definitions = load_text(text, "f.yaml")

    def channel(self, name: str) -> ChannelRecord:
        return ChannelRecord(self.definitions.channels[0], 1, 0, ChannelStatus.STOP)

    def source(self, name: str) -> Any:
        return next(s for s in self.definitions.sources if s.name == name)


EVERY = "{source: {namespace: shop, table: 're:.*'}, target: {namespace: shop, table: '{table}'}}"


def definitions(start: str = "", pairs: str = EVERY) -> str:
    return "\n".join([
        "sources:", "  - {name: src, host: h1}", "  - {name: dst, host: h2}",
        "channels:", "  - name: shop", "    pipelines:", "      - name: fwd",
        "        source: src", "        target: dst", *([f"        start: {start}"] * bool(start)),
        "        pairs:", f"          - {pairs}", ""])


@pytest.fixture
def moved(monkeypatch: pytest.MonkeyPatch) -> dict[str, BinlogPosition]:
    """The targets' rows, as moved (read by the fakes of the servers)."""
    rows = {"dst": HELD}
    monkeypatch.setattr(positionrows, "read_row", lambda target, pid: (
        (rows[target.name], 3, 7) if rows.get(target.name, BinlogPosition()).file else None))
    monkeypatch.setattr(positionrows, "move_row", lambda target, pid, run, to: (
        rows.__setitem__(target.name, to) if to is not None else None))
    monkeypatch.setattr(manager_positions, "_binlog", lambda source: (END, [
        ("binlog.000001", 5000), ("binlog.000002", 5000), ("binlog.000003", 400)]))
    monkeypatch.setattr(positions, "current_position", lambda source: END)
    # the state there: before the rows in binlog.000001, between them and the end after
    monkeypatch.setattr(positions, "position_at", lambda source, file, pos: BinlogPosition(
        file, pos, "0-11-20" if file < HELD.file else "0-11-60", "11@h1:3306"))
    monkeypatch.setattr(tablekeys, "read_keys", lambda source: dict(KEYS))
    monkeypatch.setattr(members, "probe", lambda source: members.Probe(
        "h1:3306", server="11@h1:3306", gtid_state="0-11-80,7-42-1", gtid_pos="0-11-80,7-42-1"))
    return rows


def ask(text: str, action: str, zk: Zk | None = None, **fields: Any
        ) -> manager_pb2.PositionsResponse:
    handler = manager_positions.Positions(zk or Zk(), ZkPaths(), Catalog(text))  # type: ignore[arg-type]
    return handler.handle(manager_pb2.PositionsRequest(channel="shop", pipeline="fwd",
                                                       action=action, **fields))


EARLIER = manager_pb2.PositionsRequest().to.__class__(file="binlog.000001", pos=4)


def test_a_set_that_replays_over_keyless_tables_is_refused_naming_them(moved) -> None:
    with pytest.raises(ConflictError) as refused:
        ask(definitions(), "set", to=EARLIER, replay=True)
    said = str(refused.value)
    assert "pipeline shop.fwd: a replay from binlog.000001:4 gtid=0-11-20 into target dst " \
        "takes keyless tables: shop.kl, shop.notes." in said, said
    assert "shop.orders" not in said and "--keyless-duplicates" in said, said
    assert moved["dst"] == HELD  # nothing moved
    ask(definitions(), "set", to=EARLIER, replay=True, keyless_duplicates=True)
    assert (moved["dst"].file, moved["dst"].pos) == ("binlog.000001", 4)


def test_a_replay_of_keyed_tables_only_or_a_move_that_replays_nothing_needs_no_flag(
        moved) -> None:
    ask(definitions(pairs="{source: shop.orders, target: shop.orders}"), "set", to=EARLIER,
        replay=True)
    assert moved["dst"].file == "binlog.000001"
    moved["dst"] = HELD
    ask(definitions(), "set", to=manager_pb2.PositionsRequest().to.__class__(
        file="binlog.000003", pos=100))  # later than the row: a skip, asked for
    assert moved["dst"] == HELD
    ask(definitions(), "set", latest=True, replay=True)  # the end: nothing written again


def test_a_reset_to_a_place_earlier_than_the_targets_needs_replay_and_keyless_duplicates(
        moved) -> None:
    start = "{file: binlog.000001, pos: 4}"
    with pytest.raises(ConflictError) as refused:
        ask(definitions(start), "reset")
    said = str(refused.value)
    assert "target dst holds pipeline shop.fwd's transactions up to binlog.000002:900" in said
    assert "start: binlog.000001:4" in said and "Add --replay" in said, said
    assert moved["dst"] == HELD
    with pytest.raises(ConflictError, match=r"keyless tables: shop\.kl, shop\.notes"):
        ask(definitions(start), "reset", replay=True)
    assert moved["dst"] == HELD
    answer = ask(definitions(start), "reset", replay=True, keyless_duplicates=True)
    assert moved["dst"] == BinlogPosition()
    assert answer.notes == ["pipeline shop.fwd: its next start loads again from "
                            "binlog.000001:4 what target dst holds up to binlog.000002:900 "
                            "gtid=0-11-50 (a replay)"]


def test_a_reset_to_a_later_place_or_of_no_row_replays_nothing(moved) -> None:
    answer = ask(definitions("{file: binlog.000003, pos: 4}"), "reset")
    assert moved["dst"] == BinlogPosition() and list(answer.notes) == []
    assert list(ask(definitions("{file: binlog.000001, pos: 4}"), "reset").notes) == []


def test_a_reset_to_latest_says_what_it_skips(moved) -> None:
    answer = ask(definitions("latest"), "reset")
    assert list(answer.notes) == [
        "pipeline shop.fwd: its next start begins at the source's end then (start: latest): "
        "target dst's transactions after binlog.000002:900 gtid=0-11-50 are skipped (to "
        "binlog.000003:400 gtid=0-11-80 now, and whatever is written until the channel "
        "starts)"]
    assert moved["dst"] == BinlogPosition()


def test_a_gtid_after_the_targets_replays_nothing_and_one_before_them_does(moved) -> None:
    """A GTID start that leaves out errant transactions (after the rows, what a switch's
    refusal names) is a skip: no --replay, the rows move (blanked: the start is by GTID) and
    the answer says what is skipped; one before the rows is a replay."""
    to = manager_pb2.PositionsRequest().to.__class__
    answer = ask(definitions(), "set", to=to(gtid="0-11-50,7-42-1"))
    assert moved["dst"].gtid == "0-11-50,7-42-1"
    assert list(answer.notes) == [
        "pipeline shop.fwd: its next start begins at gtid=0-11-50,7-42-1: target dst's "
        "transactions after binlog.000002:900 gtid=0-11-50 up to there are skipped"]
    moved["dst"] = HELD
    with pytest.raises(ConflictError, match=r"keyless tables: shop\.kl, shop\.notes"):
        ask(definitions(), "set", to=to(gtid="0-11-20"), replay=True)


def lake_definitions(mode: str) -> str:
    return "\n".join([
        "sources:", "  - {name: src, host: h1}", "  - {name: dst, type: delta, location: /l}",
        "channels:", "  - name: shop", "    pipelines:", "      - name: fwd",
        "        source: src", "        target: dst", "        pairs:",
        "          - {source: shop.orders, target: shop.orders, mode: mirror}",
        f"          - {{source: shop.kl, target: shop.kl, mode: {mode}}}", ""])


def test_a_set_of_a_lake_to_an_earlier_file_is_refused_before_anything_moves(moved) -> None:
    with pytest.raises(ConflictError, match="is a lake: its tables cannot be moved back"):
        ask(lake_definitions("changelog"), "set", to=EARLIER, replay=True,
            keyless_duplicates=True)
    assert moved["dst"] == HELD


def test_a_reset_that_replays_into_a_lake_s_change_logs_is_refused_naming_them(moved) -> None:
    start = "{file: binlog.000001, pos: 4}"
    text = lake_definitions("changelog").replace("        target: dst\n",
                                                 f"        target: dst\n        start: {start}\n")
    with pytest.raises(ConflictError) as refused:
        ask(text, "reset", replay=True)
    said = str(refused.value)
    assert "into lake dst appends again to its change logs" in said, said
    assert "(pairs shop.kl, mode: changelog)" in said and "--keyless-duplicates" in said, said
    assert moved["dst"] == HELD  # nothing moved
    ask(text, "reset", replay=True, keyless_duplicates=True)
    assert moved["dst"] == BinlogPosition()


def test_a_replay_into_a_lake_mirror_needs_no_flag(moved) -> None:
    start = "{file: binlog.000001, pos: 4}"
    text = lake_definitions("mirror").replace("        target: dst\n",
                                              f"        target: dst\n        start: {start}\n")
    ask(text, "reset", replay=True)
    assert moved["dst"] == BinlogPosition()


def test_a_gtid_is_checked_when_it_is_set(moved) -> None:
    """Not MariaDB's form: refused naming the value and the form; past the source's end (or
    of another history): refused as such, not taken for a replay; nothing moves."""
    to = manager_pb2.PositionsRequest().to.__class__
    for text in ("garbage", "0-11", "0-11-x,1-2-3"):
        with pytest.raises(ConflictError) as refused:
            ask(definitions(), "set", to=to(gtid=text), replay=True)
        said = str(refused.value)
        assert f"--gtid {text!r} is not a MariaDB GTID position" in said, said
        assert "domain-server-seq[,…]" in said, said
    with pytest.raises(ConflictError) as refused:
        ask(definitions(), "set", to=to(gtid="0-11-99999"), replay=True)
    said = str(refused.value)
    assert "source src has not written 0-11-99999 (it has server 11's transactions of " \
        "domain 0 up to 0-11-80): a start at gtid=0-11-99999 is past its end" in said, said
    assert "load again" not in said
    with pytest.raises(ConflictError, match="is of another history"):
        ask(definitions(), "set", to=to(gtid="0-12-70"), replay=True)
    assert moved["dst"] == HELD


def test_a_reset_keeps_where_the_targets_were_for_a_later_set(moved) -> None:
    """After a reset (rows blanked), a set earlier than the rows were is a replay still:
    refused without --replay, and over keyless tables without --keyless-duplicates; a later
    one is a skip; a second reset keeps the place too."""
    zk = Zk()
    ask(definitions("latest"), "reset", zk)
    assert moved["dst"] == BinlogPosition()
    with pytest.raises(ConflictError, match=r"holds pipeline shop\.fwd's transactions up to "
                       r"binlog\.000002:900"):
        ask(definitions(), "set", zk, to=EARLIER)
    ask(definitions("latest"), "reset", zk)
    with pytest.raises(ConflictError, match=r"keyless tables: shop\.kl, shop\.notes"):
        ask(definitions(), "set", zk, to=EARLIER, replay=True)
    with pytest.raises(ConflictError, match="Add --replay"):
        ask(definitions("{file: binlog.000001, pos: 4}"), "reset", zk)
    assert moved["dst"] == BinlogPosition()
    answer = ask(definitions(), "set", zk, to=EARLIER.__class__(file="binlog.000003", pos=4))
    assert "up to there are skipped" in answer.notes[0], answer.notes
    ask(definitions(), "set", zk, to=EARLIER, replay=True, keyless_duplicates=True)
    assert (moved["dst"].file, moved["dst"].pos) == ("binlog.000001", 4)


def test_a_set_forgets_the_last_runs_figures(moved) -> None:
    """They showed where the pipeline was: the start prints where it begins (the cursor)."""
    zk, stats = Zk(), ZkPaths().stats("shop.fwd")
    zk.nodes[stats] = manager_pb2.PipelineState(state="not running").SerializeToString()
    ask(definitions(), "set", zk, to=EARLIER.__class__(file="binlog.000003", pos=4))
    assert stats not in zk.nodes


def test_a_gtid_of_a_source_without_strict_mode_cannot_be_told_from_the_rows(
        moved, monkeypatch: pytest.MonkeyPatch) -> None:
    """gtid_strict_mode OFF (MariaDB's default): a domain's numbers need not grow (a
    multi-source replica logs a later transaction with a lower one), so a GTID whose state
    is after the rows may be before them: it was taken for a skip and loaded a keyless row
    twice (a review). It is a replay, refused until told, saying why."""
    monkeypatch.setattr(members, "probe", lambda source: members.Probe(
        "h1:3306", server="11@h1:3306", gtid_state="0-11-80,7-42-1", gtid_pos="0-11-80,7-42-1",
        unsafe=("gtid_strict_mode",)))
    after = EARLIER.__class__(gtid="0-11-60,7-42-1")
    with pytest.raises(ConflictError) as refused:
        ask(definitions(), "set", to=after)
    said = str(refused.value)
    assert said.startswith("setl cannot tell whether gtid=0-11-60,7-42-1 is before or after "
                           "what target dst holds of pipeline shop.fwd (up to "
                           "binlog.000002:900 gtid=0-11-50): gtid_strict_mode is OFF on the "
                           "source"), said
    assert "Add --replay" in said and "--file F --pos P" in said, said
    with pytest.raises(ConflictError, match=r"keyless tables: shop\.kl, shop\.notes"):
        ask(definitions(), "set", to=after, replay=True)
    assert moved["dst"] == HELD
    ask(definitions(), "set", to=after, replay=True, keyless_duplicates=True)
    assert moved["dst"].gtid == "0-11-60,7-42-1"


@pytest.mark.parametrize("action", ["reset", "set"])
def test_what_the_targets_hold_is_kept_before_a_row_is_blanked(
        moved, monkeypatch: pytest.MonkeyPatch, action: str) -> None:
    """A failure writing pipelines/{pid}/held (ZooKeeper lost) after the rows were blanked
    left nothing to refuse a later replay with (a review): it is written first, so the rows
    stand as they were."""
    def lost(*args: Any) -> None:
        raise ConnectionLoss()
    monkeypatch.setattr(heldrows, "write", lost)
    with pytest.raises(ConnectionLoss):
        if action == "reset":
            ask(definitions("latest"), "reset")
        else:
            ask(definitions(), "set", to=EARLIER.__class__(gtid="0-11-60,7-42-1"))
    assert moved["dst"] == HELD


def test_a_skip_keeps_what_the_target_holds_not_the_place_set(moved) -> None:
    """A set by GTID forward blanks the row (a skip): what is kept is the row's place, which
    the target holds, not the place set (a later set between the two was refused as a
    replay, naming a place the target never reached: a review)."""
    zk = Zk()
    ask(definitions(), "set", zk, to=EARLIER.__class__(gtid="0-11-70,7-42-1"))
    assert heldrows.read(zk, ZkPaths().held("shop.fwd")) == {"dst": HELD}  # type: ignore[arg-type]
    answer = ask(definitions(), "set", zk, to=EARLIER.__class__(gtid="0-11-60,7-42-1"))
    assert "after binlog.000002:900 gtid=0-11-50 up to there are skipped" in answer.notes[0]
    with pytest.raises(ConflictError, match=r"holds pipeline shop\.fwd's transactions up to "
                       r"binlog\.000002:900 gtid=0-11-50;"):
        ask(definitions(), "set", zk, to=EARLIER)


def test_a_start_edited_earlier_after_a_reset_is_refused_at_the_channels_start(moved) -> None:
    """After a reset to start: latest, a start: edited to a place before where the target
    was would load it again: the channel's start is refused naming the set that replays;
    a reset that replayed to that start: (asked) keeps it, and the start goes through."""
    zk, earlier = Zk(), "{file: binlog.000001, pos: 4}"
    ask(definitions("latest"), "reset", zk)
    edited = Catalog(definitions(earlier)).definitions.channels[0]
    with pytest.raises(ConflictError, match=r"setl position set shop/fwd --file binlog\.000001 "
                       r"--pos 4 --replay"):
        heldrows.refuse_earlier(zk, ZkPaths(), edited)  # type: ignore[arg-type]
    heldrows.refuse_earlier(zk, ZkPaths(), Catalog(definitions(  # type: ignore[arg-type]
        "{file: binlog.000002, pos: 900}")).definitions.channels[0])
    moved["dst"] = HELD
    zk = Zk()
    ask(definitions(earlier), "reset", zk, replay=True, keyless_duplicates=True)
    heldrows.refuse_earlier(zk, ZkPaths(), edited)  # type: ignore[arg-type]
