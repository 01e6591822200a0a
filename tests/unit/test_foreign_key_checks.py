"""node/merge.py, node/target/mysql/units.py and node/jobs.py: which changes of tables with
foreign keys go with foreign_key_checks off (a source session's flag, a window's rows, an
inert upsert), and that a run never holds changes of both kinds."""

from __future__ import annotations

import pytest

from node.jobs import READ_BIT, ROW_BITS, JobSpec, unchecked_event, unchecked_places
from node.merge import merge
from node.target.mysql.facts import TableFacts
from node.target.mysql.units import render
from tests.unit.test_merge import dele, ins, upd

FACTS = {("dst", "s", name): TableFacts(foreign_keys=True, referenced=(frozenset({"id"}),))
         for name in ("parent", "child")}


def _event(off: bool) -> bytes:
    """A rows event's packet as far as its post-header's flags."""
    return bytes(26) + bytes([2 if off else 0, 0]) + b"rows"


def test_the_flag_is_read_from_each_events_post_header() -> None:
    events = [_event(False), _event(True), _event(False), _event(True)]
    assert [unchecked_event(e) for e in events] == [False, True, False, True]
    assert unchecked_places(b"".join(events), [len(e) for e in events], [5, 6, 7, 9]) == [6, 9]


def test_a_run_ends_where_the_setting_changes() -> None:
    """Delete of parent 1 with checks off (the source kept its children), then with checks
    on: two runs of one table, each with its own setting, in source order."""
    off = {1}
    changes = [dele(1 << ROW_BITS, (1,), table="parent"),
               dele((2 << ROW_BITS) + 1, (2,), table="parent"),
               dele(3 << ROW_BITS, (3,), table="parent")]
    writes = merge(changes, lambda name, keys: True,
                   unchecked=lambda name, keys, seq, cascades: (seq >> ROW_BITS) in off)
    assert [(w.unchecked, w.steps) for w in writes] == [
        (True, [("delete", (1,))]), (False, [("delete", (2,)), ("delete", (3,))])]


def test_units_say_which_runs_go_unchecked() -> None:
    """A source session's checks off (place 1), a window's rows (READ_BIT), upserts that
    change no referenced column: off; a delete and a key change with checks on: on."""
    spec = JobSpec(1, False, FACTS, load_batch_size=100,  # type: ignore[arg-type]
                   unchecked=frozenset({1}))
    changes = [ins(0 << ROW_BITS, {"id": 1}, table="parent"),           # inert upsert: off
               dele(1 << ROW_BITS, (1,), table="parent"),               # flagged: off
               dele(2 << ROW_BITS, (2,), table="parent"),               # cascades: on
               upd(3 << ROW_BITS, (3,), {"id": 4}, table="parent"),     # key change: on
               ins((3 << ROW_BITS) + READ_BIT, {"id": 9, "p": 7}, table="child")]  # read: off
    units = render(changes, spec)
    assert [(u.table, u.unchecked, u.sqls[0].text.split()[0]) for u in units] == [
        ("parent", True, "INSERT"), ("parent", False, "DELETE"), ("child", True, "INSERT")]


def test_an_upsert_that_may_change_a_referenced_column_stays_checked() -> None:
    """A foreign key to ``code`` (not the rows' key): an upsert may change it, and its ON
    UPDATE action must fire."""
    facts = {("dst", "s", "parent"): TableFacts(foreign_keys=True,
                                                referenced=(frozenset({"code"}),))}
    units = render([ins(0, {"id": 1, "code": "a"}, table="parent")],
                   JobSpec(1, False, facts, load_batch_size=100))  # type: ignore[arg-type]
    assert [u.unchecked for u in units] == [False]


def test_tables_without_foreign_keys_are_never_split_or_unchecked() -> None:
    facts = {("dst", "s", "t"): TableFacts(unique=(frozenset({"id"}), frozenset({"code"})))}
    spec = JobSpec(1, False, facts, load_batch_size=100,  # type: ignore[arg-type]
                   unchecked=frozenset({0}))
    units = render([ins(0, {"id": 1, "code": "a"}), ins(1 << ROW_BITS, {"id": 2, "code": "b"})],
                   spec)
    assert [(u.unchecked, len(u.sqls)) for u in units] == [(False, 1)]


class Recorder:
    """A target connection that takes every statement and keeps its text."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.open = True

    def cursor(self) -> Recorder:
        return self

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def get_server_info(self) -> str:
        return "10.11.6-MariaDB"

    def execute(self, sql: str, args: object = None) -> int:
        self.sent += [part.strip() for part in sql.split(";\n")]
        return 1

    def mogrify(self, sql: str, args: object = None) -> str:
        return sql

    def fetchone(self) -> None:
        return None

    def nextset(self) -> bool:
        return False

    def commit(self) -> None:
        pass

    def rollback(self) -> None:
        pass


@pytest.mark.parametrize(("flagged", "expected"), [
    ({0, 1}, ["SET0", "DELETE", "DELETE", "SET1", "DELETE", "DELETE", "COMMIT"]),
    ({2, 3}, ["DELETE", "DELETE", "SET0", "DELETE", "DELETE", "SET1", "COMMIT"])])
def test_load_sets_the_sessions_checks_only_where_they_change_and_on_before_the_commit(
        flagged: set[int], expected: list[str]) -> None:
    """In the batch's transaction: off before the first flagged run, on again before the
    first checked one, and nothing more (the session is on when the COMMIT goes)."""
    from node.changes import Batch
    from node.jobs import PartResult
    from node.target.mysql.loader import Loader
    from shared.model import DataSource, PipelineParams

    server = Recorder()
    loader = Loader("c.p", {"dst": DataSource("dst", "h")}, PipelineParams())
    loader._connection = lambda name: server  # type: ignore[method-assign]
    spec = JobSpec(1, False, FACTS, load_batch_size=100,  # type: ignore[arg-type]
                   unchecked=frozenset(flagged))
    changes = [dele(0, (1,), table="parent"), dele(1 << ROW_BITS, (2,), table="child"),
               dele(2 << ROW_BITS, (3,), table="parent"), dele(3 << ROW_BITS, (4,), table="child")]
    loader.load_units(Batch("c.p", 1), [PartResult(render(changes, spec), [], 4)])
    kept = [text.split()[0] + (text.split()[-1] if text.startswith("SET") else "")
            for text in server.sent if text.startswith(("SET SESSION foreign", "DELETE", "COMMIT"))]
    assert kept == expected, kept
