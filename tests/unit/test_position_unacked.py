"""manager.positions: a subscription that paused with batches its reader had not
acknowledged (``pipelines/{pid}/unacked``) refuses a move past them without --replay, until
its acknowledged position reaches their end, whatever state its last run published; a move
back to before them is no skip."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from manager import positions as manager_positions
from shared import acks
from shared.errors import ConflictError
from shared.model import BinlogPosition
from shared.zk import ZkPaths
from tests.unit.test_position_replays import Zk


def at(pos: int, seq: int) -> BinlogPosition:
    return BinlogPosition("binlog.000001", pos, f"0-11-{seq}", "11@h1:3306")


ACKED, UNTIL, PAST = at(4000, 14), at(4500, 16), at(4700, 17)  # row 1; 2 and 3; TRUNCATE


def guard(marker: acks.Unacked | None) -> Any:
    zk, paths = Zk(), ZkPaths()
    if marker is not None:
        acks.write_unacked(zk, paths.unacked("shop.fwd"), marker)  # type: ignore[arg-type]
    catalog = SimpleNamespace(source=lambda name: SimpleNamespace(type="subscription"))
    handler = manager_positions.Positions(zk, paths, catalog)  # type: ignore[arg-type]
    channel = SimpleNamespace(name="shop", pipeline_id=lambda p: "shop.fwd")
    pipeline = SimpleNamespace(name="fwd")

    def check(row: BinlogPosition | None, position: BinlogPosition) -> None:
        handler._unacked_skip(channel, pipeline,  # type: ignore[arg-type]
                              {"sub": (row, 3, 1) if row else None}, position)
    return check


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
    import threading

    from node.target.subscription.loader import SubscriptionLoader
    from node.target.subscription.outbox import Outbox
    from tests.unit.test_subscription import parcel
    from tests.unit.test_subscription_pause import handed

    zk = Zk()
    loader = object.__new__(SubscriptionLoader)
    loader.pipeline_id, loader.name, loader.unacked_path = "feed.forward", "feed-s", "/u"
    loader.dropped = []
    loader.store = SimpleNamespace(client=zk)  # type: ignore[assignment]
    loader.outbox = Outbox("feed.forward", 5, lambda p: None)
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
    import threading

    from node.changes import Batch
    from node.target.subscription.loader import SubscriptionLoader
    from node.target.subscription.outbox import Outbox

    zk = Zk()
    loader = object.__new__(SubscriptionLoader)
    loader.pipeline_id, loader.name, loader.unacked_path = "feed.forward", "feed-s", "/u"
    loader.dropped, loader.run = [], "r"
    loader.store = SimpleNamespace(client=zk, epoch=1)  # type: ignore[assignment]
    loader.outbox = Outbox("feed.forward", 5, lambda p: None)
    loader.outbox.acked_end = ACKED
    loader.stop = threading.Event()
    loader.stop.set()
    loader.load_units(Batch("feed.forward", 2, start=ACKED, _end=UNTIL), [])
    note, left = loader.drain(loader.stop, lambda: True, "feed", lambda text, n: None)
    assert left == 1 and "has not acknowledged 1 batch(es)" in note
    assert acks.read_unacked(zk, "/u") == acks.Unacked(ACKED, UNTIL, 1)  # type: ignore[arg-type]


def test_a_drain_whose_batches_were_all_acknowledged_removes_the_record() -> None:
    """The record is written before the wait; once every batch is acknowledged it would only
    refuse later moves (with positions it cannot compare: after a switch) — it goes."""
    import threading

    from node.target.subscription.loader import SubscriptionLoader
    from node.target.subscription.outbox import Outbox
    from tests.unit.test_subscription_pause import handed

    zk = Zk()
    loader = object.__new__(SubscriptionLoader)
    loader.pipeline_id, loader.name, loader.unacked_path = "feed.forward", "feed-s", "/u"
    loader.dropped = []
    loader.store = SimpleNamespace(client=zk)  # type: ignore[assignment]
    loader.outbox = Outbox("feed.forward", 5, lambda p: None)
    reader = handed(loader.outbox, 2, 3)
    found: list[Any] = []
    drain = threading.Thread(target=lambda: found.append(loader.drain(
        threading.Event(), lambda: True, "feed", lambda text, n: None)))
    drain.start()
    deadline = threading.Event()
    while acks.read_unacked(zk, "/u") is None and not deadline.wait(0.01):  # type: ignore[arg-type]
        pass  # (written before the wait)
    loader.outbox.ack(reader, 3)
    drain.join(5)
    assert found and found[0][1] == 0 and "acknowledged every batch" in found[0][0]
    assert acks.read_unacked(zk, "/u") is None  # type: ignore[arg-type]
