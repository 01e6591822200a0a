"""The free door's request parsing and PK_DATA encoding, without servers."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from node.changes import ChangeType, RowChange
from node.extract.freedoor import as_change, is_request, parse
from node.extract.reads import loose
from shared.errors import FreeDoorRequestError
from shared.retl import decode_key, encode_key


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

