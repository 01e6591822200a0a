"""node/target/mysql/twoway.py and currentrows.py: the images a conflict check compares,
value comparison across the binlog's and a SELECT's types, and the loop mark and second
try of a two-way load. What a two-way channel refuses: test_twoway_refusals.py."""

from __future__ import annotations

import datetime
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest

from node.changes import ChangeType, TargetChange
from node.target.mysql import currentrows, twoway
from node.target.mysql.currentrows import same_row
from node.target.mysql.facts import TableFacts
from node.target.mysql.render import Column
from node.target.mysql.twoway import LoopGuard, touched_keys
from node.target.mysql.writes import Writes
from shared.errors import ConfigError
from shared.model import BinlogPosition, PipelineParams


def change(seq: int, kind: ChangeType, before_key: tuple | None, before: dict | None,
           after: dict | None) -> TargetChange:
    return TargetChange("dst", "s", "t", kind, ("id",), before_key, after, seq=seq, before=before)


def test_touched_keys_name_each_key_once_before_and_after_a_change() -> None:
    changes = [
        change(3, ChangeType.DELETE, (1,), {"id": 1, "v": "b"}, None),
        change(1, ChangeType.UPDATE, (1,), {"id": 1, "v": "a"}, {"id": 1, "v": "b"}),
        change(2, ChangeType.INSERT, None, None, {"id": 2, "v": "new"}),
        change(4, ChangeType.UPDATE, (2,), {"id": 2, "v": "new"}, {"id": 3, "v": "moved"}),
    ]
    assert touched_keys(changes) == {("s", "t", ("id",)): [(1,), (2,), (3,)]}


def test_same_row_compares_values_across_types_and_the_before_images_columns() -> None:
    binlog = {"id": 1, "tags": {"b", "a"}, "doc": {"x": [1, 2]}, "price": Decimal("1.50"),
              "ratio": 0.25, "at": datetime.datetime(2026, 1, 2, 3, 4, 5)}
    select = {"id": 1, "tags": "a,b", "doc": '{"x": [1, 2]}', "price": Decimal("1.5"),
              "ratio": 0.25, "at": datetime.datetime(2026, 1, 2, 3, 4, 5), "extra": 9}
    assert same_row(binlog, select)
    assert not same_row(binlog, {**select, "price": Decimal("1.51")})
    assert not same_row(binlog, {**select, "tags": "a"})
    assert same_row(None, None)
    assert not same_row(None, select) and not same_row(binlog, None)
    # a TIMESTAMP(6)'s zero: the binlog gives no fraction, a SELECT six zeros (every update
    # of such a row was taken for a conflict, and the losing side's was dropped)
    assert same_row({"ts": "0000-00-00 00:00:00"}, {"ts": "0000-00-00 00:00:00.000000"})
    assert not same_row({"ts": "0000-00-00 00:00:00"}, {"ts": "2026-01-02 00:00:00.000000"})


def test_columns_are_found_without_case_and_one_the_target_lacks_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The source's ``Status`` is the target's ``status`` (the server's names have no case):
    compared only where the two spelled it alike, a change of it on the target met no
    conflict and the sides differed. A column of the change's row the target has not is no
    check at all: refused, not skipped."""
    assert not same_row({"id": 1, "Status": "old"}, {"id": 1, "status": "changed"})
    assert same_row({"ID": 1, "Status": "old"}, {"id": 1, "status": "old", "extra": 2})
    assert not same_row({"id": 1, "gone": 1}, {"id": 1})
    assert currentrows.missing_columns({"id": 1, "Gone": 1, "V": 2}, {"id": 1, "v": 2}) == ["Gone"]
    update = change(1, ChangeType.UPDATE, (1,), {"id": 1, "v": "a", "Gone": 1},
                    {"id": 1, "v": "b", "Gone": 2})
    with pytest.raises(ConfigError, match=r"pipeline c.back \(two-way\), processId 1: "
                       r"target table s.t has no column Gone of the change's row"):
        resolved(monkeypatch, {(1,): {"id": 1, "v": "a"}}, False, [update])


def test_only_a_binary_columns_zero_padding_is_left_out() -> None:
    """A SELECT gives a BINARY(n) padded with zero bytes, the binlog without them; a
    VARBINARY or BLOB keeps the bytes written: b'ab' and b'ab\\0' are two values (taken
    for one, a change between them on the target met no conflict)."""
    assert not same_row({"h": b"ab"}, {"h": b"ab\0"})
    assert not same_row({"h": b""}, {"h": b"\0\0"})
    assert same_row({"h": ""}, {"h": b""})
    assert currentrows.plain_key((b"ab",)) != currentrows.plain_key((b"ab\0",))

    class Cursor:
        description = (("k", 254), ("h", 254), ("v", 252))

        def execute(self, sql: str, values: Any = None) -> None:
            pass

        def fetchall(self) -> list[tuple]:
            return [(b"ab\0\0", b"x\0", b"y\0")]

    columns = {"k": Column("binary", None, column_type="binary(4)"),
               "h": Column("binary", None, column_type="binary(2)"),
               "v": Column("varbinary", None, column_type="varbinary(4)")}
    assert currentrows.current_rows(Cursor(), "s", "t", ("k",), [(b"ab\0\0",)], columns) == {
        (b"ab",): {"k": b"ab", "h": b"x", "v": b"y\0"}}


def test_text_that_looks_like_json_compares_by_its_bytes() -> None:
    """A VARCHAR/TEXT (MariaDB's JSON is LONGTEXT too) keeps the bytes written: two texts
    that parse to one JSON value are two values, and a key of such text two keys (read as
    one, a change of '{"a": 1, "b": 2}' to '{"b": 2, "a": 1}' on one side met no conflict
    with the other side's, and the sides kept each their own)."""
    assert not same_row({"t": '{"a": 1, "b": 2}'}, {"t": '{"b": 2, "a": 1}'})
    assert not same_row({"t": "[1, 2]"}, {"t": "[1,2]"})
    assert not same_row({"t": '{"a": 1.0}'}, {"t": '{"a": 1.00}'})
    assert same_row({"t": '{"b": 2, "a": 1}'}, {"t": '{"b": 2, "a": 1}'})
    assert currentrows.plain_key(('{"a":1}',)) != currentrows.plain_key(('{"a": 1}',))
    # a value a processor gives as a dict or list compares as the text Load writes of it
    assert same_row({"doc": {"b": 1, "a": "é"}}, {"doc": '{"b": 1, "a": "é"}'})
    assert not same_row({"doc": {"b": 1, "a": 2}}, {"doc": '{"a": 2, "b": 1}'})


def resolved(monkeypatch: pytest.MonkeyPatch, target: dict[tuple, dict], wins: bool,
             changes: list[TargetChange]) -> list[tuple[ChangeType, Any, Any]]:
    """What a pipeline writes of ``changes`` on a target holding ``target`` (rows by key)."""
    monkeypatch.setattr(twoway, "current_rows", lambda cursor, schema, table, keys, wanted, _: {
        key: target[key] for key in map(tuple, wanted) if key in target})
    guard = LoopGuard("c", "c.forward" if wins else "c.back", wins_conflicts=wins)
    return [(c.type, c.before_key, c.after) for c in guard.resolve(None, changes, 1)]


def test_a_key_change_on_the_losing_side_is_resolved_key_by_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """B moves id 1 to 2 while A inserts id 2: the losing pipeline (B → A) deletes id 1 and
    leaves A's id 2; the winner (A → B) writes its id 2 over B's moved row: both {2: x}."""
    move = change(1, ChangeType.UPDATE, (1,), {"id": 1, "v": "a"}, {"id": 2, "v": "a"})
    on_a = {(1,): {"id": 1, "v": "a"}, (2,): {"id": 2, "v": "x"}}
    assert resolved(monkeypatch, on_a, False, [move]) == [
        (ChangeType.DELETE, (1,), None)]
    insert = change(1, ChangeType.INSERT, None, None, {"id": 2, "v": "x"})
    assert resolved(monkeypatch, {(2,): {"id": 2, "v": "a"}}, True, [insert]) == [
        (ChangeType.DELETE, (2,), None), (ChangeType.INSERT, None, {"id": 2, "v": "x"})]
    # the old key changed on A meanwhile (v = z): the row is written at the new key, A's
    # id 1 stays (the winner's update of id 1 writes it on B again)
    changed = {(1,): {"id": 1, "v": "z"}}
    assert resolved(monkeypatch, changed, False, [move]) == [
        (ChangeType.INSERT, None, {"id": 2, "v": "a"})]
    # both keys conflict: nothing of the move; neither: the move as it is
    assert resolved(monkeypatch, {**changed, (2,): {"id": 2, "v": "x"}}, False, [move]) == []
    assert resolved(monkeypatch, {(1,): {"id": 1, "v": "a"}}, False, [move]) == [
        (ChangeType.UPDATE, (1,), {"id": 2, "v": "a"})]
    # a later change of the kept key goes with it; one of the conflicting key is left out
    later = change(2, ChangeType.UPDATE, (2,), {"id": 2, "v": "a"}, {"id": 2, "v": "b"})
    assert resolved(monkeypatch, on_a, False, [move, later]) == [
        (ChangeType.DELETE, (1,), None)]
    assert resolved(monkeypatch, on_a, True, [move, later]) == [
        (ChangeType.DELETE, (2,), None), (ChangeType.UPDATE, (1,), {"id": 2, "v": "a"}),
        (ChangeType.UPDATE, (2,), {"id": 2, "v": "b"})]


def test_a_later_change_of_a_conflicting_key_is_checked_against_the_row_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A: k v0 → vA; B: k v0 → vB; the winner writes vA on B; a B user then runs vA → vB2.
    The loser reads both of B's own changes in one batch: v0 → vB conflicts with A's vA and
    is left out, vA → vB2 follows A's row and is written (comparing it with the key's first
    before image, v0, left it out too: A = vA, B = vB2 for good)."""
    v = {name: {"id": 1, "v": name} for name in ("v0", "vA", "vB", "vB2")}
    batch = [change(1, ChangeType.UPDATE, (1,), v["v0"], v["vB"]),
             change(2, ChangeType.UPDATE, (1,), v["vA"], v["vB2"])]
    assert resolved(monkeypatch, {(1,): v["vA"]}, False, batch) == [
        (ChangeType.UPDATE, (1,), v["vB2"])]
    # a change after one that was written follows its after image; after one left out, the
    # row kept: v0 → vB written, vB → x written; on A = vA: vB → x left out too
    chain = [batch[0], change(2, ChangeType.UPDATE, (1,), v["vB"], {"id": 1, "v": "x"})]
    assert resolved(monkeypatch, {(1,): v["v0"]}, False, chain) == [
        (ChangeType.UPDATE, (1,), v["vB"]), (ChangeType.UPDATE, (1,), {"id": 1, "v": "x"})]
    assert resolved(monkeypatch, {(1,): v["vA"]}, False, chain) == []
    # a delete and an insert again of a key the target holds otherwise: the insert, read
    # after the delete was left out, finds the row and is left out too
    again = [change(1, ChangeType.DELETE, (1,), v["v0"], None),
             change(2, ChangeType.INSERT, None, None, v["vB"])]
    assert resolved(monkeypatch, {(1,): v["vA"]}, False, again) == []
    assert resolved(monkeypatch, {}, False, again) == [(ChangeType.INSERT, None, v["vB"])]
    # the winner writes everything, each conflict counted
    guard_changes = resolved(monkeypatch, {(1,): v["vA"]}, True, batch)
    assert guard_changes == [(ChangeType.UPDATE, (1,), v["vB"]),
                             (ChangeType.UPDATE, (1,), v["vB2"])]


def test_the_winners_insert_over_a_target_row_is_merged_as_a_key_the_target_had(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch's writes are merged by key, and a key an insert names first counts as new
    in the batch (its delete is not written). On the winning side an insert that meets the
    target's own row writes over it: an insert and a delete of that key wrote nothing (the
    target kept its users' row, the source had none), and a move 1 → 2 over the target's
    id 2 then 2 → 3 left id 2 there."""
    from node.jobs import JobSpec
    from node.target.mysql.units import render

    def written(target: dict, batch: list[TargetChange]) -> list[str]:
        monkeypatch.setattr(twoway, "current_rows", lambda cursor, schema, table, keys,
                            wanted, _: {key: target[key] for key in map(tuple, wanted)
                                        if key in target})
        kept = LoopGuard("c", "c.forward", wins_conflicts=True).resolve(None, batch, 1)
        return [sql.text for unit in render(kept, JobSpec(0, False, {}, load_batch_size=100))
                for sql in unit.sqls]

    born = [change(1, ChangeType.INSERT, None, None, {"id": 7, "v": "a"}),
            change(2, ChangeType.DELETE, (7,), {"id": 7, "v": "a"}, None)]
    assert written({(7,): {"id": 7, "v": "b"}}, born) == [
        "DELETE FROM `s`.`t` WHERE (`id`) IN ((7))"]
    assert written({}, born) == []  # a key new on the target too: nothing to write
    chain = [change(1, ChangeType.UPDATE, (1,), {"id": 1, "v": "x"}, {"id": 2, "v": "x"}),
             change(2, ChangeType.UPDATE, (2,), {"id": 2, "v": "x"}, {"id": 3, "v": "x"})]
    assert written({(1,): {"id": 1, "v": "x"}, (2,): {"id": 2, "v": "b"}}, chain) == [
        "DELETE FROM `s`.`t` WHERE (`id`) IN ((1), (2))",
        "INSERT INTO `s`.`t` (`id`, `v`) VALUES (3, 'x') ON DUPLICATE KEY UPDATE `v` = "
        "VALUES(`v`)"]
    # an insert over the target's row, kept: the upsert alone (the delete merged into it)
    assert written({(7,): {"id": 7, "v": "b"}}, born[:1]) == [
        "INSERT INTO `s`.`t` (`id`, `v`) VALUES (7, 'a') ON DUPLICATE KEY UPDATE `v` = "
        "VALUES(`v`)"]


def test_the_winners_insert_over_a_target_row_of_an_ordered_table_gets_no_delete(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A table with a foreign key to or from it (or another unique key) is written in
    source order, step by step: a delete put before the winner's insert over a target row
    ran there — ON DELETE CASCADE / SET NULL changed the target's child rows inside the
    marked transaction (never sent back), RESTRICT failed every try. Only a table merged by
    key gets it; an ordered one's insert goes alone (its steps keep the source's order)."""
    from node.merge import merge

    target = {(2,): {"id": 2, "v": "target-users"}}
    monkeypatch.setattr(twoway, "current_rows", lambda cursor, schema, table, keys, wanted, _: {
        key: target[key] for key in map(tuple, wanted) if key in target})
    insert = change(1, ChangeType.INSERT, None, None, {"id": 2, "v": "source"})
    move = change(2, ChangeType.UPDATE, (1,), {"id": 1, "v": "x"}, {"id": 2, "v": "x"})
    guard = LoopGuard("c", "c.forward", wins_conflicts=True)
    name = ("dst", "s", "t")
    ordered = TableFacts(foreign_keys=True)  # written in source order
    kept = guard.resolve(None, [insert], 1, facts=lambda target: ordered)
    assert [c.type for c in kept] == [ChangeType.INSERT]
    steps = [step for writes in merge(kept, {name}) for step in writes.steps]
    assert steps and all(kind != "delete" for kind, _ in steps), steps
    # a move onto the held key: its UPDATE would meet the target's row (1062 at every try,
    # or both rows kept under skip_load_exception): it stops, saying what to do
    with pytest.raises(ConfigError, match=r"s\.t moves its row of key \(1,\) to key \(2,\), "
                                          r"where the target holds a row of its own.*Delete "
                                          r"the target's row of key \(2,\) by hand"):
        guard.resolve(None, [move], 1, facts=lambda target: ordered)
    del target[(2,)]  # (done by hand): the move goes as it is
    assert guard.resolve(None, [move], 1, facts=lambda target: ordered) == [move]
    target[(2,)] = {"id": 2, "v": "target-users"}
    for batch in ([insert], [move]):
        # merged by key: the delete still goes first, folded into the upsert
        merged = guard.resolve(None, batch, 1, facts=lambda target: TableFacts())
        assert merged[0].type is ChangeType.DELETE and merged[0].before_key == (2,)
        assert [w.upserts for w in merge(merged, ())] == [[batch[0].after]]
    # the load asks the table's facts: a foreign key makes it ordered, and no DELETE is written
    columns = {"id": Column("int", None, column_type="int(11)"),
               "v": Column("varchar", "utf8mb4", column_type="varchar(20)")}
    facts = TableFacts(columns, (frozenset({"id"}),), foreign_keys=True)
    loader = SimpleNamespace(facts=SimpleNamespace(of=lambda target: facts), loop=guard,
                             params=PipelineParams(load_batch_size=1000))
    units = Writes(changes=[insert]).for_attempt(loader, SimpleNamespace(process_id=1), None,
                                                 False)
    texts = [sql.text for unit in units for sql in unit.sqls]
    assert texts and not any(text.startswith("DELETE") for text in texts), texts


def test_every_statement_a_ddl_brings_on_a_two_way_target_carries_the_loop_mark(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A CREATE TABLE runs under the source database's defaults: ALTER DATABASE before it
    and after it. Without the mark the opposite pipeline took them for that server's own
    DDL and replayed them on the origin, flipping its database's default charset."""
    from node.ddlsession import DATABASE_DEFAULTS
    from node.select import statements
    from node.target.mysql import ddlapply
    from shared.retl import loop_comment

    class Cursor:
        def __init__(self) -> None:
            self.ran: list[str] = []

        def execute(self, statement: str, args: Any = None) -> None:
            self.ran.append(statement)

        def fetchone(self) -> tuple[str, str]:
            return "latin1", "latin1_swedish_ci"  # the target database's own defaults

    monkeypatch.setattr(ddlapply, "ran_before", lambda *args: False)
    create = TargetChange("dst", "s", "t", ChangeType.DDL, (), None, None,
                          ddl="CREATE TABLE t (id INT PRIMARY KEY)",
                          session=((DATABASE_DEFAULTS, ("utf8mb4", "utf8mb4_bin")),))
    cursor = Cursor()
    mark = loop_comment("c")
    ddlapply.apply_ddl(cursor, create, "c.forward", 1, BinlogPosition("b.1", 4), 0, mark)
    written = [s for s in cursor.ran if not s.startswith(("SELECT", "USE"))]
    assert [s.removeprefix(mark).split(" CHARACTER")[0] for s in written] == [
        "CREATE DATABASE IF NOT EXISTS `s`", "ALTER DATABASE `s`",
        "CREATE TABLE t (id INT PRIMARY KEY)", "ALTER DATABASE `s`"]
    assert written[-1].endswith("CHARACTER SET latin1 COLLATE latin1_swedish_ci")
    assert all(statements.kind(s, False, "c") == statements.ECHO for s in written), written


def test_a_two_way_batchs_second_try_writes_a_statement_a_row() -> None:
    """skip_load_exception's second try renders a two-way target's changes one row a
    statement, so only the refused row is skipped (the flag once went in JobSpec's
    load_data_min_rows place, and the second try wrote the whole insert again)."""
    columns = {"id": Column("int", None, column_type="int(11)"),
               "v": Column("varchar", "utf8mb4", column_type="varchar(5)")}
    facts = TableFacts(columns, (frozenset({"id"}),))
    loader = SimpleNamespace(facts=SimpleNamespace(of=lambda target: facts), loop=None,
                             params=PipelineParams(load_batch_size=1000))
    writes = Writes(changes=[change(seq, ChangeType.INSERT, None, None,
                                     {"id": seq, "v": "x"}) for seq in (1, 2, 3)])
    first = writes.for_attempt(loader, None, None, False)
    second = writes.for_attempt(loader, None, None, True)
    assert sum(len(unit.sqls) for unit in first) == 1
    assert sum(len(unit.sqls) for unit in second) == 3
