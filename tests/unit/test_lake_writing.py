"""How Load writes a lake's files and in what order it commits a batch's tables
(node.target.delta.loader, shared.lakes.writer_properties), on real Delta tables in a
temporary directory."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from node.jobs import ROW_BITS, PartResult
from node.target.delta import loader as lake_loader
from node.target.delta import units
from shared import lakes
from tests.unit.lake_helpers import INS, LOG, MIRROR, SPEC, UPD, batch, change, loader, read
from tests.unit.test_lake_compaction import stream, writer


def codecs(location: Path, name: str) -> set[str]:
    """The compression of every column chunk of the files a table's version names."""
    found = set()
    for uri in DeltaTable(str(location / "s" / name)).file_uris():
        meta = pq.ParquetFile(uri).metadata
        found |= {meta.row_group(group).column(column).compression
                  for group in range(meta.num_row_groups) for column in range(meta.num_columns)}
    return found


def test_appends_merges_and_compactions_write_zstd_files(tmp_path: Path) -> None:
    """A mirror's appends and its MERGE's rewrites, a change log's appends, and the tables
    compacted (beside Load, and by ``lakes.maintain``: the command's) are ZSTD, holding
    the rows."""
    lake = writer(tmp_path, every=3, retain=0)
    stream(lake, 1, 7)  # updates of key 1 (MERGEs), new keys, a change logged each
    assert lake.compactor.wait()
    lake.close()
    operations = {name: {commit["operation"] for commit in
                         DeltaTable(str(tmp_path / "s" / name)).history()}
                  for name in ("m", "c")}
    assert {"WRITE", "MERGE"} <= operations["m"] and "OPTIMIZE" in operations["c"]
    assert codecs(tmp_path, "m") == codecs(tmp_path, "c") == {"ZSTD"}
    lake = writer(tmp_path, every=0, retain=0)  # a change log's small files, not compacted
    stream(lake, 8, 10)
    lake.close()
    done = lakes.maintain(DeltaTable(str(tmp_path / "s" / "c")), None)
    assert done["numFilesRemoved"] >= 2 and codecs(tmp_path, "c") == {"ZSTD"}
    assert [(row["id"], row["v"]) for row in read(tmp_path, "m")] == \
        [(1, "v10"), *((100 + n, "a") for n in range(1, 11))]
    assert [row["id"] for row in read(tmp_path, "c")] == list(range(1, 11))


def test_a_batchs_smallest_tables_are_committed_first(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """With fewer commit threads than tables, a table of a few rows does not wait behind a
    mirror's MERGE: its commit is made first, whatever the tables' order in the batch."""
    monkeypatch.setattr(lake_loader, "COMMIT_THREADS", 1)
    into = loader(tmp_path, epoch=1)
    into.claim()
    first = [change(MIRROR, INS, n, {"id": n, "v": "a" * 100}) for n in range(2000)]
    first.append(change(LOG, INS, 3 << ROW_BITS, {"id": 1, "v": "l"}))
    into.load_units(batch(1, 100), [PartResult(units.render(first, SPEC), [], len(first))])
    # the mirror's changes come first in the batch, and are the larger by far
    second = [change(MIRROR, UPD, n, {"id": n, "v": "b"}, (n,)) for n in range(0, 2000, 2)]
    second.append(change(LOG, INS, 3 << ROW_BITS, {"id": 2, "v": "l"}))
    into.load_units(batch(2, 200), [PartResult(units.render(second, SPEC), [], len(second))])
    into.close()
    made = {name: DeltaTable(str(tmp_path / "s" / name)).history(1)[0]
            for name in ("m", "c")}
    assert made["m"]["operation"] == "MERGE" and made["c"]["operation"] == "WRITE"
    assert made["c"]["timestamp"] < made["m"]["timestamp"]
    assert [row["id"] for row in read(tmp_path, "c")] == [1, 2]
    assert [row["v"] for row in read(tmp_path, "m")][:3] == ["b", "a" * 100, "b"]
