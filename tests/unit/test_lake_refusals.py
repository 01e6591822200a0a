"""What a lake target refuses, and why, before it could hold other rows than the source's:
a foreign key that cascades, text in a charset setl cannot decode."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.changes import Batch, ChangeType, TargetChange, Transaction
from node.target.delta.loader import LakeLoader
from shared.errors import LoadError
from shared.model import BinlogPosition, DataSource, PipelineParams


def loader(location: Path) -> LakeLoader:
    return LakeLoader("c.p", {"lake": DataSource("lake", "", type="delta",
                                                 location=str(location))},
                      PipelineParams(), epoch=1, run="r1")


def ddl_batch(statement: str) -> tuple[Batch, list[TargetChange]]:
    batch = Batch("c.p", 4)
    batch.add(Transaction((), BinlogPosition("bin.000001", 900), 0, 0))
    return batch, [TargetChange("lake", "s", "child", ChangeType.DDL, (), None, None,
                                ddl=statement)]


def test_a_foreign_key_added_with_a_cascade_stops_the_pipeline_saying_what_to_do(
        tmp_path: Path) -> None:
    writer = loader(tmp_path)
    with pytest.raises(LoadError) as stopped:
        writer.load(*ddl_batch("ALTER TABLE child ADD CONSTRAINT fk FOREIGN KEY (pid) "
                               "REFERENCES parent (id) ON DELETE CASCADE"))
    message = str(stopped.value)
    assert message.startswith("pipeline c.p processId 4, position bin.000001:900: the source "
                              "ran 'ALTER TABLE child ADD CONSTRAINT fk")
    assert "on s.child, a foreign key whose ON DELETE or ON UPDATE changes the rows" in message
    assert "Make the key RESTRICT on the source" in message
    assert "setl position set c/p" in message
    assert writer.load(*ddl_batch("ALTER TABLE child ADD CONSTRAINT fk FOREIGN KEY (pid) "
                                  "REFERENCES parent (id) ON DELETE RESTRICT")) == 0
