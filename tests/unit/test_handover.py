"""A source table's target handed from a pipeline that has run to a new one by ``setl apply``
(a pipeline renamed, a table moved into another channel): refused while either channel runs
(the stretch between the two would be loaded by neither, or by both), said with the position
to start from when both are stopped."""

from __future__ import annotations

from typing import Any

import pytest

from manager import handover
from shared.confinement import current
from shared.definitions import load_text
from shared.model import BinlogPosition, Channel, ChannelStatus

TABLES = {("shop", "orders"): ("id",), ("shop", "items"): ("id",), ("shop", "logs"): None}


def channels(*specs: tuple[str, str, list[str]]) -> dict[str, Channel]:
    """Channels of one pipeline each: (channel, pipeline, source tables to shop.*)."""
    lines = ["sources:", "  - {name: s, host: h1}", "  - {name: t, host: h2}", "channels:"]
    for name, pipeline, tables in specs:
        lines += [f"  - name: {name}", "    pipelines:", f"      - name: {pipeline}",
                  "        source: s", "        target: t", "        pairs:",
                  *(f"          - {{source: shop.{table}, target: shop.{table}}}"
                    for table in tables)]
    found = load_text("\n".join(lines) + "\n", "c.yaml", {}, current()).channels
    return {channel.name: channel for channel in found}


@pytest.fixture(autouse=True)
def tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handover.tablekeys, "read_keys", lambda source: TABLES)


def handed(before: dict[str, Channel], after: dict[str, Channel], ran: set[str],
           running: set[str]) -> handover.Handovers:
    def status(name: str) -> ChannelStatus:
        return ChannelStatus.START if name in running else ChannelStatus.STOP

    def stopped_at(pipeline_id: str) -> BinlogPosition | None:
        return BinlogPosition("binlog.000007", 4411, "0-1-93") if pipeline_id in ran else None

    source: Any = lambda name: name  # noqa: E731 (read_keys is patched)
    return handover.handovers(before, after.values(), ran.__contains__, status, source,
                              stopped_at)


def test_a_pipeline_renamed_while_its_channel_runs_is_refused() -> None:
    before = channels(("shop", "forward", ["orders", "items"]))
    after = channels(("shop", "ahead", ["orders", "items"]))
    found = handed(before, after, {"shop.forward"}, {"shop"})
    assert found.notes == []
    [refusal] = found.refused
    assert refusal.startswith(
        "pipeline shop.ahead would take over from pipeline shop.forward, which has run, what "
        "it wrote (shop.items → t:shop.items, shop.orders → t:shop.orders), while channel "
        "shop runs:")
    assert "setl channel stop shop --wait" in refusal


def test_with_both_channels_stopped_the_note_says_where_to_start_the_new_pipeline() -> None:
    before = channels(("shop", "forward", ["orders", "items"]))
    after = channels(("shop", "forward", ["items"]), ("archive", "forward", ["orders"]))
    found = handed(before, after, {"shop.forward"}, set())
    assert found.refused == []
    assert found.notes == [
        "pipeline archive.forward takes over from pipeline shop.forward what it wrote "
        "(shop.orders → t:shop.orders) and starts at its start:, not where shop.forward "
        "stopped: it stopped at binlog.000007:4411 gtid=0-1-93; before starting channel "
        "archive: setl position set archive/forward --file binlog.000007 --pos 4411 (or copy "
        "the tables again: setl snapshot)"]
    # the table moved into a channel that runs while the giver is stopped: refused too
    [refusal] = handed(before, after, {"shop.forward"}, {"archive"}).refused
    assert "while channel archive runs" in refusal


def test_what_hands_nothing_over_is_let_through() -> None:
    before = channels(("shop", "forward", ["orders"]))
    # a new pipeline of tables nobody wrote; the old one keeps its own
    assert handed(before, channels(("shop", "forward", ["orders"]), ("more", "forward",
                                                                      ["items"])),
                  {"shop.forward"}, {"shop"}) == handover.Handovers([], [])
    # renamed before it ever ran: nothing loaded, nothing to hand over
    assert handed(before, channels(("shop", "ahead", ["orders"])), set(), {"shop"}) == \
        handover.Handovers([], [])
    # a channel not changed by this apply
    assert handed(before, before, {"shop.forward"}, {"shop"}) == handover.Handovers([], [])


def defined(*specs: tuple[str, str, str, list[tuple[str, str]]]) -> dict[str, Channel]:
    """Channels of one pipeline each: (channel, pipeline, source, [(source table, target
    table)]), every target on t."""
    lines = ["sources:", "  - {name: s, host: h1}", "  - {name: s2, host: h3}",
             "  - {name: t, host: h2}", "channels:"]
    for name, pipeline, source, pairs in specs:
        lines += [f"  - name: {name}", "    pipelines:", f"      - name: {pipeline}",
                  f"        source: {source}", "        target: t", "        pairs:",
                  *(f"          - {{source: {one}, target: {other}}}" for one, other in pairs)]
    found = load_text("\n".join(lines) + "\n", "c.yaml", {}, current()).channels
    return {channel.name: channel for channel in found}


def items_moved_from_a_to_b() -> tuple[dict[str, Channel], dict[str, Channel]]:
    """Channels a and b before and after shop.items moves from a's pipeline to b's."""
    before = defined(("a", "forward", "s", [("shop.orders", "c.orders"),
                                            ("shop.items", "c.items")]),
                     ("b", "forward", "s", [("shop.logs", "c.logs")]))
    after = defined(("a", "forward", "s", [("shop.orders", "c.orders")]),
                    ("b", "forward", "s", [("shop.logs", "c.logs"), ("shop.items", "c.items")]))
    return before, after


def test_a_table_moved_between_two_channels_that_have_run_is_refused_while_either_runs() -> None:
    before, after = items_moved_from_a_to_b()
    found = handed(before, after, {"a.forward", "b.forward"}, {"a", "b"})
    assert found.notes == []
    [refusal] = found.refused
    assert refusal.startswith(
        "pipeline b.forward, which has run, would take over from pipeline a.forward, which "
        "has run, what it wrote (shop.items → t:c.items), while channel a and b runs: "
        "b.forward goes on from its own position, not where a.forward stopped")
    assert "setl channel stop a --wait and setl channel stop b --wait" in refusal
    assert "setl snapshot b --pipeline forward --table shop.items" in refusal
    # only the giver runs: refused as well
    assert len(handed(before, after, {"a.forward", "b.forward"}, {"a"}).refused) == 1


def test_a_table_moved_between_two_stopped_channels_that_have_run_says_to_copy_it() -> None:
    before, after = items_moved_from_a_to_b()
    found = handed(before, after, {"a.forward", "b.forward"}, set())
    assert found.refused == []
    [note] = found.notes
    assert note.startswith(
        "pipeline b.forward, which has run, takes over from pipeline a.forward what it wrote "
        "(shop.items → t:c.items) and goes on from its own position (binlog.000007:4411 "
        "gtid=0-1-93), not where a.forward stopped")
    assert "setl snapshot b --pipeline forward --table shop.items" in note
    assert "setl verify b" in note


def test_a_channel_renamed_is_refused_while_the_old_one_runs() -> None:
    before = defined(("shop", "forward", "s", [("shop.orders", "shop.orders")]))
    after = defined(("store", "forward", "s", [("shop.orders", "shop.orders")]))
    for ran in ({"shop.forward"}, set()):  # run or not, the old channel is a second writer
        [refusal] = handed(before, after, ran, {"shop"}).refused
        assert refusal.startswith(
            "pipeline shop.forward and pipeline store.forward both take from source s "
            "shop.orders → t:shop.orders: two writers of one table")
        assert "while channel shop is not stopped (paused or running)" in refusal
        assert "setl channel stop shop --wait" in refusal and "setl channel delete" in refusal
    found = handed(before, after, {"shop.forward"}, set())
    assert found.refused == []
    [note] = found.notes
    assert note.startswith("pipeline shop.forward and pipeline store.forward both take from "
                           "source s shop.orders → t:shop.orders: start only one of channels "
                           "shop and store")


def test_a_share_stored_before_is_said_not_refused_at_an_unrelated_edit() -> None:
    """Two channels an older setl let write one table: an edit of either waited for it."""
    before = defined(("x", "forward", "s", [("shop.orders", "c.orders")]),
                     ("y", "forward", "s", [("shop.orders", "c.orders")]))
    after = defined(("x", "forward", "s", [("shop.orders", "c.orders"),
                                           ("shop.items", "c.items")]))
    found = handed(before, {**before, **after}, {"x.forward", "y.forward"}, {"x", "y"})
    assert found.refused == []
    assert any(note.startswith("pipeline x.forward and pipeline y.forward both take")
               for note in found.notes), found.notes
    more = defined(("x", "forward", "s", [("shop.orders", "c.orders"),
                                          ("shop.logs", "c.logs")]),
                   ("y", "forward", "s", [("shop.orders", "c.orders"),
                                          ("shop.logs", "c.logs")]))
    [refusal] = handed(before, more, {"x.forward", "y.forward"}, {"x", "y"}).refused
    assert "shop.logs → t:c.logs" in refusal  # a share this apply makes: refused


def test_one_target_written_from_different_source_tables_or_sources_is_let_through() -> None:
    before = defined(("a", "forward", "s", [("shop.orders", "all.rows")]))
    assert handed(before, {**before, **defined(
        ("b", "forward", "s", [("shop.items", "all.rows")]))}, {"a.forward"}, {"a"}) == \
        handover.Handovers([], [])
    # shards gathered from several servers: the same table name, another source
    assert handed(before, {**before, **defined(
        ("b", "forward", "s2", [("shop.orders", "all.rows")]))}, {"a.forward"}, {"a"}) == \
        handover.Handovers([], [])


def test_a_channel_is_not_started_beside_a_running_one_writing_the_same_table() -> None:
    mine = defined(("b", "forward", "s", [("shop.orders", "c.orders")]))["b"]
    same = defined(("a", "forward", "s", [("shop.orders", "c.orders"),
                                          ("shop.items", "c.items")]))["a"]
    other_table = defined(("a", "forward", "s", [("shop.items", "c.orders")]))["a"]
    other_source = defined(("a", "forward", "s2", [("shop.orders", "c.orders")]))["a"]
    source: Any = lambda name: name  # noqa: E731 (read_keys is patched)
    assert handover.writers_besides(mine, [same], source) == ({"a": [
        "pipeline a.forward and pipeline b.forward would both take from source s shop.orders "
        "→ t:c.orders"]}, [])
    assert handover.writers_besides(mine, [other_table, other_source], source) == ({}, [])
