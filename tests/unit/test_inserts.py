"""Runs of inserts straight to LOAD DATA lines (node.extract.inserts): on rows events built by
hand, a part whose target table only gets inserts renders what the general path (decode,
transform, merge, render) renders, and anything else goes the general way."""

from __future__ import annotations

import dataclasses
from array import array

import pytest

from node.extract import inserts, job
from node.extract.job import Part, run_part
from node.jobs import JobSpec
from node.target.mysql.facts import TableFacts
from node.target.mysql.render import Column
from tests.unit.test_decode import (
    ROW1,
    ROW2,
    SYSBENCH,
    UPDATE,
    WRITE,
    packet,
    rows_body,
    sysbench_row,
)
from tests.unit.test_etl import compiled

COLUMNS = {"id": Column("int", None, column_type="int(11)"),
           "k": Column("int", None, column_type="int(11)"),
           "c": Column("char", "utf8mb3", column_type="char(120)"),
           "pad": Column("char", "latin1", column_type="char(60)")}
TARGET = ("dst", "sbtest", "sbtest1")


def part(*events: bytes) -> Part:
    return Part({1: SYSBENCH}, b"".join(events), array("I", map(len, events)),
                array("I", [1] * len(events)), array("I", range(3, 3 + len(events))))


def both(pair: str, spec: JobSpec, made: Part, monkeypatch) -> tuple[list, list, frozenset]:
    """The units by the path run_part takes, the general path's, and the numbers taken."""
    taken = []
    real = inserts.units

    def spy(*args):
        found = real(*args)
        taken.append(found[1])
        return found

    monkeypatch.setattr(inserts, "units", spy)
    c = compiled(pair)
    straight = run_part(c, spec, made)
    monkeypatch.setattr(inserts, "units", lambda *args: ([], frozenset(), 0))
    general = run_part(c, spec, made)
    assert straight.rows == general.rows and straight.sizes == general.sizes
    return straight.units, general.units, taken[0] if taken else frozenset()


def spec(**facts: TableFacts) -> JobSpec:
    return JobSpec(7, True, {TARGET: facts.get("facts", TableFacts(COLUMNS, (frozenset({"id"}),)))},
                   load_data_min_rows=2)


def rows(first: int, count: int) -> bytes:
    return b"".join(sysbench_row(n, n * 10, f"c-{n}\t".encode(), b"p\xe9") for n in
                    range(first, first + count))


def test_a_target_that_only_gets_inserts_renders_what_the_general_path_renders(
        monkeypatch) -> None:
    made = part(packet(WRITE, rows_body(4, [b"\x0f"], ROW1, ROW2)),
                packet(WRITE, rows_body(4, [b"\x0f"], rows(3, 3))))
    straight, general, taken = both("{source: sbtest.sbtest1, target: sbtest.sbtest1}",
                                    spec(), made, monkeypatch)
    assert taken == {1}
    assert straight == general
    [unit] = straight
    assert (unit.datasource, unit.schema, unit.table, unit.rows) == (*TARGET, 5)
    assert unit.first_seq == 3 << job.ROW_BITS
    [sql] = unit.sqls
    assert sql.text.startswith("LOAD DATA LOCAL INFILE") and sql.data.count(b"\n") == 5
    assert b"3\t30\tc-3\\t\tp\xe9\n" in sql.data  # escaped, latin1 bytes


def test_renamed_and_left_out_columns_go_as_the_pair_maps_them(monkeypatch) -> None:
    facts = TableFacts({"id": COLUMNS["id"], "kk": COLUMNS["k"], "pad": COLUMNS["pad"]},
                       (frozenset({"id"}),))
    made = part(packet(WRITE, rows_body(4, [b"\x0f"], rows(1, 4))))
    straight, general, taken = both(
        "{source: sbtest.sbtest1, target: sbtest.sbtest1, columns: {exclude: [c]}, "
        "column_pairs: [{source: k, target: kk}]}", spec(facts=facts), made, monkeypatch)
    assert taken == {1} and straight == general
    assert straight[0].sqls[0].text.endswith("(`id`, `kk`, `pad`)")


@pytest.mark.parametrize("why, made, facts", [
    ("an update in the same part", part(
        packet(WRITE, rows_body(4, [b"\x0f"], rows(1, 3))),
        packet(UPDATE, rows_body(4, [b"\x0f", b"\x0f"], ROW1, ROW2))), None),
    ("too few rows for LOAD DATA", part(packet(WRITE, rows_body(4, [b"\x0f"], ROW1))), None),
    ("a target merged in source order", part(packet(WRITE, rows_body(4, [b"\x0f"], rows(1, 3)))),
     TableFacts(COLUMNS, (frozenset({"id"}), frozenset({"k"})))),
    ("a target with triggers", part(packet(WRITE, rows_body(4, [b"\x0f"], rows(1, 3)))),
     TableFacts(COLUMNS, (frozenset({"id"}),), triggers=True)),
    ("a target server without LOAD DATA LOCAL", part(
        packet(WRITE, rows_body(4, [b"\x0f"], rows(1, 3)))),
     TableFacts(COLUMNS, (frozenset({"id"}),), local_infile=False)),
])
def test_anything_else_goes_the_general_way(why: str, made: Part, facts: TableFacts | None,
                                            monkeypatch) -> None:
    straight, general, taken = both("{source: sbtest.sbtest1, target: sbtest.sbtest1}",
                                    spec(**({"facts": facts} if facts else {})), made,
                                    monkeypatch)
    assert taken == frozenset(), why
    assert straight == general


def test_a_target_fed_by_two_source_tables_goes_the_general_way() -> None:
    """Two source tables merged into one target: the merge orders their rows by key."""
    other = dataclasses.replace(SYSBENCH, table="sbtest2")
    events = [packet(WRITE, rows_body(4, [b"\x0f"], rows(1, 3))),
              packet(WRITE, rows_body(4, [b"\x0f"], rows(7, 3)))]
    made = Part({1: SYSBENCH, 2: other}, b"".join(events), array("I", map(len, events)),
                array("I", [1, 2]), array("I", [3, 4]))
    merged = compiled("{source: sbtest.sbtest1, target: sbtest.sbtest1}",
                      "{source: sbtest.sbtest2, target: sbtest.sbtest1}")
    assert inserts.units(merged, spec(), made, {}) == ([], frozenset(), 0)
    apart = compiled("{source: sbtest.sbtest1, target: sbtest.sbtest1}",
                     "{source: sbtest.sbtest2, target: sbtest.other}")
    assert inserts.units(apart, spec(), made, {})[1] == {1}  # (no facts for the other)
