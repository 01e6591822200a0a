"""A copy (or a free-door read) of a table checks the table's columns against its pairs as a
table map's are (:meth:`node.extract.etl.CompiledPipeline.layout_problem`): a table that had
a column of a rename's target name from the start was copied with one value over the other."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from node.extract.chunks import SplitKey, chunks_of
from node.extract.reads import ReadColumn
from node.snapshot import windowreads
from node.snapshot.controller import Snapshots
from node.snapshot.state import TableCopy
from node.snapshot.windowreads import Work
from shared.errors import ConfigError
from shared.model import PipelineParams
from tests.unit.test_etl import compiled
from tests.unit.test_layout_checks import RENAMED


@contextlib.contextmanager
def connection(source: Any) -> Iterator[Any]:
    class Conn:
        def cursor(self) -> Any:
            return contextlib.nullcontext(None)

    yield Conn()


def test_a_copy_of_a_table_whose_columns_meet_a_rename_stops(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(windowreads, "connect", connection)
    monkeypatch.setattr(windowreads, "columns_of", lambda cursor, schema, table: tuple(
        ReadColumn(name, "int") for name in ("id", "a", "x")))
    snapshots = Snapshots("shop.fwd", None, compiled(RENAMED), PipelineParams(),  # type: ignore[arg-type]
                          None, None, None)  # type: ignore[arg-type]
    copy = TableCopy("shop.t@1", "shop", "t", "", SplitKey("shop", "t", ("id",), "int"),
                     list(chunks_of([10])), 10)
    with pytest.raises(ConfigError, match=r"\(a and x → x\)"):
        snapshots._reads.task(1, Work(copy=copy, chunk=copy.chunks[0]))
