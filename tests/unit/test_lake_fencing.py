"""A lake table's commits checked against its newest stamp on the version each is made on
(node.target.delta.commits), on real Delta tables in a temporary directory: an old owner
never commits after a newer one's fence or commit, on a table it read again or one made
after the claim; a batch the table holds already is never written again."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from node.changes import Batch, Transaction
from node.jobs import PartResult
from node.target.delta import units
from node.target.delta.loader import LakeLoader
from shared.errors import FencedError, LoadError
from shared.lakes import PREFIX
from shared.model import BinlogPosition
from tests.unit.test_lake import INS, LOG, MIRROR, SPEC, UPD, batch, change, loader, read


def update(value: str) -> list[PartResult]:
    done = units.render([change(MIRROR, UPD, 0, {"id": 1, "v": value}, before_key=(1,))], SPEC)
    return [PartResult(done, [], 1)]


def stamps(location: Path, name: str) -> list[tuple[str, str]]:
    """Each commit's (epoch, position) of setl's, newest first."""
    return [(commit[PREFIX + "epoch"], commit[PREFIX + "position"]) for commit in
            DeltaTable(str(location / "s" / name)).history() if PREFIX + "position" in commit]


def owners(location: Path) -> tuple[LakeLoader, LakeLoader]:
    """An old owner (epoch 3) that loaded a first batch, and the new one (epoch 4), both
    claimed."""
    old = loader(location, epoch=3)
    old.claim()
    first = units.render([change(MIRROR, INS, 0, {"id": 1, "v": "v1"})], SPEC)
    old.load_units(batch(1, 100), [PartResult(first, [], 1)])
    new = loader(location, epoch=4)
    new.claim()
    return old, new


def test_an_old_owner_that_read_the_table_again_is_fenced(tmp_path: Path) -> None:
    """The reviewer's first case: a compaction made the old owner read the table again,
    then its commit, free of conflicts on that version, put a row back to an older value."""
    old, new = owners(tmp_path)
    new.load_units(batch(2, 200), update("v2"))
    new.load_units(batch(3, 300), update("v3"))
    old.compactor._done.add("lake:s.m")  # its compaction beside Load ended: read again
    with pytest.raises(FencedError, match=r"epoch 4 > 3"):
        old.load_units(batch(2, 200), update("v2-old"))
    assert read(tmp_path, "m") == [{"id": 1, "v": "v3"}]
    assert stamps(tmp_path, "m")[0] == ("4", '{"file": "bin.000001", "pos": 300, '
                                              '"gtid": "", "server": ""}')


def test_an_old_owner_is_fenced_from_a_table_made_after_the_claim(tmp_path: Path) -> None:
    """The reviewer's second case: a change log's first rows, after the new owner's claim:
    both owners appended them."""
    old, new = owners(tmp_path)
    logged = units.render([change(LOG, INS, 0, {"id": 5, "v": "a"})], SPEC)
    new.load_units(batch(2, 200), [PartResult(logged, [], 1)])
    with pytest.raises(FencedError, match=r"lake:s.c .*epoch 4 > 3"):
        old.load_units(batch(2, 200), [PartResult(logged, [], 1)])
    assert [row["id"] for row in read(tmp_path, "c")] == [5]


def test_a_commit_after_a_newer_owners_fence_is_refused(tmp_path: Path) -> None:
    old = loader(tmp_path, epoch=3)
    old.claim()
    first = units.render([change(MIRROR, INS, 0, {"id": 1, "v": "v1"})], SPEC)
    old.load_units(batch(1, 100), [PartResult(first, [], 1)])
    loader(tmp_path, epoch=4).claim()  # the fence only: nothing written yet
    versions = DeltaTable(str(tmp_path / "s" / "m")).version()
    with pytest.raises(FencedError):
        old.load_units(batch(2, 200), update("v2-old"))
    assert DeltaTable(str(tmp_path / "s" / "m")).version() == versions
    assert read(tmp_path, "m") == [{"id": 1, "v": "v1"}]


def test_a_table_made_and_not_written_is_fenced_at_the_claim(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table's making carries its owner's stamp (no position): a newer owner's claim
    fences it, so the old owner's first rows after the claim are refused."""
    from node.target.delta import writes as lake_writes

    def stalled(*args: object) -> None:
        raise OSError("the old owner stalled after making the table")

    old = loader(tmp_path, epoch=3)
    first = [PartResult(units.render([change(MIRROR, INS, 0, {"id": 1, "v": "v1"})], SPEC),
                        [], 1)]
    with monkeypatch.context() as patched:
        patched.setattr(lake_writes, "append", stalled)
        with pytest.raises(LoadError, match="stalled"):
            old.load_units(batch(1, 100), first)
    assert DeltaTable(str(tmp_path / "s" / "m")).version() == 0  # made, nothing written
    assert loader(tmp_path, epoch=4).claim() == {"lake:s.m": None}  # nothing loaded there
    with pytest.raises(FencedError):
        old.load_units(batch(1, 100), first)
    assert read(tmp_path, "m") == []


@pytest.mark.parametrize("behind", [300, 200])
def test_a_batch_the_table_holds_is_skipped_not_written(tmp_path: Path, behind: int) -> None:
    """A batch at or behind the table's stamp (a commit this owner made and lost the answer
    of; an older owner's made before the fence) is not written: a row never goes back."""
    writer = loader(tmp_path, epoch=1)
    first = units.render([change(MIRROR, INS, 0, {"id": 1, "v": "v1"})], SPEC)
    writer.load_units(batch(1, 100), [PartResult(first, [], 1)])
    writer.load_units(batch(3, 300), update("v3"))
    version = DeltaTable(str(tmp_path / "s" / "m")).version()
    again = loader(tmp_path, epoch=1)  # knows nothing of what the table holds
    again.load_units(batch(2, behind), update("older"))
    assert read(tmp_path, "m") == [{"id": 1, "v": "v3"}]
    assert DeltaTable(str(tmp_path / "s" / "m")).version() == version
    again.load_units(batch(4, 400), update("v4"))  # a batch past it is written
    assert read(tmp_path, "m") == [{"id": 1, "v": "v4"}]


def span(process_id: int, start: int, end: int) -> Batch:
    """Batch ``process_id``: one transaction ending at ``end``, read from ``start``."""
    return Batch("c.p", process_id, [Transaction((), BinlogPosition("bin.000001", end), 0, 0)],
                 start=BinlogPosition("bin.000001", start))


def inserted(target: tuple[str, str, str], id_: int, seq: int) -> list[PartResult]:
    return [PartResult(units.render([change(target, INS, seq, {"id": id_, "v": "a"})], SPEC),
                       [], 1)]


def ids(location: Path, name: str) -> list[int]:
    return [row["id"] for row in read(location, name)]


@pytest.mark.parametrize("late", [LOG, MIRROR], ids=["changelog", "mirror"])
def test_a_table_an_old_owner_made_after_the_claim_is_never_written_twice(
        tmp_path: Path, late: tuple[str, str, str]) -> None:
    """The old owner makes a table the new owner's claim did not see (so Select did not cut
    at its position) and writes a batch there; the new owner's batches straddling that
    position stop the load, and its retry claims the table (fencing the old owner) and
    writes only what the table lacks: each transaction once."""
    early = MIRROR if late == LOG else LOG
    old = loader(tmp_path, epoch=3)
    old.claim()
    old.load_units(span(1, 0, 100), inserted(early, 1, 0))
    new = loader(tmp_path, epoch=4)
    assert list(new.claim()) == [f"lake:s.{early[2]}"]
    old.load_units(span(2, 100, 200), inserted(late, 5, 0))  # not fenced: made now
    with pytest.raises(LoadError, match=r"lake:s\.. holds .* up to bin\.000001:200 .*inside"):
        new.load_many([(span(2, 100, 200), inserted(late, 5, 0)),
                       (span(3, 200, 300), inserted(late, 6, 3))])
    assert ids(tmp_path, late[2]) == [5]
    again = loader(tmp_path, epoch=4)  # the retry: claimed again, cut at the table's place
    held = again.claim()[f"lake:s.{late[2]}"]
    assert held is not None and held.position.pos == 200
    again.load_units(span(2, 100, 200), inserted(late, 5, 0))
    again.load_units(span(3, 200, 300), inserted(late, 6, 3))
    assert ids(tmp_path, late[2]) == [5, 6]
    with pytest.raises(FencedError, match=r"epoch 4 > 3"):
        old.load_units(span(3, 200, 300), inserted(late, 6, 3))
    assert ids(tmp_path, late[2]) == [5, 6]


def test_a_table_an_old_owner_wrote_past_the_new_owners_batch_is_fenced(
        tmp_path: Path) -> None:
    """The old owner made a table after the new owner's claim and wrote it past the new
    owner's next batch: that batch is left out there, and the table is fenced then, so the
    old owner's next commit to it is refused."""
    old, new = owners(tmp_path)
    old.load_units(span(2, 100, 200), inserted(LOG, 5, 0))
    old.load_units(span(3, 200, 300), inserted(LOG, 6, 3))
    new.load_units(span(2, 100, 200), inserted(LOG, 5, 0))  # held there: nothing written
    assert ids(tmp_path, "c") == [5, 6]
    with pytest.raises(FencedError, match=r"lake:s.c .*epoch 4 > 3"):
        old.load_units(span(4, 300, 400), inserted(LOG, 7, 0))
    new.load_units(span(3, 200, 300), inserted(LOG, 6, 3))
    new.load_units(span(4, 300, 400), inserted(LOG, 7, 0))
    assert ids(tmp_path, "c") == [5, 6, 7]
