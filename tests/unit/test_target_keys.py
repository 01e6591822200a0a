"""Whether a MySQL target table has a unique key for rows keyed by the source's key to meet
in (``TableFacts.unkeyed``): one over those columns or fewer, names compared without case."""

from __future__ import annotations

from node.target.mysql.facts import TableFacts
from node.target.mysql.render import Column

COLUMNS = {"ID": Column("int", None), "region": Column("varchar", "utf8mb4")}


def test_a_unique_key_over_the_rows_key_or_fewer_columns_meets_them() -> None:
    assert not TableFacts(COLUMNS, (frozenset({"ID"}),)).unkeyed(("id",))
    assert not TableFacts(COLUMNS, (frozenset({"ID"}),)).unkeyed(("id", "region"))
    assert not TableFacts().unkeyed(("id",))  # a table not known (yet): nothing said


def test_no_unique_key_or_a_wider_one_does_not() -> None:
    assert TableFacts(COLUMNS, ()).unkeyed(("id",))
    assert TableFacts(COLUMNS, (frozenset({"ID", "region"}),)).unkeyed(("id",))
    assert not TableFacts(COLUMNS, ()).unkeyed(())  # a keyless table's rows: by image
