"""Lake tables as made, compacted and stamped again, on real Delta tables in a temporary
directory: compaction every n commits and by hand, the manager's read of a lake's position
and another run, names as directories, partitions, file statistics, the DDL a lake takes."""

from __future__ import annotations

import decimal
from pathlib import Path

import pytest
from deltalake import DeltaTable

from node.jobs import ROW_BITS, JobSpec, PartResult
from node.target.delta import units
from node.target.delta.columns import LakeColumn
from node.target.delta.loader import LakeLoader
from node.target.delta.tables import LakeFacts
from shared.model import BinlogPosition, DataSource, PipelineParams
from tests.unit.lake_helpers import INS, LOG, MIRROR, SPEC, UPD, batch, change, loader, read


def test_a_table_is_compacted_every_n_commits_and_keeps_its_position(tmp_path: Path) -> None:
    writer = LakeLoader("c.p", {"lake": DataSource("lake", "", type="delta",
                                                   location=str(tmp_path))},
                        PipelineParams(lake_compact_every=3, lake_retain_hours=0), epoch=1,
                        run="r1")
    writer.claim()
    for n in range(1, 5):
        done = units.render([change(MIRROR, INS, 0, {"id": n, "v": "a"})], SPEC)
        writer.load_units(batch(n, 100 * n), [PartResult(done, [], 1)])
        assert writer.compactor.wait()  # on a thread of its own: Load does not wait for it
    table = DeltaTable(str(tmp_path / "s" / "m"))
    assert len(table.file_uris()) == 2  # three compacted into one, and the fourth
    # lake_retain_hours 0: never vacuumed (it deleted the three at once), every file stays
    assert len(list((tmp_path / "s" / "m").glob("*.parquet"))) == 5
    assert not any(commit.get("operation") == "VACUUM START" for commit in table.history())
    assert [row["id"] for row in read(tmp_path, "m")] == [1, 2, 3, 4]
    again = loader(tmp_path, epoch=2).claim()
    assert again["lake:s.m"].position.pos == 400


def test_setl_lake_optimize_compacts_every_table_by_hand(tmp_path: Path, capsys) -> None:
    from manager import cli

    writer = loader(tmp_path, epoch=1)
    for n in range(1, 4):
        done = units.render([change(MIRROR, INS, 0, {"id": n, "v": "a"}),
                             change(LOG, INS, 3 << ROW_BITS, {"id": n, "v": "a"})], SPEC)
        writer.load_units(batch(n, 100 * n), [PartResult(done, [], 2)])
    assert cli.main(["lake", "optimize", str(tmp_path), "--retain-hours", "0"]) == 0
    assert "s.m: 3 files compacted into 1" in capsys.readouterr().out
    assert len(DeltaTable(str(tmp_path / "s" / "c")).file_uris()) == 1
    assert cli.main(["lake", "optimize", str(tmp_path), "--table", "s.nope"]) == 1
    assert "has no Delta table s.nope" in capsys.readouterr().err


def test_the_manager_reads_where_a_lake_stands_and_gives_it_another_run(tmp_path: Path) -> None:
    from shared import lakes

    writer = loader(tmp_path, epoch=1)
    both = units.render([change(MIRROR, INS, 0, {"id": 1, "v": "a"}),
                         change(LOG, INS, 3 << ROW_BITS, {"id": 1, "v": "a"})], SPEC)
    writer.load_units(batch(1, 100), [PartResult(both, [], 2)])
    writer.load_units(batch(2, 200), [PartResult(both[:1], [], 1)])
    lake = lakes.Lake(str(tmp_path))
    assert lakes.position_of(lake, "c.p") == (BinlogPosition("bin.000001", 100), 2, 1)
    assert lakes.position_of(lake, "other.p") is None
    assert lakes.restamp(lake, "c.p", "r2", None) == ["s.c", "s.m"]
    claimed = loader(tmp_path, epoch=2).claim()
    assert {row.run for row in claimed.values()} == {"r2"}
    lakes.restamp(lake, "c.p", "r3", BinlogPosition())  # reset: nothing loaded
    assert loader(tmp_path, epoch=3).claim() == {"lake:s.c": None, "lake:s.m": None}


def test_a_writer_still_running_after_a_position_reset_is_fenced_whatever_its_run(
        tmp_path: Path) -> None:
    """A node lost ZooKeeper but not its process (epoch 1, run r1); the operator reset the
    position (another run) and a new owner claimed the pipeline. The old writer's next
    commit is refused (it went through: the fence held within one run only), and so is the
    old writer after a new life's claim alone, without a reset in between."""
    from shared import lakes
    from shared.errors import FencedError

    stale = loader(tmp_path, epoch=1)
    stale.claim()
    first = units.render([change(MIRROR, INS, 0, {"id": 1, "v": "a"})], SPEC)
    stale.load_units(batch(1, 100), [PartResult(first, [], 1)])
    lake = lakes.Lake(str(tmp_path))
    assert lakes.restamp(lake, "c.p", "r2", BinlogPosition()) == ["s.m"]
    version = DeltaTable(str(tmp_path / "s" / "m")).version()
    late = units.render([change(MIRROR, UPD, 0, {"id": 1, "v": "late"}, (1,))], SPEC)
    with pytest.raises(FencedError, match="newer owner"):
        stale.load_units(batch(2, 200), [PartResult(late, [], 1)])
    assert DeltaTable(str(tmp_path / "s" / "m")).version() == version
    fresh = LakeLoader("c.p", stale.targets, PipelineParams(), epoch=5, run="r3")
    fresh.claim()  # a new life (another run) claims above the table's epoch
    old = LakeLoader("c.p", stale.targets, PipelineParams(), epoch=2, run="r2")
    with pytest.raises(FencedError, match="newer owner"):
        old.load_units(batch(2, 200), [PartResult(late, [], 1)])
    assert [row["v"] for row in read(tmp_path, "m")] == ["a"]


@pytest.mark.parametrize("name", ["orders", "a/b", ".hidden", "my db", "t.1", "é", "🙂x",
                                  "a@b", "%_x", "..", "_private"])
def test_every_name_has_one_directory_and_back(name: str) -> None:
    from shared import lakes

    directory = lakes.path_name(name)
    assert "/" not in directory and not directory.startswith(".")
    assert lakes.name_of(directory) == name


def test_a_table_is_made_with_its_pairs_partitions(tmp_path: Path) -> None:
    facts = LakeFacts((LakeColumn("id", "int32"), LakeColumn("region", "string")), ("id",),
                      partition_by=("region",))
    spec = JobSpec(1, False, {MIRROR: facts}, target="delta")
    done = units.render([change(MIRROR, INS, 0, {"id": 1, "region": "eu"}),
                         change(MIRROR, INS, 1, {"id": 2, "region": "us"})], spec)
    loader(tmp_path, epoch=1).load_units(batch(1, 100), [PartResult(done, [], 2)])
    table = DeltaTable(str(tmp_path / "s" / "m"))
    assert table.metadata().partition_columns == ["region"]
    assert sorted(path.name for path in (tmp_path / "s" / "m").iterdir()) == \
        ["_delta_log", "region=eu", "region=us"]


def test_a_filter_finds_decimals_delta_rs_cannot_keep_in_file_statistics(
        tmp_path: Path) -> None:
    """delta-rs writes a decimal's min/max as a 64-bit integer or a float: a reader that
    skips files by them misses BIGINT UNSIGNED above 2^63 and 16-digit decimals. Tables
    setl makes keep no statistics for such columns (and do for the rest)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    facts = LakeFacts((LakeColumn("id", "int32"), LakeColumn("ub", "uint64"),
                       LakeColumn("d", "decimal", 18, 4), LakeColumn("c", "decimal", 10, 2)),
                      ("id",))
    spec = JobSpec(1, False, {MIRROR: facts}, target="delta")
    big, wide = 18446744073709551615, decimal.Decimal("99999999999999.9000")
    done = units.render([change(MIRROR, INS, 0, {"id": 1, "ub": big, "d": wide, "c": 1})], spec)
    loader(tmp_path, epoch=1).load_units(batch(1, 100), [PartResult(done, [], 1)])
    table = DeltaTable(str(tmp_path / "s" / "m"))
    assert table.metadata().configuration["delta.dataSkippingStatsColumns"] == "`id`,`c`"
    data = table.to_pyarrow_dataset()
    for name, value in (("ub", decimal.Decimal(big)), ("d", wide)):
        assert data.to_table(filter=pc.field(name) == pa.scalar(
            value, data.schema.field(name).type)).num_rows == 1, name
    assert data.to_table(filter=pc.field("id") == 2).num_rows == 0


@pytest.mark.parametrize(("ddl", "taken"), [
    ("ALTER TABLE t ADD COLUMN c DECIMAL(10,2)", True),
    ("ALTER TABLE `d`.`t` ADD c INT, ADD COLUMN e ENUM('a,b','c')", True),
    ("ALTER TABLE IF EXISTS d.t ADD INDEX i (a, b)", True),
    ("CREATE TABLE x (a INT)", True),
    ("CREATE INDEX i ON t (a)", True),
    ("ALTER TABLE t DROP COLUMN c", False),
    ("ALTER TABLE t ADD c INT, DROP COLUMN d", False),
    ("ALTER TABLE t MODIFY c BIGINT", False),
    ("DROP TABLE t", False),
    ("TRUNCATE t", False),
    ("RENAME TABLE a TO b", False),
    ("ALTER TABLE a ADD c INT, RENAME TO b", False),
    ("SET STATEMENT lock_wait_timeout=5, sql_mode='' FOR ALTER TABLE t ADD c INT", True),
    ("SET STATEMENT lock_wait_timeout=5 FOR ALTER TABLE t DROP c", False),
    # a foreign key whose action changes rows the binlog never shows
    ("ALTER TABLE c ADD CONSTRAINT fk FOREIGN KEY (p) REFERENCES p (id) ON DELETE CASCADE",
     False),
    ("ALTER TABLE c ADD FOREIGN KEY (p) REFERENCES p (id) ON UPDATE SET NULL", False),
    ("ALTER TABLE c ADD x INT, ADD FOREIGN KEY (x) REFERENCES p (id) ON DELETE SET DEFAULT",
     False),
    ("CREATE TABLE c (p INT, FOREIGN KEY (p) REFERENCES p (id) ON DELETE CASCADE)", False),
    ("ALTER TABLE c ADD FOREIGN KEY (p) REFERENCES p (id) ON DELETE RESTRICT ON UPDATE "
     "NO ACTION", True),
    ("ALTER TABLE c ADD t TIMESTAMP NULL ON UPDATE CURRENT_TIMESTAMP", True),
])
def test_a_lake_takes_new_tables_columns_and_indexes_only(ddl: str, taken: bool) -> None:
    from node.target.delta.ddl import taken as takes

    assert takes(ddl) is taken
