"""Rows a source transaction undid that are still in its binlog (it also wrote a
non-transactional or temporary table): those of transactional tables go, the others stay."""

from __future__ import annotations

import pytest

from node.changes import ChangeType, RowChange
from node.extract.decode import TableSchema
from node.select.rollbacks import Rollbacks
from shared.errors import SourceError

LAYOUTS = {1: TableSchema("s", "items", ()), 2: TableSchema("s", "mlog", ()),
           3: TableSchema("s", "gone", ())}
ENGINES = {("s", "items"): True, ("s", "mlog"): False}
DOOR = RowChange("retl", "retl_buffer", ChangeType.INSERT)  # a free-door request (InnoDB)


def reading() -> tuple[Rollbacks, list[tuple[str, str]]]:
    asked: list[tuple[str, str]] = []

    def transactional(schema: str, table: str) -> bool | None:
        asked.append((schema, table))
        return ENGINES.get((schema, table))
    return Rollbacks(transactional), asked


def say(rollbacks: Rollbacks, query: str, events: list, decoded: list) -> None:
    rollbacks.statement(query, events, decoded, LAYOUTS, "binlog of src at binlog.000001:4")


def test_a_rollback_to_a_savepoint_drops_the_transactional_rows_after_it() -> None:
    rollbacks, asked = reading()
    events, decoded = [(1, b"i1"), (2, b"m1")], [DOOR]
    say(rollbacks, "SAVEPOINT `Nested one`", events, decoded)
    events += [(1, b"i2"), (2, b"m2"), (1, b"i3")]
    decoded.append(DOOR)
    say(rollbacks, "ROLLBACK WORK TO SAVEPOINT `nested ONE`", events, decoded)
    assert events == [(1, b"i1"), (2, b"m1"), (2, b"m2")]
    assert len(decoded) == 1
    events.append((1, b"i4"))
    say(rollbacks, "rollback to `nested one`", events, decoded)  # the savepoint stays
    assert events == [(1, b"i1"), (2, b"m1"), (2, b"m2")]
    assert sorted(set(asked)) == [("s", "items"), ("s", "mlog")] and len(asked) == 2  # cached


def test_nested_savepoints_and_release() -> None:
    rollbacks, _ = reading()
    events: list = [(1, b"a")]
    say(rollbacks, "SAVEPOINT a", events, [])
    events.append((1, b"b"))
    say(rollbacks, "SAVEPOINT b", events, [])
    events.append((1, b"c"))
    say(rollbacks, "RELEASE SAVEPOINT b", events, [])
    say(rollbacks, "SAVEPOINT c", events, [])
    events.append((1, b"d"))
    say(rollbacks, "ROLLBACK TO a", events, [])  # c and b after it are gone with it
    assert events == [(1, b"a")]
    with pytest.raises(SourceError, match=r"never set.*rather than guess"):
        say(rollbacks, "ROLLBACK TO c", events, [])


def test_a_whole_rollback_keeps_only_the_non_transactional_rows() -> None:
    rollbacks, _ = reading()
    events, decoded = [(1, b"i1"), (2, b"m1"), (1, b"i2")], [DOOR]
    rollbacks.undo(events, decoded, (0, 0), LAYOUTS, "here")
    assert events == [(2, b"m1")] and decoded == []


def test_engines_are_asked_again_after_ddl() -> None:
    rollbacks, asked = reading()
    rollbacks.undo([(2, b"m1")], [], (0, 0), LAYOUTS, "here")
    ENGINES[("s", "mlog")] = True  # ALTER TABLE mlog ENGINE=InnoDB
    try:
        rollbacks.forget()
        events: list = [(2, b"m2")]
        rollbacks.undo(events, [], (0, 0), LAYOUTS, "here")
        assert events == [] and asked == [("s", "mlog"), ("s", "mlog")]
    finally:
        ENGINES[("s", "mlog")] = False


def test_a_table_the_source_no_longer_has_stops_rather_than_guess() -> None:
    rollbacks, _ = reading()
    events: list = []
    say(rollbacks, "SAVEPOINT s", events, [])
    events.append((3, b"g"))
    with pytest.raises(SourceError, match=r"rows of s\.gone, which the source no longer has"):
        say(rollbacks, "ROLLBACK TO s", events, [])


def test_a_new_transaction_forgets_the_savepoints_of_the_last() -> None:
    """Each transaction's events are a list of their own (Select's framing)."""
    rollbacks, _ = reading()
    say(rollbacks, "SAVEPOINT s", [], [])
    with pytest.raises(SourceError, match="never set"):
        say(rollbacks, "ROLLBACK TO s", [(1, b"x")], [])
