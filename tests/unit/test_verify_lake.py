"""Verify's reads of a lake table (node.verify.lake) on a real Delta table on disk: source
values hash equal to what Load wrote for them, chunk ranges and keys select the rows they
name in Delta form, and the position is that of setl's newest commit."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

from deltalake import CommitProperties, write_deltalake

from node.extract.chunks import Chunk, SplitKey
from node.target.delta.columns import LakeColumn, table_properties
from node.target.delta.tables import LakeFacts
from node.target.delta.units import as_arrow
from node.verify import lake
from node.verify.plan import Target
from node.verify.readers import Side
from node.verify.values import Column
from shared.lakes import Stamp
from shared.model import BinlogPosition, DataSource

COLUMNS = (LakeColumn("id", "int32"), LakeColumn("big", "uint64"), LakeColumn("t", "time", 0, 2),
           LakeColumn("name", "string"), LakeColumn("at", "timestamp"))
NAMES = [column.name for column in COLUMNS]


def target(keys: tuple[str, ...] = ("id",), range_column: str | None = "id") -> Target:
    return Target("lake", "s", "items", keys, tuple(Column(n, "lake", "") for n in NAMES),
                  frozenset(NAMES), range_column, "", lake=COLUMNS)


def source_row(i: int) -> dict:
    """A row as the source gives it to Extract (pymysql's values)."""
    return {"id": i, "big": 18446744073709551615 - i, "t": datetime.timedelta(hours=-i,
                                                                              seconds=-1),
            "name": f"n{i}", "at": datetime.datetime(2024, 3, 1, 10, 0, i % 60, 125000)}


def written(tmp_path: Path, rows: list[dict], stamp: Stamp | None = None) -> lake.LakeView:
    """The rows written to s.items as Load writes them (one commit, stamped or not)."""
    table = as_arrow(LakeFacts(COLUMNS), rows, "s.items")
    write_deltalake(str(tmp_path / "s" / "items"), table, mode="append", commit_properties=(
        CommitProperties(custom_metadata=stamp.metadata()) if stamp else None),
                    configuration=table_properties(table.schema))  # as Load makes it
    return lake.LakeView(DataSource("lake", "", type="delta", location=str(tmp_path)), "c.p")


def expected(rows: list[dict], where: Target) -> Side:
    side = Side()
    lake.expected(where, [((row["id"],), row) for row in rows], side)
    return side


def test_a_row_hashes_in_the_lake_as_its_source_values_do(tmp_path: Path) -> None:
    rows = [source_row(i) for i in range(1, 31)]
    view = written(tmp_path, rows)
    where = target()
    side = expected(rows, where)
    found = lake.chunk_rows(view, SplitKey("s", "items", ("id",)), Chunk(0, 5, 12), where, side)
    assert sorted(found) == [(i,) for i in range(5, 12)]
    assert all(found[key] == side.expected[key][where.id] for key in found)
    # a value the lake holds otherwise hashes otherwise
    changed = expected([{**rows[6], "t": datetime.timedelta(hours=-7)}], where)
    assert changed.expected[(7,)][where.id] != found[(7,)]
    assert view.position("s", "items") is None  # no commit of setl's


def test_keys_are_matched_in_their_delta_form(tmp_path: Path) -> None:
    """A key whose Delta type differs from the source's value (unsigned BIGINT as a
    decimal, TIME as text) is found by its source value and reported by it."""
    rows = [source_row(i) for i in range(1, 11)]
    written(tmp_path, rows)
    where = target(keys=("big",), range_column="big")
    keys = [(row["big"],) for row in rows[2:5]] + [(7,)]  # the last: in neither
    assert lake.lake_keys(where, keys[:1]) == [(decimal.Decimal(18446744073709551612),)]
    side = Side()
    lake.expected(where, [((row["big"],), row) for row in rows], side)
    view = lake.LakeView(DataSource("lake", "", type="delta", location=str(tmp_path)), "c.p")
    found = lake.key_rows(view, where, side.lookups(where, keys), side)
    assert set(found) == set(keys[:3])
    assert all(found[key] == side.expected[key][where.id] for key in found)
    by_time = target(keys=("t",), range_column="t")
    assert lake.blind(by_time).startswith("its split column t is time in the lake")
    assert lake.blind(where) == ""


def test_the_position_is_setl_s_newest_commit_and_a_null_chunk_reads_nulls(
        tmp_path: Path) -> None:
    at = BinlogPosition("binlog.000002", 4242, "0-1-9", "")
    view = written(tmp_path, [source_row(1)], Stamp("c.p", "run", 1, 3, at))
    written(tmp_path, [{**source_row(2), "name": None}])  # another tool's commit after
    assert view.position("s", "items") == at
    where = target(keys=("name",), range_column="name")
    side = Side()
    found = lake.read(view, where, lake.chunk_filter(SplitKey("s", "items", ("name",)),
                                                     Chunk(9, nulls=True), where),
                      {}, side)
    assert list(found) == [(None,)]


def test_a_key_the_lake_holds_twice_differs_and_repair_deletes_it_first(tmp_path: Path) -> None:
    """A lake holding ids [1, 2, 2] for two source rows, the rows alike: key 2 differs (a
    Delta table has no unique key to keep it once), by its chunk and by its key, and
    repair asks its delete before its copy (a copy alone would update both rows)."""
    from node.verify.repair import requests_for
    from node.verify.settle import Seen, kinds

    rows = [source_row(1), source_row(2)]
    view = written(tmp_path, [*rows, rows[1]])
    where = target()
    side = expected(rows, where)
    found = lake.chunk_rows(view, SplitKey("s", "items", ("id",)), Chunk(0, 1, 3), where, side)
    assert found[(1,)] == side.expected[(1,)][where.id]
    [one] = side.expected[(2,)][where.id]
    assert found[(2,)] == (one, one)  # both rows, alike: not the source's one row
    assert lake.key_rows(view, where, [((2,), (2,))], side) == {(2,): (one, one)}
    seen = {key: Seen(side.signature(key), frozenset({(where.id, found[key])}), True)
            for key in [(2,)]}
    assert kinds(seen[(2,)]) == [("different", where.id)]
    assert requests_for(seen) == [("D", (2,)), ("I", (2,))]
