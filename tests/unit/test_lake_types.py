"""A lake column whose source column changed type (ALTER TABLE … MODIFY without ddl_sync):
a Delta column keeps its type and delta-rs casts what it writes into it, so values that
would change stop the batch, naming the column and both types; values that fit land as
they are."""

from __future__ import annotations

import decimal
import re
from pathlib import Path

import pytest
from deltalake import DeltaTable

from node.changes import Batch, ChangeType, TargetChange, Transaction
from node.jobs import ROW_BITS, JobSpec, PartResult
from node.target.delta import units
from node.target.delta.columns import LakeColumn, arrow_type
from node.target.delta.loader import LakeLoader
from node.target.delta.tables import LakeFacts
from shared.errors import LoadError
from shared.model import BinlogPosition, DataSource, PipelineParams

MIRROR, LOG = ("lake", "s", "m"), ("lake", "s", "c")


class Lake:
    """One lake table written batch by batch, each with the column's type of its time."""

    def __init__(self, location: Path, target: tuple[str, str, str] = MIRROR) -> None:
        self.location, self.target, self.batches = location, target, 0
        self.writer = LakeLoader("c.p", {"lake": DataSource("lake", "", type="delta",
                                                            location=str(location))},
                                 PipelineParams(), epoch=1, run="r1")
        self.writer.claim()

    def write(self, column: LakeColumn, *values: object) -> None:
        self.batches += 1
        mode = "changelog" if self.target == LOG else "mirror"
        facts = LakeFacts((LakeColumn("id", "int32"), column),
                          ("id",) if mode == "mirror" else (), mode)
        changes = [TargetChange(*self.target, ChangeType.INSERT,
                                ("id",) if mode == "mirror" else (), None,
                                {"id": self.batches * 10 + i, column.name: value},
                                seq=(self.batches << ROW_BITS) + i)
                   for i, value in enumerate(values)]
        batch = Batch("c.p", self.batches)
        batch.add(Transaction((), BinlogPosition("bin.000001", 100 * self.batches), 0, 0))
        done = units.render(changes, JobSpec(self.batches, False, {self.target: facts},
                                             target="delta"))
        self.writer.load_units(batch, [PartResult(done, [], len(changes))])

    def values(self) -> list[object]:
        found = DeltaTable(str(self.location / "s" / self.target[2])).to_pyarrow_table()
        return [row["n"] for row in found.sort_by("id").to_pylist()]


def test_a_double_into_an_integer_column_stops_the_batch_saying_what_to_do(
        tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    lake.write(LakeColumn("n", "int32"), 5)
    with pytest.raises(LoadError) as stopped:
        lake.write(LakeColumn("n", "float64"), 6.75)
    assert str(stopped.value).startswith(
        "pipeline c.p processId 2, position bin.000001:200, lake table lake:s.m: column n is "
        "int32 in the lake table, and the source gives double now (its type changed on the "
        "source). A Delta column keeps its type")
    assert "columns: {exclude: [n]}" in str(stopped.value)
    assert lake.values() == [5]  # 6.75 never landed as 6


@pytest.mark.parametrize(("held", "values", "found", "fits", "refused"), [
    (LakeColumn("n", "int32"), [5], LakeColumn("n", "int64"), [7], 2**40),  # INT → BIGINT
    (LakeColumn("n", "int64"), [5], LakeColumn("n", "int16"), [-7], None),  # narrowed
    (LakeColumn("n", "decimal", 10, 2), [decimal.Decimal("1.25")],
     LakeColumn("n", "decimal", 12, 4), [decimal.Decimal("2.5000")], decimal.Decimal("2.5001")),
    (LakeColumn("n", "float64"), [1.5], LakeColumn("n", "float32"), [0.25], None),
    (LakeColumn("n", "float32"), [1.5], LakeColumn("n", "float64"), [], 0.25),  # rounded
    (LakeColumn("n", "string"), ["a"], LakeColumn("n", "binary"), [], b"b"),
    (LakeColumn("n", "datetime"), [None], LakeColumn("n", "timestamp"), [], None),
])
def test_values_land_where_the_lake_s_type_holds_them_exactly(
        tmp_path: Path, held: LakeColumn, values: list, found: LakeColumn, fits: list,
        refused: object) -> None:
    for target in (MIRROR, LOG):  # (a change log's before image is a struct of the row)
        lake = Lake(tmp_path / target[2], target)
        lake.write(held, *values)
        if fits:
            lake.write(found, *fits)
        assert lake.values() == [*values, *fits]
        if refused is not None or not fits:
            lake_type = re.escape(str(arrow_type(held)))
            with pytest.raises(LoadError, match=f"column n is {lake_type} in the lake table"):
                lake.write(found, refused)
            assert lake.values() == [*values, *fits]

