"""node/extract/job.py and node/target/mysql/sqltext.py: a batch cut into parts so that every
change of a target table meets in one part, and statements rendered to the very text PyMySQL
sends."""

from __future__ import annotations

import datetime
import decimal
import gc
import threading
from array import array

import pymysql
import pytest

from node.changes import Batch, ChangeType, RowChange, TargetChange, Transaction
from node.extract.decode import TableSchema
from node.extract.etl import CompiledPipeline
from node.extract.job import Part, Planner, run_part
from node.extract.reads import Read, packed
from node.jobs import JobSpec, PartResult, in_order
from node.merge import merge
from node.target.mysql.facts import TableFacts
from node.target.mysql.render import statements
from node.target.mysql.sqltext import MAX_STATEMENT, Sql, literal, texts
from shared.model import BinlogPosition, PipelineParams
from tests.unit.test_etl import pipeline

VALUES = [0, -7, 2**63 - 1, 18446744073709551615, None, True, False, "", "plain",
          "quote ' and \\ backslash \" dq", "nul \0 and \n\r\x1a", "é漢字😀", b"", b"\x00\xff'\\",
          bytearray(b"ab"), 1.5, -0.0, 1e-300, 3.0, decimal.Decimal("-12.3400"),
          decimal.Decimal("1E+2"), datetime.date(2024, 2, 29), datetime.datetime(1, 1, 1),
          datetime.datetime(2024, 1, 2, 3, 4, 5, 60), datetime.timedelta(hours=-1, seconds=1),
          datetime.timedelta(days=34, microseconds=5), datetime.time(23, 59, 59, 999999),
          "0000-00-00 00:00:00"]


def escape() -> pymysql.connections.Connection:
    conn = pymysql.connections.Connection(defer_connect=True)
    conn.server_status = 0  # as Load's sessions: backslash escapes
    return conn


def executemany(sql: str, rows: list[list[object]]) -> list[str]:
    """The statements PyMySQL's executemany sends for ``rows``."""
    sent: list[str] = []
    cursor = pymysql.cursors.Cursor(escape())
    cursor.execute = lambda query: sent.append(bytes(query).decode()) or 1  # type: ignore
    cursor.executemany(sql, rows)
    return sent


@pytest.mark.parametrize("value", VALUES)
def test_a_literal_is_what_pymysql_sends(value: object) -> None:
    assert literal(value) == escape().escape(value)


def test_statements_become_the_text_pymysql_would_send_and_long_inserts_split() -> None:
    sql = ("INSERT INTO `s`.`t` (`id`, `v`) VALUES (%s, %s) "
           "ON DUPLICATE KEY UPDATE `v` = VALUES(`v`)")
    rows = [[n, "x" * 1000] for n in range(2500)]
    found = texts((sql, rows, True, [(n,) for n in range(2500)], False, ()), keep_what=True)
    assert [s.text for s in found] == executemany(sql, rows)
    assert len(found) == 3 and sum(s.rows for s in found) == 2500
    assert all(len(s.text) <= MAX_STATEMENT for s in found)
    assert found[2].what == [(n,) for n in range(2500 - found[2].rows, 2500)]
    values = [[n, "it's", b"\xff", None, 1.5] for n in range(3)]
    five = sql.replace("(`id`, `v`) VALUES (%s, %s)", "(a, b, c, d, e) VALUES (%s,%s,%s,%s,%s)")
    assert [s.text for s in texts((five, values, True, values, False, ()))] == \
        executemany(five, values)
    one = texts(("DELETE FROM `s`.`t` WHERE (`id`) IN ((%s), (%s))", [1, "a'b"], False,
                 [(1,), ("a'b",)], False, ()))
    assert one == [Sql("DELETE FROM `s`.`t` WHERE (`id`) IN ((1), ('a\\'b'))", 2)]
    # names are as written: a % in one is no placeholder, %% is two percent signs
    assert texts(("UPDATE `100%` SET a = 1", [], False, [(1,)], True, ()))[0].text == \
        "UPDATE `100%` SET a = 1"
    assert texts(("UPDATE `t%%x` SET `%s` = %s WHERE b LIKE 'a%%'", ["v"], False, [(1,)],
                  True, ()))[0].text == "UPDATE `t%%x` SET `%s` = 'v' WHERE b LIKE 'a%'"
    assert [s.text for s in texts(("INSERT INTO `{}`.`t%s` (`%`) VALUES (%s) ON DUPLICATE KEY "
                                   "UPDATE `%` = VALUES(`%`)", [[1], [2]], True, [(1,), (2,)],
                                   False, ()))] == \
        ["INSERT INTO `{}`.`t%s` (`%`) VALUES (1),(2) ON DUPLICATE KEY UPDATE `%` = VALUES(`%`)"]


def change(table: str, seq: int, kind: ChangeType, row_id: int, value: str = "v",
           ds: str = "target") -> TargetChange:
    after = None if kind is ChangeType.DELETE else {"id": row_id, "v": value}
    before_key = None if kind is ChangeType.INSERT else (row_id,)
    return TargetChange(ds, "s", table, kind, ("id",), before_key, after, 0, seq)


def test_units_of_parts_in_order_equal_one_merge_of_the_whole_batch() -> None:
    """Parts hold disjoint tables; their units sorted by (push_weight, first seq) are the
    statements one merge of all changes gives, in the same order."""
    changes = [change("a", 1, ChangeType.INSERT, 1), change("b", 2, ChangeType.INSERT, 1),
               change("a", 3, ChangeType.UPDATE, 1, "w"), change("c", 4, ChangeType.DELETE, 9),
               change("b", 5, ChangeType.INSERT, 2), change("c", 6, ChangeType.INSERT, 3)]
    spec = JobSpec(1, False, load_batch_size=100)
    from node.target.mysql.units import render

    parts = [render([c for c in changes if c.table in tables], spec) for tables in ("ac", "b")]
    merged = [PartResult(units, [], 0) for units in parts]
    ours = [sql.text for unit in in_order(merged) for sql in unit.sqls]
    conn = escape()
    theirs = [text for writes in merge(changes) for text in _mogrified(conn, writes)]
    assert ours == theirs


def _mogrified(conn: pymysql.connections.Connection, writes: object) -> list[str]:
    out = []
    for sql, args, many, *_ in statements(writes, 100):  # type: ignore[arg-type]
        if many:
            prefix, _, postfix = sql.partition(" VALUES ")
            template = postfix[:postfix.index(")") + 1]
            rows = [template % tuple(conn.escape(a) for a in row) for row in args]
            out.append(prefix + " VALUES " + ",".join(rows) + postfix[len(template):])
        else:
            out.append(sql % tuple(conn.escape(a) for a in args))
    return out


class Facts:
    """Target facts without a server: tables in ``linked`` have foreign keys."""

    def __init__(self, linked: set[str]) -> None:
        self.linked, self.asked = linked, []

    def of(self, target: tuple[str, str, str], layout: object = None) -> TableFacts:
        self.asked.append(target)
        return TableFacts({}, (frozenset({"id"}),), target[2] in self.linked)

    def forget(self) -> None:
        pass


def layout(table: str) -> TableSchema:
    return TableSchema("s", table, (), ("id",))


def test_tables_sharing_a_target_or_a_foreign_key_meet_in_one_part() -> None:
    compiled = CompiledPipeline.compile("c.p", 1, pipeline(
        "{source: s.a, target: t.ab}", "{source: s.b, target: t.ab}",
        "{source: s.c, target: t.c}", "{source: s.d, target: t.d}",
        "{source: s.e, target: t.e}", "{source: s.f, target: t.f}"))
    layouts = {n: layout(name) for n, name in enumerate("abcdef", start=1)}
    facts = Facts({"d", "e"})  # t.d and t.e are linked by a foreign key
    planner = Planner(compiled, layouts, facts, lambda: True,  # type: ignore[arg-type]
                      PipelineParams(load_batch_size=500))
    events = [(n, bytes([n]) * (10 * n)) for n in (1, 3, 2, 4, 6, 5, 1)]
    txn = Transaction((), BinlogPosition("b.1", 9), 1, 1, events=tuple(events), event_rows=7)
    parts = planner.parts(Batch("c.p", 1, [txn]), partitions=3)
    tables = [{layouts[n].table for n in part.numbers} for part in parts]
    for together in ({"a", "b"}, {"d", "e"}):  # a shared target, a foreign key
        assert [t for t in tables if t & together] == [t for t in tables if together <= t]
        assert sum(1 for t in tables if together <= t) == 1
    assert len(parts) == 3 and sum(len(p.numbers) for p in parts) == 7
    for part in parts:  # each table's events in the batch's order, with their own bytes
        for number in set(part.numbers):
            places = [place for n, place in zip(part.numbers, part.places, strict=True)
                      if n == number]
            assert places == sorted(places)
        at = 0
        for length, number in zip(part.lengths, part.numbers, strict=True):
            assert part.events[at:at + length] == bytes([number]) * (10 * number)
            at += length
    one = planner.parts(Batch("c.p", 1, [txn]), partitions=1)
    assert len(one) == 1 and list(one[0].places) == list(range(7))
    spec = planner.spec(Batch("c.p", 1, [txn]), parts)
    assert set(spec.facts) == {("dst", "t", name) for name in ("ab", "c", "d", "e", "f")}
    # t.ab is fed by s.a and s.b: merged so that a batch boundary changes nothing (node.merge)
    assert spec.gathered == {("dst", "t", "ab")}


def test_a_table_that_joins_two_groups_mid_batch_brings_their_events_together() -> None:
    """s.a writes t.x and s.b t.y, each a group; s.c, first met after them in the batch,
    writes both: every event of the three is in one part (in two, the parts' writes of a
    shared target table would not keep the source's order)."""
    compiled = CompiledPipeline.compile("c.p", 1, pipeline(
        "{source: s.a, target: t.x}", "{source: s.b, target: t.y}",
        "{source: s.c, target: t.x, fan_out: true}", "{source: s.c, target: t.y, fan_out: true}"))
    layouts = {n: layout(name) for n, name in enumerate("abc", start=1)}
    planner = Planner(compiled, layouts, Facts(set()), lambda: True,  # type: ignore[arg-type]
                      PipelineParams())
    events = [(n, bytes([n]) * 10) for n in (1, 2, 3, 2, 1)]
    txn = Transaction((), BinlogPosition("b.1", 9), 1, 1, events=tuple(events), event_rows=5)
    [part] = planner.parts(Batch("c.p", 1, [txn]), partitions=3)
    assert list(part.numbers) == [1, 2, 3, 2, 1] and list(part.places) == [0, 1, 2, 3, 4]
    # s.c met only by a rows read (a snapshot chunk) in a batch of a's and b's events
    planner = Planner(compiled, layouts, Facts(set()), lambda: True,  # type: ignore[arg-type]
                      PipelineParams())
    txn = Transaction((), BinlogPosition("b.1", 9), 1, 1, events=tuple(
        (n, bytes([n]) * 10) for n in (1, 2, 1, 2)), event_rows=4)
    batch = Batch("c.p", 1, [txn])
    batch.windows.append((1, 0, 4))
    read = Read(1, "s", "c", ("id",), ("id",), packed([(1,)]), 1, first=0, end=4)
    [part] = planner.parts(batch, partitions=3, reads=[read])
    assert list(part.numbers) == [1, 2, 1, 2] and len(part.reads) == 1


def test_a_subscriptions_parts_are_runs_of_whole_transactions_in_binlog_order() -> None:
    """Its parts' changes are delivered one part after the other: in binlog order."""
    compiled = CompiledPipeline.compile("c.p", 1, pipeline(
        "{source: s.a, target: t.a}", "{source: s.b, target: t.b}"))
    layouts = {1: layout("a"), 2: layout("b")}
    planner = Planner(compiled, layouts, Facts(set()), lambda: True,  # type: ignore[arg-type]
                      PipelineParams(), target="subscription")
    txns = [Transaction((), BinlogPosition("b.1", 10 * i), 1, 1,
                        events=((1, b"a" * 10), (2, b"b" * 10)), event_rows=2)
            for i in range(1, 6)]
    parts = planner.parts(Batch("c.p", 1, txns), partitions=2)
    assert len(parts) == 2
    assert [list(part.places) for part in parts] == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9]]
    assert [list(part.numbers) for part in parts] == [[1, 2] * 3, [1, 2] * 2]
    [one] = planner.parts(Batch("c.p", 1, txns), partitions=1)
    assert list(one.places) == list(range(10))


def test_a_part_of_decoded_changes_is_transformed_merged_and_rendered() -> None:
    compiled = CompiledPipeline.compile("c.p", 1, pipeline(
        "{source: s.t, target: s2.t, columns: {exclude: [secret]}}"))
    rows = [RowChange("s", "t", ChangeType.INSERT, ("id",), None,
                      {"id": n, "v": f"it's {n}", "secret": "x"}) for n in range(3)]
    rows.append(RowChange("s", "t", ChangeType.DELETE, ("id",), {"id": 1, "v": "", "secret": ""},
                          None))
    result = run_part(compiled, JobSpec(1, False, load_batch_size=2), Part.of_changes(rows))
    assert result.rows == 4 and not result.changes
    [unit] = result.units
    assert (unit.schema, unit.table, unit.rows) == ("s2", "t", 2)
    assert [sql.text for sql in unit.sqls] == [
        "INSERT INTO `s2`.`t` (`id`, `v`) VALUES (0, 'it\\'s 0'),(2, 'it\\'s 2') "
        "ON DUPLICATE KEY UPDATE `v` = VALUES(`v`)"]
    assert array("I") == Part.of_changes([]).numbers


def test_a_part_runs_with_no_cycle_collection_and_leaves_the_collector_as_it_found_it() -> None:
    # a part's row changes all live until it ends: the collector's passes over them found
    # nothing to free (node.extract.job.run_part holds it off)
    compiled = CompiledPipeline.compile("c.p", 1, pipeline("{source: s.t, target: s2.t}"))
    rows = [RowChange("s", "t", ChangeType.UPDATE, ("id",), {"id": n, "v": "a"},
                      {"id": n, "v": f"b{n}"}) for n in range(3000)]
    part, spec = Part.of_changes(rows), JobSpec(1, False)
    passes: list[str] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        passes.append(phase)

    gc.collect()
    gc.callbacks.append(seen)
    try:
        assert gc.isenabled()
        result = run_part(compiled, spec, part)
        # (the allocations it counted meanwhile may bring one pass as it ends; without the
        # hold, ~20 passes ran in it)
        assert gc.isenabled() and passes in ([], ["start", "stop"]) and result.rows == 3000
        gc.disable()  # someone else's: it stays off
        run_part(compiled, spec, part)
        assert not gc.isenabled()
        gc.enable()
        # in a thread of the node (a small batch's part) the daemon's collector runs on:
        # parts back to back held it off nearly all the time (a review)
        held: list[bool] = []
        passes.clear()
        thread = threading.Thread(target=lambda: held.append(run_part(
            compiled, spec, part).rows == 3000 and gc.isenabled()))
        thread.start()
        thread.join()
        assert held == [True] and len(passes) > 2
    finally:
        gc.callbacks.remove(seen)
        gc.enable()


def ops(results: list[list[object]]) -> list[tuple[str, str, object]]:
    """Merged writes of several parts in the order Load writes them, as row operations:
    (table, delete | upsert | move, key or row)."""
    writes = sorted((w for result in results for w in result),  # type: ignore[attr-defined]
                    key=lambda w: (w.push_weight, w.first_seq))
    found: list[tuple[str, str, object]] = []
    for w in writes:
        found += [(w.table, "delete", key) for key in w.deletes]
        found += [(w.table, "upsert", row) for row in w.upserts]
        found += [(w.table, kind, item) for kind, item in w.steps]
    return found


def test_parts_merged_apart_write_what_one_serial_merge_writes() -> None:
    """Many changes of few keys (key changes, unique values swapped between rows, deletes
    and re-inserts) over tables cut into parts as the Planner cuts them — a shared target
    together, tables linked by foreign keys together — merge into the row operations of one
    merge of the whole batch: every table's in the same order, and those of tables linked by
    foreign keys interleaved as in the source (tables with no link may be written one after
    the other instead of interleaved)."""
    import random

    targets = {"a": "ab", "b": "ab", "c": "c", "d": "d", "e": "e"}  # source → target table
    facts = {("t", "s", "c"): TableFacts({}, (frozenset({"id"}),), True),  # c, d: linked
             ("t", "s", "d"): TableFacts({}, (frozenset({"id"}),), True),
             ("t", "s", "e"): TableFacts({}, (frozenset({"id"}), frozenset({"code"})), False)}

    def ordered(name: tuple[str, str, str], keys: tuple[str, ...]) -> bool:
        return facts.get(name, TableFacts()).ordered(keys)

    groups = [{"a", "b"}, {"c", "d"}, {"e"}]
    for seed in range(300):
        rng = random.Random(seed)
        weights = {table: rng.choice((0, 0, 1)) for table in targets.values()}  # a pair's
        rows: dict[tuple[str, int], dict[str, object]] = {}
        changes = []
        for seq in range(rng.randint(1, 60)):
            table, key = targets[rng.choice("abcde")], rng.randint(1, 4)
            roll = rng.random()
            if (table, key) not in rows:
                after: dict[str, object] | None = {"id": key, "code": rng.randint(1, 3),
                                                   "v": seq}
                kind, before_key = ChangeType.INSERT, None
            elif roll < 0.3:
                kind, before_key, after = ChangeType.DELETE, (key,), None
            else:
                new = rng.randint(1, 4) if roll < 0.5 else key
                new = key if (table, new) in rows and new != key else new
                kind, before_key = ChangeType.UPDATE, (key,)
                after = {"id": new, "code": rng.randint(1, 3), "v": seq}
            rows.pop((table, key), None)
            if after is not None:
                rows[(table, int(after["id"]))] = after  # type: ignore[call-overload]
            changes.append(TargetChange("t", "s", table, kind, ("id",), before_key, after,
                                        weights[table], seq))
        serial = ops([merge(changes, ordered)])
        apart = ops([merge([c for c in changes if c.table in {targets[s] for s in group}],
                           ordered) for group in groups])
        for linked in ({"ab"}, {"c", "d"}, {"e"}):
            assert [op for op in apart if op[0] in linked] == \
                [op for op in serial if op[0] in linked], seed
        assert len(apart) == len(serial), seed
