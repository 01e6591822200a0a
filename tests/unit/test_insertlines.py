"""Insert lines straight from the events' bytes (node.extract.insertlines), compiled and as
its pure-Python twin, against the decoded path (decode, then loaddata's rendering) on rows
events built by hand: every integer width at its edges, NULLs, text to escape, one- to
four-byte lengths; and what it must leave to the decoded path (it says -1, never a guess)."""

from __future__ import annotations

import importlib.util
import itertools
import random
from array import array
from types import ModuleType

import pytest

from node.extract import insertlines, inserts
from node.extract.decode import ColumnSpec, TableSchema, decode_rows
from node.extract.job import Part
from node.jobs import JobSpec
from node.target.mysql import loaddata
from node.target.mysql.facts import TableFacts
from node.target.mysql.render import Column
from tests.unit.test_decode import WRITE, packet, rows_body
from tests.unit.test_etl import compiled

# (binlog type, unsigned, size in bytes, the target's DATA_TYPE)
INTEGERS = [(1, False, 1, "tinyint"), (1, True, 1, "tinyint"), (2, False, 2, "smallint"),
            (2, True, 2, "smallint"), (9, False, 3, "mediumint"), (9, True, 3, "mediumint"),
            (3, False, 4, "int"), (3, True, 4, "int"), (8, False, 8, "bigint"),
            (8, True, 8, "bigint")]
WIDE = TableSchema("t", "wide", (
    *(ColumnSpec(f"i{n}", kind, unsigned) for n, (kind, unsigned, _, _) in enumerate(INTEGERS)),
    ColumnSpec("v", 15, charset="utf8", max_length=1020),  # VARCHAR(255) utf8mb4: 2 bytes
    ColumnSpec("ch", 254, charset="cp1252", max_length=10),  # CHAR(10) latin1: 1 byte
    ColumnSpec("tx", 252, charset="utf8", length_size=2),  # TEXT
    ColumnSpec("lt", 252, charset="utf8", length_size=4)), ("i0",))  # LONGTEXT
TARGET = {**{f"i{n}": Column(data_type, None, column_type=data_type)
             for n, (_, _, _, data_type) in enumerate(INTEGERS)},
          "v": Column("varchar", "utf8mb4", column_type="varchar(255)"),
          "ch": Column("char", "latin1", column_type="char(10)"),
          "tx": Column("text", "utf8mb4", column_type="text"),
          "lt": Column("longtext", "utf8mb4", column_type="longtext")}


def twins() -> list[ModuleType]:
    """The module as node imports it (compiled after make setup) and its .py, loaded apart."""
    spec = importlib.util.spec_from_file_location("insertlines_twin",
                                                  insertlines.__file__.split(".")[0] + ".py")
    assert spec is not None and spec.loader is not None
    pure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pure)
    assert not pure.COMPILED
    return [insertlines, pure]


def integer(value: int, size: int, unsigned: bool) -> bytes:
    return value.to_bytes(size, "little", signed=not unsigned)


def edges(size: int, unsigned: bool) -> list[int]:
    if unsigned:
        return [0, 1, 2 ** (8 * size) - 1, 2 ** (8 * size - 1)]
    low, high = -2 ** (8 * size - 1), 2 ** (8 * size - 1) - 1
    return [0, -1, low, high, low + 1]


def text(value: bytes, size: int) -> bytes:
    return len(value).to_bytes(size, "little") + value


def row(n: int, texts: tuple[bytes, bytes, bytes, bytes], nulls: int = 0) -> bytes:
    """Row ``n`` of WIDE: each integer column at its n-th edge (round), the texts given; the
    columns whose bit ``nulls`` has are NULL (and take no bytes)."""
    out = bytearray(nulls.to_bytes(2, "little"))
    for i, (_, unsigned, size, _) in enumerate(INTEGERS):
        if not nulls >> i & 1:
            values = edges(size, unsigned)
            out += integer(values[n % len(values)], size, unsigned)
    for i, (value, size) in enumerate(zip(texts, (2, 1, 2, 4), strict=True), len(INTEGERS)):
        if not nulls >> i & 1:
            out += text(value, size)
    return bytes(out)


ROWS = [row(n, (b"plain %d" % n, b"c", b"", b"x" * 300)) for n in range(5)] + [
    row(5, (b"tab\there", b"new\nline", b"back\\slash", b"nul\0 cr\r"), 0),
    row(6, (b"", b"", b"", b""), nulls=0b10000000000001),  # i0 and lt NULL
    row(7, (b"v", b"c", b"t", b"l"), nulls=0b01111111111110),
    # UTF-8 of every length into UTF-8 columns; latin1's every byte (0x81: cp1252 has none)
    row(8, ("café €𝄞 中".encode(), b"\xe9\x81\xff\x80", "ü\t".encode(), "日本".encode()))]


def decoded_lines(event: bytes, checksum: bool, target: dict[str, Column] = TARGET) -> bytes:
    images = [after for _, after in decode_rows(WIDE, event, checksum)]
    sqls = loaddata.replaces("t", WIDE.table, images, target, False)
    assert sqls is not None
    return b"".join(sql.data or b"" for sql in sqls)


@pytest.mark.parametrize("module", twins(), ids=["as imported", "pure"])
@pytest.mark.parametrize("version, checksum", [(WRITE, True), (WRITE, False), (30, True)])
def test_lines_are_the_decoded_paths_lines_byte_for_byte(module: ModuleType, version: int,
                                                        checksum: bool) -> None:
    event = packet(version, rows_body(14, [b"\xff\x3f"], *ROWS), checksum)
    kinds, order = way(module, TARGET)
    out = bytearray(b"kept")  # lines go after what ``out`` holds up to ``at``
    found, end = module.lines(event, checksum, kinds, order, out, 4)
    assert found == len(ROWS)
    expected = decoded_lines(event, checksum)
    assert bytes(out[:end]) == b"kept" + expected
    assert b"-9223372036854775808" in expected and b"18446744073709551615" in expected


@pytest.mark.parametrize("module", twins(), ids=["as imported", "pure"])
def test_fields_go_in_the_target_columns_order(module: ModuleType) -> None:
    """The target's columns in another order than the source's (here the reverse): each
    line's fields are moved into it, the lines those the decoded path renders."""
    event = packet(WRITE, rows_body(14, [b"\xff\x3f"], *ROWS))
    backwards = dict(reversed(TARGET.items()))
    out = bytearray()
    found, end = module.lines(event, True, *way(module, backwards), out, 0)
    assert found == len(ROWS)
    assert bytes(out[:end]) == decoded_lines(event, True, backwards)


def orders(count: int) -> list[tuple[int, ...]]:
    """Target column orders: every rotation, every swap of two, and seeded shuffles."""
    rng = random.Random(7)
    found = {tuple((i + shift) % count for i in range(count)) for shift in range(count)}
    for a, b in itertools.combinations(range(count), 2):
        swapped = list(range(count))
        swapped[a], swapped[b] = b, a
        found.add(tuple(swapped))
    for _ in range(30):
        found.add(tuple(rng.sample(range(count), count)))
    return sorted(found)


@pytest.mark.parametrize("module", twins(), ids=["as imported", "pure"])
def test_fields_go_in_any_target_columns_order(module: ModuleType) -> None:
    """Any order of the target's columns, not only the reverse (the source's last field was
    measured from the moved write place: fields cut short or doubled, values in other
    columns, silently where the widths agreed; a review): the decoded path's lines."""
    event = packet(WRITE, rows_body(14, [b"\xff\x3f"], *ROWS))
    names = list(TARGET)
    for order in orders(len(names)):
        target = {names[i]: TARGET[names[i]] for i in order}
        out = bytearray()
        found, end = module.lines(event, True, *way(module, target), out, 0)
        assert found == len(ROWS)
        assert bytes(out[:end]) == decoded_lines(event, True, target), order


def way(module: ModuleType, target: dict[str, Column], schema: TableSchema = WIDE
        ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    found = module.way(schema, loaddata.plan(target, False))
    assert found is not None
    return found


def test_the_target_column_order_is_the_plans_and_each_text_is_checked_as_it_must_be() -> None:
    kinds, order = way(insertlines, dict(reversed(TARGET.items())))
    assert order == tuple(range(len(WIDE.columns) - 1, -1, -1))
    assert kinds[len(INTEGERS):] == (insertlines.UTF8 + 2, insertlines.ANY + 1,
                                     insertlines.UTF8 + 2, insertlines.UTF8 + 4)
    # UTF-8 into latin1, latin1 into UTF-8: the bytes change unless they are ASCII
    swapped = {**TARGET, "v": TARGET["ch"], "ch": TARGET["v"]}
    assert way(insertlines, swapped)[0][len(INTEGERS):][:2] == (insertlines.ASCII + 2,
                                                               insertlines.ASCII + 1)
    assert insertlines.way(WIDE, loaddata.plan({**TARGET, "more": TARGET["v"]}, False)) is None
    plan = loaddata.plan(TARGET, False) or []
    utf16 = [(name, "utf-16-be" if name == "v" else codec) for name, codec in plan]
    assert insertlines.way(WIDE, utf16) is None  # ASCII is not itself in UTF-16


LEFT = [
    ("malformed UTF-8", packet(WRITE, rows_body(14, [b"\xff\x3f"], row(
        1, (b"caf\xc3", b"c", b"", b""))))),
    ("a column left out of the image", packet(WRITE, rows_body(14, [b"\xff\x1f"], ROWS[0]))),
    ("rows past the event's end", packet(WRITE, rows_body(14, [b"\xff\x3f"], ROWS[0][:-3]))),
    ("bytes after the last row", packet(WRITE, rows_body(14, [b"\xff\x3f"], ROWS[0] + b"\0"))),
    ("another column count", packet(WRITE, rows_body(13, [b"\xff\x3f"], ROWS[0]))),
    ("an update", packet(24, rows_body(14, [b"\xff\x3f", b"\xff\x3f"], ROWS[0], ROWS[1]))),
    ("a truncated packet", packet(WRITE, rows_body(14, [b"\xff\x3f"], ROWS[0]))[:-9])]


@pytest.mark.parametrize("module", twins(), ids=["as imported", "pure"])
@pytest.mark.parametrize("why, event", LEFT, ids=[why for why, _ in LEFT])
def test_what_it_cannot_read_exactly_it_leaves_to_the_decoded_path(module: ModuleType, why: str,
                                                                   event: bytes) -> None:
    assert module.lines(event, True, *way(module, TARGET), bytearray(), 0) == (-1, 0), why


@pytest.mark.parametrize("module", twins(), ids=["as imported", "pure"])
def test_text_is_taken_exactly_when_the_decoded_path_would_keep_its_bytes(
        module: ModuleType) -> None:
    """Every lead byte over 0x7f with a range of second bytes, in sequences of two to four
    bytes: taken as UTF-8 exactly when Python's strict decoder takes them; into a latin1
    column, none is (its bytes would change)."""
    one = TableSchema("t", "u", (ColumnSpec("v", 15, charset="utf8", max_length=1020),))
    utf8 = way(module, {"v": TARGET["v"]}, one)
    into_latin1 = way(module, {"v": TARGET["ch"]}, one)
    for lead in range(0x80, 0x100):
        for second in range(0x70, 0xC8, 3 if module is not insertlines else 1):
            for size in (2, 3, 4):
                value = bytes([lead, second, 0x80, 0x80])[:size]
                event = packet(WRITE, rows_body(1, [b"\x01"], b"\0" + text(value, 2)))
                try:
                    value.decode()
                    expected = 1
                except UnicodeDecodeError:
                    expected = -1
                assert module.lines(event, True, *utf8, bytearray(), 0)[0] == expected, value
                assert module.lines(event, True, *into_latin1, bytearray(), 0)[0] == -1, value


def test_other_column_types_are_not_taken() -> None:
    for column in (ColumnSpec("d", 18, fsp=0), ColumnSpec("n", 246, precision=10, decimals=2),
                   ColumnSpec("e", 247, size=1, enum_values=(b"a",)), ColumnSpec("f", 4),
                   ColumnSpec("b", 252, charset="binary", length_size=2)):
        schema = TableSchema("t", "x", (ColumnSpec("id", 3), column))
        target = {"id": TARGET["i0"], column.name: TARGET["v"]}
        assert insertlines.way(schema, loaddata.plan(target, False)) is None


def test_an_integer_into_a_year_column_is_left_to_the_decoded_path() -> None:
    """The decoded path writes a YEAR's 0 as '0000' (the text '0' is the year 2000 there)."""
    schema = TableSchema("t", "x", (ColumnSpec("id", 3), ColumnSpec("y", 3)))
    target = {"id": TARGET["i0"], "y": Column("year", None)}
    assert insertlines.way(schema, loaddata.plan(target, False)) is None


@pytest.mark.skipif(not insertlines.COMPILED, reason="the straight path runs compiled only")
def test_a_run_of_inserts_goes_the_straight_way_and_loads_what_the_decoded_way_loads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    events = [packet(WRITE, rows_body(14, [b"\xff\x3f"], *ROWS[:4])),
              packet(WRITE, rows_body(14, [b"\xff\x3f"], *ROWS[4:]))]
    made = Part({1: WIDE}, b"".join(events), array("I", map(len, events)), array("I", [1, 1]),
                array("I", [3, 4]))
    spec = JobSpec(7, True, {("dst", "t", "wide"): TableFacts(TARGET, (frozenset({"i0"}),))},
                   load_data_min_rows=2)
    pipeline = compiled("{source: t.wide, target: t.wide}")
    calls: list[int] = []
    real = insertlines.lines
    monkeypatch.setattr(insertlines, "lines", lambda *args: calls.append(1) or real(*args))
    straight_sizes: dict[int, list[int]] = {}
    straight = inserts.units(pipeline, spec, made, straight_sizes)
    assert len(calls) == 2 and straight[2] == len(ROWS)
    monkeypatch.setattr(insertlines, "COMPILED", False)
    decoded_sizes: dict[int, list[int]] = {}
    assert inserts.units(pipeline, spec, made, decoded_sizes) == straight
    assert straight_sizes == decoded_sizes


@pytest.mark.parametrize("room", [64, 1 << 18])
def test_lines_written_a_few_events_at_a_time_load_what_the_decoded_way_loads(
        monkeypatch: pytest.MonkeyPatch, room: int) -> None:
    """The straight way (as built: compiled, or the pure twin made to take it) copies its
    lines out of its buffer every few events; with a buffer that small every event is
    copied out by itself, and the lines are the same either way."""
    events = [packet(WRITE, rows_body(14, [b"\xff\x3f"], *ROWS[n:n + 3])) for n in (0, 3, 6)]
    made = Part({1: WIDE}, b"".join(events), array("I", map(len, events)), array("I", [1] * 3),
                array("I", [3, 4, 5]))
    spec = JobSpec(7, True, {("dst", "t", "wide"): TableFacts(TARGET, (frozenset({"i0"}),))},
                   load_data_min_rows=2)
    pipeline = compiled("{source: t.wide, target: t.wide}")
    monkeypatch.setattr(insertlines, "COMPILED", True)
    monkeypatch.setattr(inserts, "_ROOM", room)
    calls: list[int] = []
    real = insertlines.lines
    monkeypatch.setattr(insertlines, "lines", lambda *args: calls.append(1) or real(*args))
    straight = inserts.units(pipeline, spec, made, {})
    assert len(calls) == 3 and straight[2] == len(ROWS)
    monkeypatch.setattr(insertlines, "COMPILED", False)
    assert inserts.units(pipeline, spec, made, {}) == straight

