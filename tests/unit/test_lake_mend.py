"""A key a lake mirror holds twice (another writer's append, a fault): a delete of the key
followed by its row — a free-door ``D`` then ``I`` request, as verify's repair sends them —
leaves exactly one row, in one batch or across batches committed together."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from node.changes import Batch, ChangeType, TargetChange, Transaction
from node.jobs import JobSpec, PartResult
from node.target.delta import units
from node.target.delta.columns import LakeColumn
from node.target.delta.loader import LakeLoader
from node.target.delta.tables import LakeFacts
from shared.model import BinlogPosition, DataSource, PipelineParams

INS, UPD, DEL = ChangeType.INSERT, ChangeType.UPDATE, ChangeType.DELETE
MIRROR = ("lake", "s", "m")
SPEC = JobSpec(1, False, {MIRROR: LakeFacts((LakeColumn("id", "int32"),
                                             LakeColumn("v", "string")), ("id",))},
               target="delta")


def change(kind: ChangeType, seq: int, key: int, value: str | None = None) -> TargetChange:
    after = {"id": key, "v": value} if kind is not DEL else None
    return TargetChange(*MIRROR, kind, ("id",), (key,) if kind is not INS else None, after,
                        seq=seq)


def batch(process_id: int) -> Batch:
    found = Batch("c.p", process_id)
    found.add(Transaction((), BinlogPosition("bin.000001", 100 * process_id), 0, 0))
    return found


def test_a_key_deleted_then_written_in_a_batch_goes_as_its_delete_and_a_fresh_row() -> None:
    [unit] = units.render([change(INS, 0, 1, "a"), change(DEL, 1, 2), change(INS, 2, 2, "b"),
                           change(UPD, 3, 1, "c"), change(DEL, 4, 3)], SPEC)
    assert units.read_ipc(unit.data).to_pylist() == [
        {"id": 1, "v": "c", "_setl_delete": False},
        {"id": 2, "v": None, "_setl_delete": True},
        {"id": 2, "v": "b", "_setl_delete": None},
        {"id": 3, "v": None, "_setl_delete": True}]


def held(location: Path) -> list[tuple[int, str]]:
    rows = DeltaTable(str(location / "s" / "m")).to_pyarrow_table().to_pylist()
    return sorted((row["id"], row["v"]) for row in rows)


def test_a_key_the_lake_holds_twice_is_mended_by_its_delete_and_its_row(
        tmp_path: Path) -> None:
    writer = LakeLoader("c.p", {"lake": DataSource("lake", "", type="delta",
                                                   location=str(tmp_path))},
                        PipelineParams(), epoch=1, run="r1")
    writer.claim()
    first = [change(INS, i, key, "old") for i, key in enumerate((1, 2, 3))]
    writer.load_units(batch(1), [PartResult(units.render(first, SPEC), [], 3)])
    table = DeltaTable(str(tmp_path / "s" / "m"))
    twice = pa.table({"id": pa.array([1, 2, 3], pa.int32()), "v": ["twice"] * 3})
    write_deltalake(table, twice, mode="append")  # another writer than setl
    assert held(tmp_path) == [(1, "old"), (1, "twice"), (2, "old"), (2, "twice"), (3, "old"),
                              (3, "twice")]
    # an update alone updates both rows of a key: it cannot tell them apart
    writer.load_units(batch(2), [PartResult(units.render([change(UPD, 0, 1, "new")], SPEC),
                                            [], 1)])
    # key 2's delete and row in one batch; key 3's in two batches committed together
    writer.load_units(batch(3), [PartResult(units.render(
        [change(DEL, 0, 2), change(INS, 1, 2, "mended")], SPEC), [], 2)])
    assert writer.load_many([
        (batch(4), [PartResult(units.render([change(DEL, 0, 3)], SPEC), [], 1)]),
        (batch(5), [PartResult(units.render([change(INS, 0, 3, "mended")], SPEC), [], 1)]),
    ]) == 2
    assert held(tmp_path) == [(1, "new"), (1, "new"), (2, "mended"), (3, "mended")]
    # deleted again after, across batches: the key is gone
    writer.load_many([
        (batch(6), [PartResult(units.render([change(DEL, 0, 2), change(INS, 1, 2, "x")],
                                            SPEC), [], 2)]),
        (batch(7), [PartResult(units.render([change(DEL, 0, 2)], SPEC), [], 1)])])
    assert held(tmp_path) == [(1, "new"), (1, "new"), (3, "mended")]
