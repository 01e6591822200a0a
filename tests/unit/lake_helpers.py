"""A Delta target's tables for the tests of node/target/delta: a mirror and a change log of
(id, v) in a temporary directory, their job spec, a change, a batch, a loader, the rows read
back."""

from __future__ import annotations

from pathlib import Path

from deltalake import DeltaTable

from node.changes import Batch, ChangeType, TargetChange, Transaction
from node.jobs import JobSpec
from node.target.delta.columns import LakeColumn
from node.target.delta.loader import LakeLoader
from node.target.delta.tables import LakeFacts
from shared.model import BinlogPosition, DataSource, PipelineParams

INS, UPD, DEL = ChangeType.INSERT, ChangeType.UPDATE, ChangeType.DELETE
MIRROR, LOG = ("lake", "s", "m"), ("lake", "s", "c")
COLUMNS = (LakeColumn("id", "int32"), LakeColumn("v", "string"))
SPEC = JobSpec(7, False, {MIRROR: LakeFacts(COLUMNS, ("id",)),
                          LOG: LakeFacts(COLUMNS, (), "changelog")}, target="delta",
               transactions=((0, "bin.000001:100", "0-1-5", 1_700_000_000_000),
                             (3, "bin.000001:200", "0-1-6", 1_700_000_001_000)))


def change(target: tuple[str, str, str], kind: ChangeType, seq: int, after: dict | None = None,
           before_key: tuple | None = None, before: dict | None = None) -> TargetChange:
    keys = ("id",) if target == MIRROR else ()
    return TargetChange(*target, kind, keys, before_key, after, seq=seq, before=before)


def batch(process_id: int, pos: int) -> Batch:
    found = Batch("c.p", process_id)
    found.add(Transaction((), BinlogPosition("bin.000001", pos), 0, 0))
    return found


def loader(location: Path, epoch: int) -> LakeLoader:
    return LakeLoader("c.p", {"lake": DataSource("lake", "", type="delta",
                                                 location=str(location))},
                      PipelineParams(), epoch=epoch, run="r1")


def read(location: Path, name: str) -> list[dict]:
    return DeltaTable(str(location / "s" / name)).to_pyarrow_table().sort_by("id").to_pylist()
