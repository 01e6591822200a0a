"""manager.positions: a subscription that paused with batches its reader had not
acknowledged (``pipelines/{pid}/unacked``) refuses a move past them without --replay, until
its acknowledged position reaches their end, whatever state its last run published; a move
back to before them is no skip."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from manager import positions as manager_positions
from node.changes import Batch
from node.target.subscription.loader import SubscriptionLoader
from node.target.subscription.outbox import Outbox
from shared import acks, tablekeys
from shared.errors import ConflictError
from shared.model import BinlogPosition, StartupMode
from shared.rpc import manager_pb2
from shared.zk import ZkPaths
from tests.unit.test_position_replays import Zk
from tests.unit.test_subscription import parcel
from tests.unit.test_subscription_pause import handed


def at(pos: int, seq: int) -> BinlogPosition:
    return BinlogPosition("binlog.000001", pos, f"0-11-{seq}", "11@h1:3306")


ACKED, UNTIL, PAST = at(4000, 14), at(4500, 16), at(4700, 17)  # row 1; 2 and 3; TRUNCATE


@pytest.fixture(autouse=True)
def no_keyless_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The source's tables all have keys (a refusal that advises a replay asks)."""
    monkeypatch.setattr(tablekeys, "read_keys", lambda source: {})


def guard(marker: acks.Unacked | None, strict: bool = True) -> Any:
    zk, paths = Zk(), ZkPaths()
    if marker is not None:
        acks.write_unacked(zk, paths.unacked("shop.fwd"), marker)  # type: ignore[arg-type]
    catalog = SimpleNamespace(source=lambda name: SimpleNamespace(type="subscription"))
    handler = manager_positions.Positions(zk, paths, catalog)  # type: ignore[arg-type]
    channel = SimpleNamespace(name="shop", pipeline_id=lambda p: "shop.fwd")
    pipeline = SimpleNamespace(name="fwd", source="src", pairs=[])

    def check(row: BinlogPosition | None, position: BinlogPosition) -> None:
        handler._unacked_skip(channel, pipeline,  # type: ignore[arg-type]
                              {"sub": (row, 3, 1) if row else None}, position, strict)
    return check


def loader_on(zk: Zk) -> SubscriptionLoader:
    """A subscription's loader with its outbox and a ZooKeeper, nothing else."""
    loader = object.__new__(SubscriptionLoader)
    loader.pipeline_id, loader.name, loader.unacked_path = "feed.forward", "feed-s", "/u"
    loader.dropped, loader.run = [], "r"
    loader.store = SimpleNamespace(client=zk, epoch=1)  # type: ignore[assignment]
    loader.outbox = Outbox("feed.forward", 5, lambda p: None)
    return loader


def test_a_move_past_the_unacknowledged_batches_is_refused_whatever_was_published() -> None:
    with pytest.raises(ConflictError) as refused:
        guard(acks.Unacked(ACKED, UNTIL, 2))(ACKED, PAST)
    assert "not acknowledged 2 batch(es)" in str(refused.value)
    assert "setl position reset shop/fwd" in str(refused.value)
    assert "setl channel start shop" in str(refused.value)


def test_a_move_by_gtid_past_them_is_refused_as_one_by_file() -> None:
    """A GTID past the failed statement was refused first as a replay ("add --replay"),
    which then skipped them (a review): the guard compares a GTID by its state."""
    check = guard(acks.Unacked(ACKED, UNTIL, 2))
    with pytest.raises(ConflictError, match="not acknowledged 2 batch"):
        check(ACKED, BinlogPosition(gtid="0-11-17"))
    check(ACKED, BinlogPosition(gtid="0-11-14"))  # where it stands: nothing skipped


def test_once_the_reader_acknowledged_them_or_with_no_record_the_move_is_free() -> None:
    guard(acks.Unacked(ACKED, UNTIL, 2))(UNTIL, PAST)
    guard(acks.Unacked(ACKED, UNTIL, 2))(PAST, at(4800, 18))
    guard(None)(ACKED, PAST)


def test_a_move_to_where_it_stands_skips_nothing() -> None:
    guard(acks.Unacked(ACKED, UNTIL, 2))(ACKED, ACKED)


def test_with_nothing_acknowledged_a_move_back_before_them_is_free_and_past_them_refused(
        ) -> None:
    check = guard(acks.Unacked(ACKED, UNTIL, 2))
    check(None, at(3000, 10))
    check(None, ACKED)
    with pytest.raises(ConflictError) as refused:
        check(None, PAST)
    assert "nothing acknowledged yet" in str(refused.value)


def test_the_record_reads_back_as_written() -> None:
    marker = acks.Unacked(ACKED, UNTIL, 2)
    assert acks.Unacked.from_json(marker.to_json()) == marker
    zk = Zk()
    acks.clear_unacked(zk, "/x")  # type: ignore[arg-type]  # (none: nothing to do)


def test_a_drain_records_what_is_handed_over_before_it_waits() -> None:
    zk = Zk()
    loader = loader_on(zk)
    loader.outbox.acked_end = parcel(1).end
    handed(loader.outbox, 2, 3)
    stop = threading.Event()
    stop.set()  # (stopped during the wait: they stay unacknowledged)
    loader.drain(stop, lambda: True, "feed", lambda text, n: None)
    assert acks.read_unacked(zk, "/u") == acks.Unacked(  # type: ignore[arg-type]
        parcel(1).end, parcel(3).end, 2)


def test_batches_a_stop_kept_from_the_reader_count_as_unacknowledged() -> None:
    """A stop while Load hands a batch over drops it (the next start sends it); a pause
    right after (the next batch failed) is then not right after the acknowledged position:
    the drain says so and records it, as for batches handed over and unacknowledged."""
    zk = Zk()
    loader = loader_on(zk)
    loader.outbox.acked_end = ACKED
    loader.stop = threading.Event()
    loader.stop.set()
    loader.load_units(Batch("feed.forward", 2, start=ACKED, _end=UNTIL), [])
    note, left = loader.drain(loader.stop, lambda: True, "feed", lambda text, n: None)
    assert left == 1 and "has not acknowledged 1 batch(es)" in note
    assert acks.read_unacked(zk, "/u") == acks.Unacked(ACKED, UNTIL, 1)  # type: ignore[arg-type]


def _drained(zk: Zk, meanwhile: Any = None) -> list[Any]:
    """A drain of batches 2 and 3, both acknowledged once it wrote its record (and after
    ``meanwhile()``): what it answered."""
    loader = loader_on(zk)
    reader = handed(loader.outbox, 2, 3)
    found: list[Any] = []
    drain = threading.Thread(target=lambda: found.append(loader.drain(
        threading.Event(), lambda: True, "feed", lambda text, n: None)))
    drain.start()
    deadline = threading.Event()
    while acks.read_unacked(zk, "/u") is None and not deadline.wait(0.01):  # type: ignore[arg-type]
        pass  # (written before the wait)
    if meanwhile is not None:
        meanwhile()
    loader.outbox.ack(reader, 3)
    drain.join(5)
    return found


def test_a_drain_whose_batches_were_all_acknowledged_removes_the_record() -> None:
    """The record is written before the wait; once every batch is acknowledged it would only
    refuse later moves (with positions it cannot compare: after a switch) — it goes."""
    zk = Zk()
    found = _drained(zk)
    assert found and found[0][1] == 0 and "acknowledged every batch" in found[0][0]
    assert acks.read_unacked(zk, "/u") is None  # type: ignore[arg-type]


def _setter(monkeypatch: pytest.MonkeyPatch) -> tuple[Zk, ZkPaths, Any]:
    """``Positions._set`` of a stopped subscription acknowledged up to ACKED with the record
    of 2 batches to UNTIL (the source's binlog read from a table of positions)."""
    zk, paths = Zk(), ZkPaths()
    zk.nodes[paths.acked("shop.fwd")] = acks.Acked(ACKED, 3, 1, "r").to_json()
    acks.write_unacked(zk, paths.unacked("shop.fwd"), acks.Unacked(ACKED, UNTIL, 2))  # type: ignore[arg-type]
    end = at(9000, 30)
    monkeypatch.setattr(manager_positions, "_binlog",
                        lambda source: (end, [("binlog.000001", 9000)]))
    known = {at(n, s).pos: at(n, s) for n, s in ((3000, 10), (4000, 14), (4500, 16),
                                                 (4700, 17))}
    monkeypatch.setattr(manager_positions.positions, "position_at",
                        lambda source, file, pos: known[pos])
    catalog = SimpleNamespace(source=lambda name: SimpleNamespace(type="subscription",
                                                                  name=name))
    handler = manager_positions.Positions(zk, paths, catalog)  # type: ignore[arg-type]
    monkeypatch.setattr(handler, "_stopped", lambda channel, pipeline, action: "shop.fwd")
    channel = SimpleNamespace(name="shop", two_way=False, pipeline_id=lambda p: "shop.fwd")
    pipeline = SimpleNamespace(name="fwd", source="src", pairs=[
        SimpleNamespace(target=SimpleNamespace(datasource="sub"))])

    def move(pos: int, replay: bool = False) -> None:
        request = manager_pb2.PositionsRequest(channel="shop", pipeline="fwd", action="set",
                                               replay=replay, keyless_duplicates=replay)
        request.to.file, request.to.pos = "binlog.000001", pos
        handler._set(channel, pipeline, request)
    return zk, paths, move


@pytest.mark.parametrize("back", [4000, 3000])
def test_a_move_back_with_replay_keeps_the_record_until_the_reader_acknowledges_them(
        monkeypatch: pytest.MonkeyPatch, back: int) -> None:
    """A --replay set to where it stands (or before: what `setl subscribe --from` sends)
    deleted the record, and the next move past the failed statement skipped the batches
    (a review): a set sends nothing; the reader's acknowledgements retire the record."""
    zk, paths, move = _setter(monkeypatch)
    move(back, replay=True)
    assert acks.read_unacked(zk, paths.unacked("shop.fwd")) is not None  # type: ignore[arg-type]
    with pytest.raises(ConflictError, match="not acknowledged 2 batch"):
        move(PAST.pos)
    move(ACKED.pos)  # back to where they begin: free
    zk.nodes[paths.acked("shop.fwd")] = acks.Acked(UNTIL, 5, 1, "r").to_json()
    move(PAST.pos)  # acknowledged since: free


def test_a_record_the_acknowledged_position_cannot_be_compared_with_says_so() -> None:
    """After a switch between servers whose GTIDs do not compare (MySQL's sets), the record
    never retires by itself: the refusal says why and the way out."""
    other = BinlogPosition("mysql-bin.000009", 900, "u2:1-500", "22@h2:3306")
    marker = acks.Unacked(BinlogPosition("mysql-bin.000001", 4000, "u1:1-14", "11@h1:3306"),
                          BinlogPosition("mysql-bin.000001", 4500, "u1:1-16", "11@h1:3306"), 2)
    with pytest.raises(ConflictError, match="cannot be compared") as refused:
        guard(marker)(other, BinlogPosition("mysql-bin.000009", 950, "u2:1-501", "22@h2:3306"))
    assert "setl position reset shop/fwd" in str(refused.value)


def test_a_drain_removes_only_the_record_it_wrote() -> None:
    zk = Zk()
    newer = acks.Unacked(parcel(3).end, parcel(7).end, 4)  # another owner's, since
    found = _drained(zk, lambda: acks.write_unacked(zk, "/u", newer))  # type: ignore[arg-type]
    assert found and acks.read_unacked(zk, "/u") == newer  # type: ignore[arg-type]


def test_a_record_the_reader_acknowledged_goes_and_a_move_back_does_not_revive_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Left by a pause whose reader acknowledged everything before the next one (that
    drain waited for nothing), a move back before its end made it refuse again, for batches
    long acknowledged (a review)."""
    zk, paths, move = _setter(monkeypatch)
    zk.nodes[paths.acked("shop.fwd")] = acks.Acked(PAST, 5, 1, "r").to_json()
    move(3000, replay=True)  # retired: deleted, not brought back by the move
    assert acks.read_unacked(zk, paths.unacked("shop.fwd")) is None  # type: ignore[arg-type]
    move(PAST.pos)


def test_a_position_that_cannot_be_compared_is_asked_by_file_and_offset() -> None:
    mysql = BinlogPosition("mysql-bin.000001", 4000, "u1:1-14", "11@h1:3306")
    marker = acks.Unacked(mysql, BinlogPosition("mysql-bin.000001", 4500, "u1:1-16",
                                                "11@h1:3306"), 2)
    with pytest.raises(ConflictError, match="give the position by file and offset"):
        guard(marker)(mysql, BinlogPosition(gtid="u1:1-10"))


def test_a_gtid_of_a_source_without_strict_mode_is_not_ordered_by_its_state() -> None:
    """gtid_strict_mode OFF: a domain's numbers need not grow, so even a GTID at the
    acknowledged position's state may be past the batches: refused, saying why."""
    with pytest.raises(ConflictError, match="gtid_strict_mode is OFF on the source: give "
                       "the position by file and offset"):
        guard(acks.Unacked(ACKED, UNTIL, 2), strict=False)(ACKED,
                                                           BinlogPosition(gtid="0-11-14"))


def test_the_way_to_skip_them_anyway_works_as_the_refusal_says(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """It said "reset (it forgets the acknowledged position), then set"; the reset keeps
    that position (pipelines/{pid}/held), so a set setl cannot compare with it is a replay
    (a review): the refusal names the flags that set needs, and the reset and that set go
    through."""
    old = BinlogPosition("mysql-bin.000001", 4000, "u1:1-14", "11@h1:3306")  # old server
    until = BinlogPosition("mysql-bin.000009", 950, "u2:1-501", "22@h2:3306")
    past = BinlogPosition("mysql-bin.000009", 990, "u2:1-502", "22@h2:3306")
    zk, paths, _ = _setter(monkeypatch)
    zk.nodes[paths.acked("shop.fwd")] = acks.Acked(old, 3, 1, "r").to_json()
    acks.write_unacked(zk, paths.unacked("shop.fwd"), acks.Unacked(old, until, 2))  # type: ignore[arg-type]
    monkeypatch.setattr(manager_positions, "_binlog",
                        lambda source: (past, [("mysql-bin.000009", 9000)]))
    monkeypatch.setattr(manager_positions.positions, "position_at", lambda s, f, p: past)
    monkeypatch.setattr(tablekeys, "read_keys", lambda source: {("shop", "kl"): None})
    catalog = SimpleNamespace(source=lambda name: SimpleNamespace(type="subscription",
                                                                  name=name))
    handler = manager_positions.Positions(zk, paths, catalog)  # type: ignore[arg-type]
    monkeypatch.setattr(handler, "_stopped", lambda channel, pipeline, action: "shop.fwd")
    channel = SimpleNamespace(name="shop", two_way=False, pipeline_id=lambda p: "shop.fwd")
    every = SimpleNamespace(matches_schema=lambda schema: True, specificity=0,
                            matches=lambda table: True)
    pipeline = SimpleNamespace(name="fwd", source="src", pairs=[SimpleNamespace(
        source=SimpleNamespace(namespace=every, table=every), fan_out=False,
        target=SimpleNamespace(datasource="sub"))], params=SimpleNamespace(
            startup=StartupMode.LATEST, start_position=None))

    def move(**flags: bool) -> None:
        request = manager_pb2.PositionsRequest(channel="shop", pipeline="fwd", action="set",
                                               **flags)
        request.to.file, request.to.pos = past.file, past.pos
        handler._set(channel, pipeline, request)  # type: ignore[arg-type]
    with pytest.raises(ConflictError) as refused:
        move()
    said = str(refused.value)
    assert said.endswith("To skip them anyway: setl position reset shop/fwd (it deletes this "
                         "record; it keeps the acknowledged position), then this set again "
                         "with --replay --keyless-duplicates (it takes keyless tables: "
                         "shop.kl)"), said
    handler._reset(channel, pipeline)  # type: ignore[arg-type]
    move(replay=True, keyless_duplicates=True)
    assert acks.read(zk, paths.acked("shop.fwd"))[0].position == past  # type: ignore[arg-type,index]
