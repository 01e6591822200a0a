"""The Delta target's two sides on real Delta tables in a temporary directory: the worker's
Arrow (mirror merge rules, changelog order), and the loader's commits (position read back,
fencing, a replayed batch skipped per table)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
from pathlib import Path

import pytest
from deltalake import DeltaTable

from node.changes import Batch, ChangeType, TargetChange, Transaction
from node.extract import job
from node.jobs import JobSpec, PartResult
from node.target.delta import units
from node.target.delta.columns import LakeColumn, TextColumn, of_text, time_text
from node.target.delta.loader import LakeLoader
from node.target.delta.tables import LakeFacts
from shared.errors import ConfigError, FencedError, LoadError
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


def test_mirror_merges_each_key_to_its_last_image_or_its_delete() -> None:
    changes = [change(MIRROR, INS, 0, {"id": 1, "v": "a"}),
               change(MIRROR, UPD, 1, {"id": 1, "v": "b"}, (1,)),
               change(MIRROR, INS, 2, {"id": 2, "v": "x"}),
               change(MIRROR, UPD, 3, {"id": 3, "v": "x"}, (2,)),  # a key change
               change(MIRROR, DEL, 4, None, (5,))]
    [unit] = units.render(changes, SPEC)
    rows = units.read_ipc(unit.data).to_pylist()
    assert rows == [{"id": 1, "v": "b", "_setl_delete": False},
                    {"id": 2, "v": None, "_setl_delete": True},
                    {"id": 3, "v": "x", "_setl_delete": False},
                    {"id": 5, "v": None, "_setl_delete": True}]


def test_changelog_keeps_every_change_with_its_transaction() -> None:
    changes = [change(LOG, INS, 1 << 20, {"id": 1, "v": "x"}),
               change(LOG, INS, 3 << 20, {"id": 1, "v": "x"}),
               change(LOG, DEL, (4 << 20) + 1, None, before={"id": 1, "v": "x"})]
    [unit] = units.render(changes, SPEC)
    rows = units.read_ipc(unit.data).to_pylist()
    assert [(r["_setl_op"], r["_setl_txn"], r["_setl_gtid"], r["id"], r["_setl_before"])
            for r in rows] == [("I", "bin.000001:100", "0-1-5", 1, None),
                               ("I", "bin.000001:200", "0-1-6", 1, None),
                               ("D", "bin.000001:200", "0-1-6", 1, {"id": 1, "v": "x"})]
    assert rows[1]["_setl_seq"] < rows[2]["_setl_seq"]
    assert rows[2]["_setl_commit_ts"] == datetime.datetime(2023, 11, 14, 22, 13, 21,
                                                           tzinfo=datetime.UTC)


def test_changelog_of_inserts_only_names_each_ones_transaction_and_order() -> None:
    changes = [change(LOG, INS, (1 << 20) + i, {"id": i, "v": b"caf\xc3\xa9"}) for i in range(2)]
    changes += [change(LOG, INS, (5 << 20) + 7, {"id": 9, "v": None})]
    [unit] = units.render(changes, SPEC)
    rows = units.read_ipc(unit.data).to_pylist()
    assert [(r["_setl_txn"], r["_setl_seq"], r["id"], r["v"], r["_setl_before"])
            for r in rows] == [("bin.000001:100", (1 << 20), 0, "café", None),
                               ("bin.000001:100", (1 << 20) + 1, 1, "café", None),
                               ("bin.000001:200", (2 << 20) + 7, 9, None, None)]
    [unit] = units.render(changes, dataclasses.replace(SPEC, transactions=()))
    assert {(r["_setl_txn"], r["_setl_gtid"], r["_setl_commit_ts"])  # none known
            for r in units.read_ipc(unit.data).to_pylist()} == {("", "", None)}


def test_a_window_read_opening_a_batch_is_labelled_by_a_transaction_of_it() -> None:
    """A delete asked in a watermark window that opens its batch goes before the batch's
    first event: it was labelled with no transaction ('' position, which a reader ordering
    by position cannot place). It is the first one's, in front of its changes; and a batch
    whose only content is the window's reads (a quiet source) labels them with its end."""
    changes = [change(LOG, DEL, -1, None, before={"id": 1, "v": "x"}),
               change(LOG, INS, 1 << 19, {"id": 1, "v": "y"})]
    [unit] = units.render(changes, SPEC)
    rows = units.read_ipc(unit.data).to_pylist()
    assert [(r["_setl_op"], r["_setl_txn"], r["_setl_seq"]) for r in rows] == [
        ("D", "bin.000001:100", -1), ("I", "bin.000001:100", 1 << 19)]
    quiet = Batch("c.p", 3, start=BinlogPosition("bin.000001", 300))
    quiet.add(Transaction((), BinlogPosition("bin.000001", 400, "0-1-9"), 1_700_000_002_000,
                          0))  # the window's watermarks: no change of the pipeline's
    assert job.transactions(quiet) == ((0, "bin.000001:400", "0-1-9", 1_700_000_002_000),)
    [unit] = units.render(changes, dataclasses.replace(SPEC,
                                                       transactions=job.transactions(quiet)))
    assert {r["_setl_txn"] for r in units.read_ipc(unit.data).to_pylist()} == {"bin.000001:400"}


def test_a_zero_date_stops_with_the_column_and_what_to_do() -> None:
    facts = LakeFacts((LakeColumn("id", "int32"), LakeColumn("d", "date")), ("id",))
    spec = JobSpec(1, False, {MIRROR: facts}, target="delta")
    with pytest.raises(LoadError, match=r"column d: the source holds '0000-00-00', a zero "):
        units.render([change(MIRROR, INS, 0, {"id": 1, "d": "0000-00-00"})], spec)


def test_times_read_as_mysql_shows_them() -> None:
    assert time_text(datetime.timedelta(hours=-838, minutes=-59, seconds=-58.5), 1) == \
        "-838:59:58.5"
    assert time_text(datetime.timedelta(0), 0) == "00:00:00"
    assert time_text(datetime.timedelta(seconds=1, microseconds=5), 6) == "00:00:01.000005"


def test_types_without_a_delta_twin_keep_every_digit() -> None:
    facts = LakeFacts((LakeColumn("id", "int32"), LakeColumn("u", "uint64"),
                       LakeColumn("w", "decimal_text", 65, 30)), ("id",))
    spec = JobSpec(1, False, {MIRROR: facts}, target="delta")
    wide = decimal.Decimal("-" + "1" * 35 + "." + "9" * 30)
    [unit] = units.render([change(MIRROR, INS, 0, {"id": 1, "u": 2**64 - 1, "w": wide})], spec)
    row = units.read_ipc(unit.data).to_pylist()[0]
    assert (row["u"], row["w"]) == (decimal.Decimal(2**64 - 1), format(wide, "f"))


def test_a_new_owner_fences_the_old_and_a_replay_writes_only_what_a_table_lacks(
        tmp_path: Path) -> None:
    first = loader(tmp_path, epoch=3)
    assert first.claim() == {}
    done = units.render([change(MIRROR, INS, 0, {"id": 1, "v": "a"}),
                         change(LOG, INS, 3 << 20, {"id": 1, "v": "a"})], SPEC)
    assert first.load_units(batch(7, 300), [PartResult(done, [], 2)]) == 2
    # the next batch reaches the mirror, then the node dies before the changelog's commit
    later = units.render([change(MIRROR, INS, 0, {"id": 2, "v": "b"}),
                          change(LOG, INS, 3 << 20, {"id": 2, "v": "b"})], SPEC)
    first.load_units(batch(8, 400), [PartResult(later[:1], [], 1)])
    second = loader(tmp_path, epoch=4)
    claimed = second.claim()
    assert {name: (row.position.pos, row.process_id) for name, row in claimed.items()} == \
        {"lake:s.c": (300, 7), "lake:s.m": (400, 8)}
    with pytest.raises(FencedError, match="newer owner"):  # the old owner wakes: fenced
        first.load_units(batch(9, 500), [PartResult(later[:1], [], 1)])
    # the batch again (Select cut it at the mirror's position): only the changelog lacks it
    assert second.load_units(batch(8, 400), [PartResult(later, [], 2)]) == 1
    assert second.load_units(batch(8, 400), [PartResult(later, [], 2)]) == 0
    assert [row["id"] for row in read(tmp_path, "m")] == [1, 2]
    assert [row["id"] for row in read(tmp_path, "c")] == [1, 2]
    assert DeltaTable(str(tmp_path / "s" / "m")).transaction_version("setl:c.p") == 8


@pytest.mark.parametrize(("kind", "keys"), [
    ("datetime", [datetime.datetime(2024, 1, 1, 0, 0, 0, us) for us in (1000, 1999, 5000)]),
    ("string", ["x" * 40 + "a", "x" * 40 + "b", "x" * 40 + "z" * 30]),
])
def test_a_mirror_finds_keys_that_file_statistics_cut_short(tmp_path: Path, kind: str,
                                                              keys: list) -> None:
    """delta-rs writes a DATETIME(6)'s statistics in milliseconds and a long text's cut: a
    MERGE that skipped files by them would add a key the table holds instead of updating it."""
    facts = LakeFacts((LakeColumn("id", kind), LakeColumn("v", "string")), ("id",))
    spec = JobSpec(1, False, {MIRROR: facts}, target="delta")
    writer = loader(tmp_path, epoch=1)
    writer.claim()
    for pos, group in ((100, keys[:2]), (200, keys[2:])):  # a file each
        rows = [change(MIRROR, INS, i, {"id": key, "v": "old"}) for i, key in enumerate(group)]
        writer.load_units(batch(pos // 100, pos), [PartResult(units.render(rows, spec), [], 2)])
    update = change(MIRROR, UPD, 0, {"id": keys[1], "v": "new"}, (keys[1],))
    writer.load_units(batch(3, 300), [PartResult(units.render([update], spec), [], 1)])
    assert [(row["id"], row["v"]) for row in read(tmp_path, "m")] == \
        [(keys[0], "old"), (keys[1], "new"), (keys[2], "old")]


@pytest.mark.parametrize(("data_type", "column_type", "charset", "expected"), [
    ("int", "int(10) unsigned", None, LakeColumn("c", "int64")),
    ("bigint", "bigint(20) unsigned", None, LakeColumn("c", "uint64")),
    ("decimal", "decimal(65,30)", None, LakeColumn("c", "decimal_text", 65, 30)),
    ("decimal", "decimal(10,2)", None, LakeColumn("c", "decimal", 10, 2)),
    ("time", "time(3)", None, LakeColumn("c", "time", 0, 3)),
    ("bit", "bit(64)", None, LakeColumn("c", "uint64")),
    ("varchar", "varchar(10)", "latin1", LakeColumn("c", "string")),
    ("varbinary", "varbinary(10)", None, LakeColumn("c", "binary")),
    ("binary", "binary(4)", None, LakeColumn("c", "binary_fixed", 4)),
    ("enum", "enum('a','b(1)')", "utf8mb4", LakeColumn("c", "string")),
    ("point", "point", None, LakeColumn("c", "binary")),
    ("timestamp", "timestamp(6)", None, LakeColumn("c", "timestamp")),
])
def test_information_schema_types_map_as_table_map_types_do(
        data_type: str, column_type: str, charset: str | None, expected: LakeColumn) -> None:
    assert of_text(TextColumn("x", data_type, column_type, charset), "c") == expected


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
                             change(LOG, INS, 3 << 20, {"id": n, "v": "a"})], SPEC)
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
                         change(LOG, INS, 3 << 20, {"id": 1, "v": "a"})], SPEC)
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


def test_batches_loaded_together_make_one_commit_per_table_as_each_alone_would(
        tmp_path: Path) -> None:
    first = units.render([change(MIRROR, INS, 0, {"id": 1, "v": "a"}),
                          change(MIRROR, INS, 1, {"id": 2, "v": "b"}),
                          change(LOG, INS, 3 << 20, {"id": 1, "v": "a"})], SPEC)
    second = units.render([change(MIRROR, DEL, 0, None, (1,)),
                           change(MIRROR, UPD, 1, {"id": 3, "v": "b"}, (2,)),
                           change(LOG, DEL, 3 << 20, None, before={"id": 1, "v": "a"})], SPEC)
    writer = loader(tmp_path, epoch=1)
    assert writer.load_many([(batch(1, 100), [PartResult(first, [], 3)]),
                             (batch(2, 200), [PartResult(second, [], 3)])]) == 6
    assert [(row["id"], row["v"]) for row in read(tmp_path, "m")] == [(3, "b")]
    assert [row["_setl_op"] for row in sorted(DeltaTable(str(tmp_path / "s" / "c"))
            .to_pyarrow_table().to_pylist(), key=lambda row: row["_setl_position"])] == \
        ["I", "D"]
    for name in ("m", "c"):  # one commit each (after the table's making), at the last batch
        history = DeltaTable(str(tmp_path / "s" / name)).history()
        assert [commit["setl.process_id"] for commit in history if "setl.process_id" in
                commit and commit["operation"] != "CREATE TABLE"] == ["2"]
    # a table that holds the first batch already gets only the second
    again = tmp_path / "again"
    writer = loader(again, epoch=1)
    writer.load_many([(batch(1, 100), [PartResult(first[:1], [], 2)])])
    assert writer.load_many([(batch(1, 100), [PartResult(first, [], 3)]),
                             (batch(2, 200), [PartResult(second, [], 3)])]) == 4
    assert [row["_setl_op"] for row in sorted(DeltaTable(str(again / "s" / "c"))
            .to_pyarrow_table().to_pylist(), key=lambda row: row["_setl_position"])] == \
        ["I", "D"]
    assert [(row["id"], row["v"]) for row in read(again, "m")] == [(3, "b")]


def test_a_mirror_appends_rows_of_new_keys_and_merges_the_rest(tmp_path: Path) -> None:
    """Rows whose keys lie past every file's (the first copy, new auto-increment keys) are
    appended; rows among the table's keys, a delete, or a file without statistics of its key
    are merged, and every table holds what a MERGE of each would."""
    writer = loader(tmp_path, epoch=1)
    writer.claim()
    steps = [  # the batch's changes, whether they are appended
        ([change(MIRROR, INS, i, {"id": key, "v": "a"}) for i, key in enumerate((5, 6))], True),
        ([change(MIRROR, INS, 0, {"id": 9, "v": "a"})], True),  # above the table's keys
        ([change(MIRROR, INS, 0, {"id": 1, "v": "a"})], True),  # below them
        ([change(MIRROR, UPD, 0, {"id": 6, "v": "b"}, (6,))], False),  # a key it holds
        ([change(MIRROR, INS, 0, {"id": 7, "v": "a"})], False),  # between its keys
        ([change(MIRROR, INS, 0, {"id": 2, "v": "a"}),  # between them too, on one side
          change(MIRROR, INS, 1, {"id": 12, "v": "a"})], False),
        ([change(MIRROR, INS, 0, {"id": 20, "v": "a"}),
          change(MIRROR, DEL, 1, None, (9,))], False),  # a delete
    ]
    for process_id, (changes, appended) in enumerate(steps, start=1):
        writer.load_units(batch(process_id, process_id * 100),
                          [PartResult(units.render(changes, SPEC), [], len(changes))])
        operation = DeltaTable(str(tmp_path / "s" / "m")).history(1)[0]["operation"]
        assert operation == ("WRITE" if appended else "MERGE"), (process_id, operation)
    assert [(row["id"], row["v"]) for row in read(tmp_path, "m")] == \
        [(1, "a"), (2, "a"), (5, "a"), (6, "b"), (7, "a"), (12, "a"), (20, "a")]
    assert DeltaTable(str(tmp_path / "s" / "m")).transaction_version("setl:c.p") == len(steps)


def test_a_null_key_in_a_mirror_stops_the_pipeline_and_writes_nothing(tmp_path: Path) -> None:
    """A mirror merges by key, and a NULL key matches nothing: such a row could never be
    updated or deleted in the lake, so the batch stops, naming the column, and the table
    keeps what it had (key_columns on a NULL-admitting column is the way to get here)."""
    writer = loader(tmp_path, epoch=1)
    writer.claim()
    writer.load_units(batch(1, 100), [PartResult(units.render(
        [change(MIRROR, INS, 0, {"id": 1, "v": "a"})], SPEC), [], 1)])
    for rows in ([{"id": None, "v": "b"}], [{"id": 2, "v": "b"}, {"id": None, "v": "c"}]):
        changes = [change(MIRROR, INS, i, row) for i, row in enumerate(rows)]
        with pytest.raises(ConfigError, match=r"key column id is NULL.*mode: changelog"):
            writer.load_units(batch(2, 200), [PartResult(units.render(changes, SPEC), [],
                                                         len(changes))])
    assert [(row["id"], row["v"]) for row in read(tmp_path, "m")] == [(1, "a")]
    assert DeltaTable(str(tmp_path / "s" / "m")).transaction_version("setl:c.p") == 1


def test_new_keys_only_takes_null_keys_as_matching_nothing(tmp_path: Path) -> None:
    """NULLs are left out of the rows' key range (a NULL key matches no row in a MERGE
    either); rows whose key column is all NULL decide nothing by it."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from node.target.delta.loader import new_keys_only

    write_deltalake(str(tmp_path / "t"), pa.table({"id": [5], "n": [5]}))
    table = DeltaTable(str(tmp_path / "t"))
    flag = {units.DELETE_FLAG: [False, False]}
    assert not new_keys_only(table, pa.table({"id": pa.array([None, None], pa.int64()),
                                              "n": [5, 6], **flag}), ("id", "n"))
    assert new_keys_only(table, pa.table({"id": pa.array([None, None], pa.int64()),
                                          "n": [6, 7], **flag}), ("id", "n"))
    assert new_keys_only(table, pa.table({"id": [None, 9], "n": [5, 5], **flag}), ("id",))


def test_a_key_without_exact_file_statistics_is_always_merged(tmp_path: Path) -> None:
    """Text keys (delta-rs cuts their statistics short), a column whose type the table holds
    otherwise (a MERGE casts it) and a file without statistics never take the append."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from node.target.delta.loader import new_keys_only

    write_deltalake(str(tmp_path / "t"), pa.table({"id": pa.array(["b"]), "n": [1]}))
    table = DeltaTable(str(tmp_path / "t"))
    text = pa.table({"id": ["z"], "n": [2], units.DELETE_FLAG: [False]})
    assert not new_keys_only(table, text, ("id",))
    assert new_keys_only(table, text, ("n",))  # an integer key above the table's
    wider = pa.table({"id": ["z"], "n": pa.array([2], pa.int32()), units.DELETE_FLAG: [False]})
    assert not new_keys_only(table, wider, ("n",))  # int32 rows, an int64 column
    write_deltalake(str(tmp_path / "e"), pa.table({"n": pa.array([], pa.int64())}))
    empty = DeltaTable(str(tmp_path / "e"))
    assert new_keys_only(empty, pa.table({"n": [1], units.DELETE_FLAG: [False]}), ("n",))
    assert not new_keys_only(empty, pa.table({"n": [1], units.DELETE_FLAG: [True]}), ("n",))
    write_deltalake(str(tmp_path / "u"), pa.table({"n": [5]}),  # a file without statistics
                    configuration={"delta.dataSkippingNumIndexedCols": "0"})
    unknown = DeltaTable(str(tmp_path / "u"))
    assert not new_keys_only(unknown, pa.table({"n": [9], units.DELETE_FLAG: [False]}), ("n",))
