"""node/cursor.py: the cursor's JSON form in ZooKeeper (the pure functions only)."""

from __future__ import annotations

import json

import pytest

from node.cursor import Cursor
from shared.model import BinlogPosition


@pytest.mark.parametrize("cursor", [
    Cursor(BinlogPosition("binlog.000003", 1234, "0-11-100"), 42),
    Cursor(BinlogPosition("mysql-bin.000001", 4)),
    Cursor(BinlogPosition(gtid="3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5"), 7),
    Cursor(BinlogPosition()),
    Cursor(BinlogPosition("binlog.000002", 99), 3, first=True, run="abc",
           targets={"t": BinlogPosition("binlog.000002", 50)}),
])
def test_round_trip(cursor: Cursor) -> None:
    data = cursor.to_json()
    assert isinstance(data, bytes)
    assert Cursor.from_json(data) == cursor
    assert Cursor.from_json(data).targets == cursor.targets


def test_to_json_fields() -> None:
    data = Cursor(BinlogPosition("binlog.000003", 1234, "0-11-100"), 42).to_json()
    assert json.loads(data) == {"file": "binlog.000003", "pos": 1234, "gtid": "0-11-100",
                                "process_id": 42}


def test_to_json_defaults() -> None:
    assert json.loads(Cursor(BinlogPosition("b.1", 4)).to_json()) == {
        "file": "b.1", "pos": 4, "gtid": "", "process_id": 0}


def test_from_json_fills_missing_gtid_and_process_id() -> None:
    assert Cursor.from_json(b'{"file": "b.000002", "pos": 99}') == \
        Cursor(BinlogPosition("b.000002", 99, ""), 0)


def test_from_json_accepts_numbers_written_as_text() -> None:
    cursor = Cursor.from_json(b'{"file": "b.2", "pos": "120", "process_id": "8"}')
    assert cursor == Cursor(BinlogPosition("b.2", 120), 8)
    assert isinstance(cursor.position.pos, int)
    assert isinstance(cursor.process_id, int)


def test_from_json_accepts_str() -> None:
    assert Cursor.from_json('{"file": "f", "pos": 5, "gtid": "g", "process_id": 1}') == \
        Cursor(BinlogPosition("f", 5, "g"), 1)


def test_from_json_needs_file_and_pos() -> None:
    with pytest.raises(KeyError):
        Cursor.from_json(b'{"pos": 5}')
    with pytest.raises(KeyError):
        Cursor.from_json(b'{"file": "f"}')
