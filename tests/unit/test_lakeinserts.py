"""Runs of inserts straight to a lake table's Arrow rows (node.extract.lakeinserts): on rows
events built by hand, a part whose lake table only gets inserts makes the very table the
general path (decode, transform, render) makes, and anything else goes the general way."""

from __future__ import annotations

import datetime
import decimal
import struct
from array import array

import pytest

from node.extract import lakeinserts
from node.extract.decode import ColumnSpec, TableSchema
from node.extract.job import ROW_BITS, Part, run_part
from node.jobs import JobSpec
from node.target.delta.columns import table_columns
from node.target.delta.tables import LakeFacts
from node.target.delta.units import read_ipc
from shared.errors import LoadError
from tests.unit.test_decode import DELETE, UPDATE, WRITE, packet, rows_body
from tests.unit.test_etl import compiled

LAYOUT = TableSchema("shop", "items", (
    ColumnSpec("id", 3), ColumnSpec("k", 3),
    ColumnSpec("name", 15, charset="utf8mb4", max_length=1020),
    ColumnSpec("latin", 254, charset="cp1252", max_length=60),
    ColumnSpec("jp", 15, charset="sjis", max_length=400),
    ColumnSpec("price", 246, precision=10, decimals=4),
    ColumnSpec("at", 18, fsp=3),
    ColumnSpec("blob", 252, charset="binary", length_size=2)), ("id",))
TARGET = ("dst", "shop", "items")
TXNS = ((0, "bin.000001:100", "0-1-5", 1_700_000_000_000),
        (4, "bin.000001:900", "0-1-6", 1_700_000_001_000),
        (6, "bin.000001:1500", "0-1-7", 0))
ALL = b"\xff"


def row(n: int, nulls: int = 0, jp: bytes = b"kana") -> bytes:
    """Row ``n``; ``nulls``: the bitmap of NULL columns (their bytes left out)."""
    at = ((2024 * 13 + 3) << 22 | (n % 28 + 1) << 17 | 13 << 12 | 14 << 6 | n % 60) \
        + 0x8000000000
    name = f"näme-{n} ✓".encode()
    latin = f"l\xe9{n}".encode("latin1")
    values = [struct.pack("<i", n), struct.pack("<i", n * 10),
              struct.pack("<H", len(name)) + name, bytes([len(latin)]) + latin,
              struct.pack("<H", len(jp)) + jp,
              (0x800000 | n).to_bytes(3, "big") + (n * 7 % 10000).to_bytes(2, "big"),
              at.to_bytes(5, "big") + (n % 1000 * 10).to_bytes(2, "big"),
              struct.pack("<H", 3) + bytes([n % 256, 0, 255])]
    return bytes([nulls]) + b"".join(value for index, value in enumerate(values)
                                     if not nulls >> index & 1)


def inserts(*numbers: int, nulls: int = 0) -> bytes:
    return packet(WRITE, rows_body(8, [ALL], *(row(n, nulls) for n in numbers)))


def part(*events: bytes, places: tuple[int, ...] = ()) -> Part:
    return Part({1: LAYOUT}, b"".join(events), array("I", map(len, events)),
                array("I", [1] * len(events)),
                array("I", places or range(1, 1 + len(events))))


def facts(pair: str, mode: str = "mirror", partition_by: tuple[str, ...] = ()) -> LakeFacts:
    """The lake facts of the pair's target, as the lake makes them from the table map."""
    entry = compiled(pair).pairs[0]

    def target_name(name: str) -> str | None:
        mapped = entry.map_row({name: None}, ())
        return next(iter(mapped), None)

    keys = tuple(entry.renames.get(key, key) for key in LAYOUT.primary_key)
    return LakeFacts(tuple(table_columns(LAYOUT, target_name)), keys, mode, partition_by)


def spec(lake: LakeFacts) -> JobSpec:
    return JobSpec(7, True, {TARGET: lake}, target="delta", transactions=TXNS)


def both(pair: str, lake: LakeFacts, made: Part, monkeypatch) -> tuple[list, list, frozenset]:
    """The units by the path run_part takes, the general path's, and the numbers taken."""
    taken = []
    real = lakeinserts.units

    def spy(*args):
        found = real(*args)
        taken.append(found[1])
        return found

    monkeypatch.setattr(lakeinserts, "units", spy)
    c = compiled(pair)
    straight = run_part(c, spec(lake), made)
    monkeypatch.setattr(lakeinserts, "units", lambda *args: ([], frozenset(), 0))
    general = run_part(c, spec(lake), made)
    assert straight.rows == general.rows and straight.sizes == general.sizes
    return straight.units, general.units, taken[0] if taken else frozenset()


def same(straight: list, general: list) -> None:
    """The units hold the same fields and the same Arrow table, schema metadata too."""
    assert len(straight) == len(general)
    for mine, theirs in zip(straight, general, strict=True):
        assert mine._replace(data=b"") == theirs._replace(data=b"")
        ours, its = read_ipc(mine.data), read_ipc(theirs.data)
        assert ours.equals(its, check_metadata=True), (ours.to_pylist()[:2],
                                                       its.to_pylist()[:2])
        assert mine.data == theirs.data  # byte for byte


PAIR = "{source: shop.items, target: shop.items}"
LOG_PAIR = "{source: shop.items, target: shop.items, mode: changelog}"
CHOSEN = ("{source: shop.items, target: shop.items, mode: changelog, columns: {exclude: "
          "[blob]}, column_pairs: [{source: name, target: title}]}")
CHOSEN_MIRROR = ("{source: shop.items, target: shop.items, columns: {exclude: [latin]}, "
                 "column_pairs: [{source: id, target: item_id}, {source: k, target: kk}]}")
MADE = part(inserts(1, 2, 3), inserts(4, 5, nulls=0b10110100), inserts(6),
            inserts(7, 8, 9, nulls=0b11111100), places=(2, 4, 5, 9))


@pytest.mark.parametrize("pair, mode, partition_by", [
    (LOG_PAIR, "changelog", ()),
    (LOG_PAIR, "changelog", ("k",)),
    (CHOSEN, "changelog", ("title",)),
    (PAIR, "mirror", ()),
    (PAIR, "mirror", ("latin",)),
    (CHOSEN_MIRROR, "mirror", ("kk",)),
])
def test_an_insert_only_table_makes_the_general_paths_arrow_byte_for_byte(
        pair: str, mode: str, partition_by: tuple[str, ...], monkeypatch) -> None:
    straight, general, taken = both(pair, facts(pair, mode, partition_by), MADE, monkeypatch)
    assert taken == {1}
    same(straight, general)
    [unit] = straight
    assert (unit.rows, unit.first_seq) == (9, 2 << ROW_BITS)
    table = read_ipc(unit.data)
    if mode == "changelog":
        assert table.column("_setl_txn").to_pylist() == [
            "bin.000001:100"] * 3 + ["bin.000001:900"] * 3 + ["bin.000001:1500"] * 3
        assert table.column("_setl_seq").to_pylist()[:6] == [
            2 << ROW_BITS, (2 << ROW_BITS) + 1, (2 << ROW_BITS) + 2, 0, 1, 1 << ROW_BITS]
    else:
        assert table.column("_setl_delete").to_pylist() == [False] * 9
    first = table.to_pylist()[0]
    assert first["price"] == decimal.Decimal("1.0007")
    assert first["at"] == datetime.datetime(2024, 3, 2, 13, 14, 1, 1000)
    assert table.to_pylist()[7].get("name", table.to_pylist()[7].get("title")) is None


def test_rows_before_the_first_known_transaction_and_empty_events_are_as_the_general_path(
        monkeypatch) -> None:
    empty = packet(WRITE, rows_body(8, [ALL]))
    made = part(empty, inserts(1, 2), inserts(3), places=(0, 0, 7))
    lake = facts(LOG_PAIR, "changelog")
    lake_spec = JobSpec(7, True, {TARGET: lake}, target="delta", transactions=TXNS[1:])
    c = compiled(LOG_PAIR)
    nothing = part(empty)
    assert lakeinserts.units(c, lake_spec, nothing, {})[1] == {1}
    assert run_part(c, lake_spec, nothing).units == []
    straight = run_part(c, lake_spec, made)
    monkeypatch.setattr(lakeinserts, "units", lambda *args: ([], frozenset(), 0))
    same(straight.units, run_part(c, lake_spec, made).units)
    assert run_part(c, lake_spec, nothing).units == []


def test_sjis_text_is_taken_as_the_general_path_takes_it_and_refused_alike(
        monkeypatch) -> None:
    lake = facts(LOG_PAIR, "changelog")
    odd = part(packet(WRITE, rows_body(8, [ALL], row(1, jp=b"\x83J\x83i"))))
    c = compiled(LOG_PAIR)
    with pytest.raises(LoadError) as mine:
        run_part(c, spec(lake), odd)
    monkeypatch.setattr(lakeinserts, "units", lambda *args: ([], frozenset(), 0))
    with pytest.raises(LoadError) as theirs:
        run_part(c, spec(lake), odd)
    assert str(mine.value) == str(theirs.value) and "column jp" in str(mine.value)


def test_a_key_inserted_twice_in_a_mirror_goes_the_general_way(monkeypatch) -> None:
    straight, general, taken = both(PAIR, facts(PAIR), part(inserts(1, 2), inserts(2)),
                                    monkeypatch)
    assert taken == frozenset()
    same(straight, general)


KEYLESS = TableSchema("shop", "items", LAYOUT.columns, ())


@pytest.mark.parametrize("why, pair, made", [
    ("an update in the same part", LOG_PAIR, part(
        inserts(1, 2), packet(UPDATE, rows_body(8, [ALL, ALL], row(1), row(3))))),
    ("a delete in the same part", PAIR, part(
        inserts(1, 2), packet(DELETE, rows_body(8, [ALL], row(1))))),
    ("a virtual column", "{source: shop.items, target: shop.items, mode: changelog, "
     "virtual_columns: [{name: origin, value: web}]}", part(inserts(1, 2))),
    ("a processor", "{source: shop.items, target: shop.items, mode: changelog, "
     "processor: 'setl_examples:mask_email'}", part(inserts(1, 2))),
    ("a keyless table", LOG_PAIR, Part({1: KEYLESS}, inserts(1, 2), array("I", [len(inserts(
        1, 2))]), array("I", [1]), array("I", [1]))),
])
def test_anything_else_goes_the_general_way(why: str, pair: str, made: Part,
                                            monkeypatch) -> None:
    mode = "changelog" if "changelog" in pair else "mirror"
    straight, general, taken = both(pair, facts(pair, mode), made, monkeypatch)
    assert taken == frozenset(), why
    same(straight, general)
