"""A streamed lake table compacted on a thread beside Load (node.target.delta.compaction), on
real Delta tables in a temporary directory: no row lost or doubled, no file a version names
deleted, the position kept; a compaction that failed is made by Load the next time."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from node.jobs import PartResult
from node.target.delta import units
from node.target.delta.compaction import Compactor
from node.target.delta.loader import LakeLoader
from shared import lakes
from shared.lakes import PREFIX
from shared.model import DataSource, PipelineParams
from tests.unit.test_lake import INS, LOG, MIRROR, SPEC, UPD, batch, change, loader, read


@pytest.fixture(autouse=True)
def vacuum_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Removed files deleted at once (as a retention of 0 hours would), not an hour after:
    these tests look at what vacuum beside a stream deletes. Never a full vacuum, which at
    once would delete a file Load is writing (the node's waits an hour)."""
    made = lakes.vacuum

    def at_once(table: object, hours: int, properties: object = None,
                full: bool = False) -> list[str]:
        return made(table, 0, properties)
    monkeypatch.setattr(lakes, "vacuum", at_once)


def writer(location: Path, every: int, retain: int = 1) -> LakeLoader:
    found = LakeLoader("c.p", {"lake": DataSource("lake", "", type="delta",
                                                  location=str(location))},
                       PipelineParams(lake_compact_every=every, lake_retain_hours=retain),
                       epoch=1, run="r1")
    found.claim()
    return found


def stream(into: LakeLoader, first: int, last: int) -> None:
    """A batch each: key 1 updated (a MERGE rewrites its file), a new key, a change logged."""
    for n in range(first, last + 1):
        done = units.render([
            change(MIRROR, INS, 0, {"id": 1, "v": "v1"}) if n == 1 else
            change(MIRROR, UPD, 0, {"id": 1, "v": f"v{n}"}, (1,)),
            change(MIRROR, INS, 1, {"id": 100 + n, "v": "a"}),
            change(LOG, INS, 2, {"id": n, "v": "l"})], SPEC)
        into.load_units(batch(n, 100 * n), [PartResult(done, [], 1)])


def test_compactions_beside_a_stream_keep_every_row_file_and_position(tmp_path: Path) -> None:
    lake = writer(tmp_path, every=2)
    stream(lake, 1, 40)
    assert lake.compactor.wait()
    for name in ("m", "c"):
        table = DeltaTable(str(tmp_path / "s" / name))
        named = {Path(uri).name for uri in table.file_uris()}
        on_disk = {path.name for path in (tmp_path / "s" / name).glob("*.parquet")}
        assert named <= on_disk  # vacuum deleted no file the table's version reads
        assert len(on_disk) < 20  # 40 commits wrote a file each: compacted, vacuumed
    # the mirror's MERGEs rewrite its one file; the change log's appends are compacted
    log = DeltaTable(str(tmp_path / "s" / "c"))
    assert any(commit.get("operation") == "OPTIMIZE" for commit in log.history())
    assert len(log.file_uris()) < 20
    assert read(tmp_path, "m") == [{"id": 1, "v": "v40"},
                                   *({"id": 100 + n, "v": "a"} for n in range(1, 41))]
    assert [row["id"] for row in read(tmp_path, "c")] == list(range(1, 41))
    lake.close()
    again = loader(tmp_path, epoch=2).claim()  # the position: the last batch's, per table
    assert {key: cursor.position.pos for key, cursor in again.items()} == {
        "lake:s.m": 4000, "lake:s.c": 4000}


def test_a_compaction_that_failed_is_made_by_load_the_next_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = Compactor._compact
    failures = [OSError("the compaction lost to a MERGE")]  # (delta-rs' conflict, once)

    def failing_once(self: Compactor, key: str, table: object) -> None:
        if failures and key == "lake:s.c":
            raise failures.pop()
        made(self, key, table)
    monkeypatch.setattr(Compactor, "_compact", failing_once)
    lake = writer(tmp_path, every=3)
    stream(lake, 1, 3)  # the third commit asks for a compaction; it fails
    assert lake.compactor.wait() and not failures
    assert len(DeltaTable(str(tmp_path / "s" / "c")).file_uris()) == 3
    stream(lake, 4, 6)  # the sixth: Load compacts the table itself, in its own path
    table = DeltaTable(str(tmp_path / "s" / "c"))
    assert len(table.file_uris()) == 1
    newest = table.history(3)
    assert any(commit.get("operation") == "OPTIMIZE" and PREFIX + "position" in commit
               for commit in newest)  # a commit of Load's carries the position
    assert [row["id"] for row in read(tmp_path, "c")] == list(range(1, 7))
    lake.close()


def test_a_compaction_that_read_a_file_a_merge_rewrote_gives_way(tmp_path: Path) -> None:
    """The compaction reads the table, a batch's MERGE then rewrites one of its files: the
    compaction must not commit (it would bring the old rows back); Load compacts next time."""
    lake = writer(tmp_path, every=0)  # compactions asked by hand here
    for n in range(1, 5):  # four files of two keys each
        done = units.render([change(MIRROR, INS, 0, {"id": 10 * n + 1, "v": "a"}),
                             change(MIRROR, INS, 1, {"id": 10 * n + 2, "v": "a"})], SPEC)
        lake.load_units(batch(n, 100 * n), [PartResult(done, [], 1)])
    read_before = DeltaTable(str(tmp_path / "s" / "m"))  # what the compaction packs
    done = units.render([change(MIRROR, UPD, 0, {"id": 11, "v": "new"}, (11,))], SPEC)
    lake.load_units(batch(5, 500), [PartResult(done, [], 1)])
    lake.compactor.ask("lake:s.m", lambda: read_before)
    assert lake.compactor.wait()
    assert lake.compactor.lost("lake:s.m")
    table = DeltaTable(str(tmp_path / "s" / "m"))
    assert not any(commit.get("operation") == "OPTIMIZE" for commit in table.history())
    assert read(tmp_path, "m") == [{"id": 10 * n + k, "v": "new" if (n, k) == (1, 1) else "a"}
                                   for n in range(1, 5) for k in (1, 2)]
    lake.close()
