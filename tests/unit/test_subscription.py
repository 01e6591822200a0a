"""A subscription's worker side (changes → typed protobuf transactions), its outbox (window,
cumulative acks, rollback, a reader taking over) and the definitions that make one."""

from __future__ import annotations

import datetime
import decimal
import pickle
import queue
import threading
from types import SimpleNamespace

import pytest

from manager.subscribejson import transaction, value
from manager.subscriber import Subscriber
from node.changes import ChangeType, TargetChange
from node.extract.etl import CompiledPipeline
from node.jobs import ROW_BITS, JobSpec
from node.target.delta.columns import LakeColumn, TextColumn, of_spec, of_text
from node.target.delta.tables import LakeFacts
from node.target.subscription import units
from node.target.subscription.outbox import Outbox, Parcel, Refused, TakenOver
from shared.definitions import load_text
from shared.errors import PAUSE_AT_ONCE, ConfigError
from shared.model import BinlogPosition
from shared.rpc import subscription_pb2
from shared.textcodecs import Encoded
from tests.unit.test_etl import pipeline

T = ("feed", "s", "t")
COLUMNS = (LakeColumn("id", "int32"), LakeColumn("ub", "uint64"),
           LakeColumn("d", "decimal_text", 65, 30), LakeColumn("tm", "time", 0, 3),
           LakeColumn("zd", "date"), LakeColumn("ts", "timestamp"),
           LakeColumn("bn", "binary_fixed", 4), LakeColumn("st", "string"),
           LakeColumn("f", "float32"))
SPEC = JobSpec(7, False, {T: LakeFacts(COLUMNS, ("id",), "changelog")}, target="subscription",
               transactions=((0, "bin.000001:100", "0-1-5", 1_700_000_000_000),
                             (2, "bin.000001:200", "0-1-6", 1_700_000_001_000)))
ROW = {"id": 1, "ub": 18446744073709551615,
       "d": decimal.Decimal("-1234567890123456789012345678901234.123456789012345678901234567890"),
       "tm": datetime.timedelta(hours=-838, minutes=-59, seconds=-58, microseconds=-500000),
       "zd": "0000-00-00", "ts": datetime.datetime(2038, 1, 19, 3, 14, 7),
       "bn": b"\x01\x02", "st": {"c", "a"}, "f": 1.5}


def change(kind: ChangeType, place: int, row: int, after: dict | None,
           before: dict | None = None) -> TargetChange:
    return TargetChange(*T, kind, ("id",), (1,) if kind is not ChangeType.INSERT else None,
                        after, seq=place << ROW_BITS | row, before=before)


def test_changes_become_whole_transactions_with_values_as_the_source_holds_them() -> None:
    changes = [change(ChangeType.DELETE, 2, 0, None, ROW),
               change(ChangeType.UPDATE, 1, 0, {**ROW, "ub": 0}, ROW),
               change(ChangeType.INSERT, 0, 0, ROW)]
    [unit] = units.render(changes, SPEC)
    batch = subscription_pb2.ChangeBatch.FromString(unit.data)
    assert [(txn.id, [c.op for c in txn.changes]) for txn in batch.transactions] == [
        ("bin.000001:100", ["I", "U"]), ("bin.000001:200", ["D"])]
    first = batch.transactions[0]
    assert (first.position.file, first.position.pos, first.position.gtid,
            first.commit_ts_ms) == ("bin.000001", 100, "0-1-5", 1_700_000_000_000)
    assert [c.index for c in first.changes] == [0, 1]
    found = transaction(first)["changes"]
    assert found[0]["after"] == {
        "id": 1, "ub": 18446744073709551615,
        "d": "-1234567890123456789012345678901234.123456789012345678901234567890",
        "tm": "-838:59:58.500", "zd": "0000-00-00", "ts": "2038-01-19 03:14:07",
        "bn": "01020000", "st": "a,c", "f": 1.5}
    assert found[1]["before"]["ub"] == 18446744073709551615 and found[1]["after"]["ub"] == 0
    assert transaction(batch.transactions[1])["changes"][0]["before"]["id"] == 1


@pytest.mark.parametrize(("kind", "fsp", "held", "shown"), [
    ("datetime", 3, datetime.datetime(2024, 1, 2, 10, 0, 0, 120000), "2024-01-02 10:00:00.120"),
    ("datetime", 6, datetime.datetime(2024, 1, 2, 10, 0, 0), "2024-01-02 10:00:00.000000"),
    ("datetime", 0, datetime.datetime(2024, 1, 2, 10, 0, 0), "2024-01-02 10:00:00"),
    ("timestamp", 6, "0000-00-00 00:00:00", "0000-00-00 00:00:00.000000"),
    ("timestamp", 2, datetime.datetime(1970, 1, 1, 0, 0, 1, 990000), "1970-01-01 00:00:01.99"),
    ("datetime", 3, "0000-00-00 00:00:00.000", "0000-00-00 00:00:00.000"),
    ("datetime", 1, "2024-00-00 00:00:00", "2024-00-00 00:00:00.0")])
def test_a_moment_is_shown_with_its_columns_fractional_digits(
        kind: str, fsp: int, held: object, shown: str) -> None:
    """As the source shows it: DATETIME(6)'s whole second with six zeros, DATETIME(3) with
    three (Python's isoformat gave none, and six) — a reader keying a cache by the text got
    two keys for one row (a review)."""
    message = subscription_pb2.Value()
    units._setter(LakeColumn("c", kind, 0, fsp))(message, held)
    assert value(message) == shown and message.WhichOneof("kind") == kind


def test_a_value_of_a_column_it_does_not_know_goes_by_its_own_type() -> None:
    message = subscription_pb2.Value()
    units._by_value(message, 1 << 63)
    assert message.WhichOneof("kind") == "uint" and value(message) == 1 << 63
    units._by_value(message, datetime.timedelta(seconds=-1))
    assert value(message) == "-00:00:01"


def test_parts_joined_are_one_batch() -> None:
    """A batch's message is its parts' bytes one after the other behind its own fields."""
    first = units.render([change(ChangeType.INSERT, 0, 0, ROW)], SPEC)[0].data
    second = units.render([change(ChangeType.DELETE, 2, 0, None, ROW)], SPEC)[0].data
    head = subscription_pb2.ChangeBatch(batch_id=7, run="r").SerializeToString()
    joined = subscription_pb2.ChangeBatch.FromString(head + first + second)
    assert joined.batch_id == 7 and [t.id for t in joined.transactions] == [
        "bin.000001:100", "bin.000001:200"]


def parcel(batch_id: int) -> Parcel:
    data = subscription_pb2.ChangeBatch(batch_id=batch_id).SerializeToString()
    return Parcel(batch_id, BinlogPosition("bin.000001", batch_id * 100), data)


def sent(parcel: Parcel | None) -> subscription_pb2.ChangeBatch:
    assert parcel is not None
    return subscription_pb2.ChangeBatch.FromString(parcel.data)


def test_a_look_takes_a_stale_looks_place_but_never_a_readers() -> None:
    """A look connecting again after a network blip finds its old stream still attached
    (gRPC has not seen it end): it takes its place, as a reader takes a reader's."""
    box = Outbox("c.p", 2, lambda p: None)
    stale = box.attach("look", look=True)
    again = box.attach("look", look=True)
    with pytest.raises(TakenOver):
        box.take(stale)
    reader = box.attach("r")  # a reader takes a look's place
    with pytest.raises(TakenOver):
        box.take(again)
    with pytest.raises(Refused, match="a look never takes a reader's place"):
        box.attach("look", look=True)
    assert box.take(reader) is None  # (nothing to send: the reader still reads)


def test_the_outbox_holds_a_window_acks_are_cumulative_and_rollback_sends_again() -> None:
    acked: list[int] = []
    box = Outbox("c.p", 2, lambda p: acked.append(p.batch_id))
    stop = threading.Event()
    assert box.put(parcel(1), stop) and box.put(parcel(2), stop)
    third = threading.Thread(target=box.put, args=(parcel(3), stop))
    third.start()
    third.join(0.3)
    assert third.is_alive()  # the window is full: Load waits for the reader
    reader = box.attach("r")
    first = [sent(box.take(reader)) for _ in range(2)]
    assert [(b.batch_id, b.stream, b.generation) for b in first] == [(1, reader, 0),
                                                                      (2, reader, 0)]
    box.rollback(reader)
    again = sent(box.take(reader))
    assert (again.batch_id, again.generation) == (1, 1)
    with pytest.raises(ValueError, match="not sent on this stream since its last rollback"):
        box.ack(reader, 2, 1)  # its copy of generation 0 was sent, this one not yet
    box.ack(reader, 2, 0)  # sent before the rollback (an ack in flight): ignored
    assert acked == [] and box.acked_end is None  # handed over is not where it is
    box.ack(reader, 1, 1)
    assert acked == [1] and sent(box.take(reader)).batch_id == 2
    assert box.acked_end == parcel(1).end
    box.ack(reader, 2, 1)
    box.ack(reader, 1, 1)  # acknowledged already: nothing new
    assert acked == [1, 2] and box.acked_end == parcel(2).end
    third.join(5)
    assert not third.is_alive() and sent(box.take(reader)).batch_id == 3
    newer = box.attach("r2")  # a reader taking over gets what is not acknowledged
    with pytest.raises(TakenOver, match="reader r2 took this subscription over at 20"):
        box.take(reader)
    assert sent(box.take(newer)).batch_id == 3
    box.close("stopped")
    assert not box.put(parcel(4), stop)


def test_before_images_reach_the_spark_workers() -> None:
    """A subscription's (and a change log's) before images are kept in the workers too."""
    compiled = CompiledPipeline.compile("shop.fwd", 1, pipeline("{source: a.t, target: a.t}"),
                                        before_images=True)
    assert pickle.loads(pickle.dumps(compiled)).before_images


def test_a_subscription_is_a_target_only() -> None:
    text = ("sources:\n  - {name: src, host: h}\n  - {name: feed, type: subscription}\n"
            "channels:\n  - name: c\n    pipelines:\n      - name: p\n        source: feed\n"
            "        target: src\n        pairs: [{source: a.t, target: a.t}]\n")
    with pytest.raises(ConfigError, match="is a subscription, which a pipeline can only "
                       "write"):
        load_text(text, "f.yaml")
    made = load_text(text.replace("source: feed\n        target: src",
                                  "source: src\n        target: feed"), "f.yaml")
    assert [s.type for s in made.sources] == ["mysql", "subscription"]


def test_a_subscription_takes_no_snapshot_and_no_dry_run() -> None:
    text = ("sources:\n  - {name: src, host: h}\n  - {name: feed, type: subscription}\n"
            "channels:\n  - name: c\n    pipelines:\n      - name: p\n        source: src\n"
            "        target: feed\n        start: snapshot\n        dry_run: true\n"
            "        pairs: [{source: a.t, target: a.t}]\n")
    with pytest.raises(ConfigError) as found:
        load_text(text, "f.yaml")
    assert "f.yaml:10: channels[0].pipelines[0].start: target feed is a subscription" in \
        str(found.value)
    assert "dry_run: target feed is a subscription" in str(found.value)


def test_a_subscription_takes_no_free_door() -> None:
    """A subscription's reader gets the binlog's changes only: a central free door's
    requests (read rows) paused it, the error naming retl_pending, where they never were."""
    text = ("sources:\n  - {name: src, host: h}\n  - {name: feed, type: subscription}\n"
            "channels:\n  - name: c\n    pipelines:\n      - name: p\n        source: src\n"
            "        target: feed\n        free_door: {source: src}\n"
            "        pairs: [{source: a.t, target: a.t}]\n")
    with pytest.raises(ConfigError) as found:
        load_text(text, "f.yaml")
    assert "f.yaml:10: channels[0].pipelines[0].free_door: target feed is a subscription" in \
        str(found.value) and "leave free_door out" in str(found.value)
    assert load_text(text.replace("        free_door: {source: src}\n", ""), "f.yaml")


def test_the_client_acks_only_batches_of_the_stream_it_reads() -> None:
    """After a failover the next owner numbers its batches from the acknowledged one again:
    a batch of the old owner's stream is not acknowledged by its id on the new one."""
    feed = Subscriber("c")
    feed._requests, feed._received, feed._epoch = queue.Queue(), [3, 4], 7
    feed.ack(subscription_pb2.ChangeBatch(batch_id=3, epoch=6))  # the old owner's batch 3
    assert feed._requests.empty()
    feed.ack(subscription_pb2.ChangeBatch(batch_id=3, epoch=7))
    assert feed._requests.get_nowait().ack.batch_id == 3 and feed._received == [4]


def test_values_python_cannot_read_as_text_go_exact() -> None:
    """A text column's bytes (a charset Python has no exact codec for: dec8's 0xC3 0xA9 are
    two characters, not UTF-8's é) go as the source's bytes; a transform's dict as JSON, not
    Python's repr; a float set into a DECIMAL column as digits, never an exponent."""
    message = subscription_pb2.Value()
    units._text(message, b"\xc3\xa9")
    assert message.WhichOneof("kind") == "binary" and message.binary == b"\xc3\xa9"
    units._text(message, b"\x82\xa0")  # sjis' あ: not UTF-8 at all
    assert message.binary == b"\x82\xa0"
    units._by_value(message, {"a": [1, "é"]})
    assert message.WhichOneof("kind") == "text" and message.text == '{"a":[1,"é"]}'
    units._decimal(message, 1e-05)
    assert message.decimal == "0.00001"


def test_a_value_that_does_not_fit_its_column_pauses_at_once() -> None:
    """A processor's 'abc' for an INT column raised LoadError, which is retried: each
    attempt handed the batches before it over again, and the channel never paused."""
    bad = change(ChangeType.INSERT, 0, 0, {**ROW, "id": "abc"})
    with pytest.raises(PAUSE_AT_ONCE, match=r"column id: value 'abc' does not fit"):
        units.render([bad], SPEC)


def test_a_transforms_set_is_served_in_the_columns_definition_order() -> None:
    """A processor's set for a SET column was served sorted alphabetically, not in the
    column's definition order (as the source gives a SET); a set of Encoded members (a
    charset kept as bytes) failed with TypeError."""
    spec = SimpleNamespace(type=248, set_values=(b"small", b"large", b"it's"),
                           charset="utf8mb4")
    column = of_spec(spec, "size")
    assert column.members == ("small", "large", "it's")
    assert of_text(TextColumn("size", "set", "set('small','large','it''s')", "utf8mb4"),
                   "size") == column
    facts = LakeFacts((LakeColumn("id", "int32"), column), ("id",), "changelog")
    typed = units._setters(facts)
    message = subscription_pb2.Value()
    typed["size"](message, {"it's", "large", "small"})
    assert message.text == "small,large,it's"
    typed["size"](message, {"large", "zz", "aa"})  # members it lacks: after, sorted
    assert message.text == "large,aa,zz"
    kept = of_spec(SimpleNamespace(type=248, set_values=(b"\x82\xa0", b"\x82\xa2"),
                                   charset="sjis"), "kana")
    assert kept.members == (Encoded(b"\x82\xa0", "sjis"), Encoded(b"\x82\xa2", "sjis"))
    setter = units._setters(LakeFacts((kept,)))["kana"]
    setter(message, {Encoded(b"\x82\xa2", "sjis"), Encoded(b"\x82\xa0", "sjis")})
    # as the source's own values of such a SET: its bytes, in definition order
    assert message.WhichOneof("kind") == "binary" and message.binary == b"\x82\xa0,\x82\xa2"
    units._by_value(message, {Encoded(b"\x82\xa0", "sjis"), "b"})  # mixed: text, decoded
    assert message.text == "b,あ"


def test_text_served_as_its_bytes_names_its_charset() -> None:
    """Text of a charset Python has no exact codec for (sjis, …) came as ``binary`` with no
    charset: a reader had to look up the column on the source to decode it."""
    facts = LakeFacts((LakeColumn("id", "int32"), LakeColumn("name", "string"),
                       LakeColumn("blob", "binary"),
                       LakeColumn("kana", "string", members=(Encoded(b"\x82\xa0", "sjis"),
                                                             Encoded(b"\x82\xa2", "sjis")))),
                      ("id",), "changelog")
    spec = JobSpec(7, False, {T: facts}, target="subscription",
                   transactions=((0, "bin.000001:100", "0-1-5", 1_700_000_000_000),))
    kana = {Encoded(b"\x82\xa2", "sjis"), Encoded(b"\x82\xa0", "sjis")}  # a processor's
    row = {"id": 1, "name": Encoded(b"\x82\xa0", "sjis"), "blob": b"\x82\xa0", "kana": kana}
    (unit,) = units.render([change(ChangeType.INSERT, 0, 0, row)], spec)
    batch = subscription_pb2.ChangeBatch.FromString(unit.data)
    fields = {field.name: field for field in batch.transactions[0].changes[0].after}
    assert fields["name"].value.binary == b"\x82\xa0" and fields["name"].charset == "sjis"
    assert fields["blob"].value.binary == b"\x82\xa0" and fields["blob"].charset == ""
    assert fields["id"].charset == ""
    assert fields["kana"].value.binary == b"\x82\xa0,\x82\xa2" and fields["kana"].charset == "sjis"
    printed = transaction(batch.transactions[0])
    assert printed["changes"][0]["after"]["name"] == "82A0"
    assert printed["changes"][0]["charsets"] == {"name": "sjis", "kana": "sjis"}
