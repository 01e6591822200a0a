"""The free door's request parsing and PK_DATA encoding, without servers."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from node.changes import ChangeType, RowChange
from node.extract.freedoor import DoorStats, as_change, is_request, parse
from node.extract.reads import loose
from node.selectloop import RunnerSelect
from node.snapshot.door import DoorQueue, refusal
from shared.errors import FreeDoorRequestError
from shared.model import DataSource
from shared.retl import decode_key, encode_key
from tests.unit.test_etl import compiled


def buffer_row(**values: object) -> RowChange:
    row = {"ID": 7, "FULL_NAME": "shop.orders", "TYPE": "I", "PK_DATA": "[1]",
           "CHANNEL_ID": None, "PIPELINE_ID": None, **values}
    return RowChange("retl", "retl_buffer", ChangeType.INSERT, ("ID",), None, row)


def test_keys_of_every_kind_round_trip_through_pk_data() -> None:
    key = (42, -1, "ü😀,|'\"", b"\x00\xff\n", Decimal("1.50"), datetime.date(2020, 1, 2),
           datetime.datetime(2020, 1, 2, 3, 4, 5, 6))
    text = encode_key(key)
    assert decode_key(text) == [42, -1, "ü😀,|'\"", b"\x00\xff\n", "1.50", "2020-01-02",
                                "2020-01-02 03:04:05.000006"]


def test_time_keys_are_written_as_mariadb_reads_them() -> None:
    """Past 24 hours and below zero: ``str()`` of a timedelta is no TIME literal."""
    key = (datetime.timedelta(days=1, hours=2), datetime.timedelta(hours=-1),
           datetime.timedelta(minutes=-30, microseconds=-500000),
           -datetime.timedelta(hours=838, minutes=59, seconds=59))
    assert decode_key(encode_key(key)) == ["26:00:00", "-01:00:00", "-00:30:00.500000",
                                           "-838:59:59"]
    assert loose(key[:1]) == loose(["26:00:00"])


@pytest.mark.parametrize("text, message", [
    ("", "PK_DATA is not JSON"),
    ("1", "must be a non-empty JSON array"),
    ("[]", "must be a non-empty JSON array"),
    ("[null]", "a key value cannot be null"),
    ("[[1]]", "a key value cannot be [1]"),
    ('[{"hex": "00"}]', 'an object must be {"base64": ...}'),
    ('[{"base64": "%%%"}]', "bad base64"),
])
def test_malformed_pk_data_is_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(FreeDoorRequestError, match=message.replace("[", r"\[")
                       .replace("{", r"\{")):
        decode_key(text)


def test_a_request_names_table_type_and_key() -> None:
    request = parse(buffer_row(FULL_NAME="`shop`.`orders`", TYPE="u", PK_DATA='[3, "x"]'))
    assert (request.buffer_id, request.schema, request.table, request.type, request.key,
            request.central) == (7, "shop", "orders", "U", [3, "x"], False)
    assert parse(as_change(buffer_row().after, central=True)).central


@pytest.mark.parametrize("values, message", [
    ({"FULL_NAME": "orders"}, r"FULL_NAME must be schema\.table .*, got 'orders'"),
    ({"FULL_NAME": "a.b.c"}, r"FULL_NAME must be schema\.table .*, got 'a\.b\.c'"),
    ({"TYPE": "X"}, "TYPE must be I, U or D, got 'X'"),
    ({"PK_DATA": "{}"}, "must be a non-empty JSON array"),
])
def test_bad_requests_say_what_is_wrong(values: dict, message: str) -> None:
    with pytest.raises(FreeDoorRequestError, match=message):
        parse(buffer_row(**values))


def test_a_request_names_any_table_with_backticks() -> None:
    request = parse(buffer_row(FULL_NAME="`my-db`.`t.1`"))
    assert (request.schema, request.table) == ("my-db", "t.1")


def test_only_buffer_inserts_are_requests() -> None:
    assert is_request(buffer_row())
    assert not is_request(RowChange("retl", "retl_buffer", ChangeType.DELETE, ("ID",),
                                    {"ID": 1}, None))
    assert not is_request(RowChange("shop", "retl_buffer", ChangeType.INSERT, ("ID",), None,
                                    {"ID": 1}))



def _door(*pairs: str, refused: str = "") -> DoorQueue:
    return DoorQueue("shop.fwd", DataSource("src", "h1"), compiled(*pairs), None, DoorStats(),
                     refused)


FANNED = ("{source: shop.tagged, target: shop.tagged, fan_out: true, key_columns: [code]}",
          "{source: shop.tagged, target: shop.tagged2, fan_out: true}")


def test_a_delete_of_a_table_fanned_out_by_different_key_columns_is_rejected() -> None:
    """A request is read by its table's first pair's key_columns: a D's key (code) reached
    the pair that finds rows by id as a delete by code, and paused the pipeline at every
    resume (the copy in retl_pending came back). Rejected, saying why; an I (whole rows,
    each pair keyed by its own columns) and a D where the pairs agree are served."""
    door = _door(*FANNED)
    with pytest.raises(FreeDoorRequestError, match="the pairs the table fans out to find its "
                       "rows by different key_columns"):
        door._checked(buffer_row(FULL_NAME="shop.tagged", TYPE="D", PK_DATA='["5"]'))
    assert door._checked(buffer_row(FULL_NAME="shop.tagged", PK_DATA='["5"]')).type == "I"
    agreeing = _door(FANNED[0], FANNED[1].replace("fan_out: true", "fan_out: true, "
                                                  "key_columns: [code]"))
    assert agreeing._checked(buffer_row(FULL_NAME="shop.tagged", TYPE="D",
                                        PK_DATA='["5"]')).type == "D"


def test_a_pipeline_that_reads_no_rows_rejects_every_request() -> None:
    """A two-way channel's pipeline and a subscription's take no rows read from the tables:
    a request one finds (central, or a copy an earlier version kept in retl_pending) is
    rejected, saying why, rather than failing its batch at every resume."""
    assert refusal("shop.fwd", "mysql", False) == "" and refusal("shop.fwd", "delta", False) == ""
    for kind, two_way, why in (("mysql", True, "is one of a two-way channel"),
                               ("subscription", False, "writes a subscription")):
        door = _door("{source: shop.orders, target: shop.orders}",
                     refused=refusal("shop.fwd", kind, two_way))
        with pytest.raises(FreeDoorRequestError, match=why):
            door._checked(buffer_row())


def test_a_two_way_pipeline_keeps_no_request_the_stream_carries() -> None:
    """Kept in retl_pending, a request failed the two-way pipeline's batch again at every
    resume, whatever was done to its buffer row: it is left alone (and logged)."""
    asked: list[list[RowChange]] = []

    class Runner(RunnerSelect):
        pipeline_id, target_kind = "shop.fwd", "mysql"

    runner = Runner()
    snapshots = type("Asked", (), {"ask": lambda self, requests: asked.append(requests)})()
    for two_way in (True, False):
        runner.two_way = two_way
        runner._ask(snapshots, [buffer_row()])
    assert len(asked) == 1  # the one-way pipeline's only


def test_a_request_for_another_channels_table_is_skipped_not_rejected(monkeypatch) -> None:
    """Every pipeline of a source sees each per-instance request: one for a table it does not
    replicate is another channel's. It was rejected — counted (the free_door_rejects alarm on
    the wrong channel) and its buffer row deleted; now it is not kept, and a copy an earlier
    version kept in retl_pending is forgotten (that copy alone deleted), not rejected. A
    request naming no table is kept, to be rejected; a central one names its pipeline."""
    door = _door("{source: shop.orders, target: shop.orders}")
    ours, theirs = buffer_row(ID=1), buffer_row(ID=2, FULL_NAME="shop.other")
    nameless = buffer_row(ID=3, FULL_NAME="nodot")
    assert door._ours([ours, theirs, nameless]) == [ours, nameless]
    door._scan_until = 3
    pending = [as_change({**(row.after or {})}, central=False) for row in (ours, theirs)]
    monkeypatch.setattr(door, "_scan", lambda most: list(pending))
    forgotten: list[list[RowChange]] = []
    monkeypatch.setattr(door, "_forget", forgotten.append)
    noted: list[list] = []
    monkeypatch.setattr(door, "noted", noted.append)
    [asked] = door.take(1)
    assert [r.buffer_id for r in asked.requests] == [1] and noted == []
    assert [[(c.after or {})["ID"] for c in part] for part in forgotten] == [[2]]
    central = as_change({**(theirs.after or {})}, central=True)
    door._rows.append(central)
    door._scan_until = door._scan_after  # (nothing pending)
    assert door.take(1) == [] and forgotten == [[pending[1]]]
    [[rejected]] = noted
    assert rejected.outcome == "rejected" and "not replicated" in rejected.detail
