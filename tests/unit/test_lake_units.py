"""The Delta target's worker side (node/target/delta/units.py, columns.py): a batch's changes
rendered as Arrow by the mirror's merge rules and in the change log's order, with every
type's value kept."""

from __future__ import annotations

import dataclasses
import datetime
import decimal

import pytest

from node.changes import Batch, Transaction
from node.extract import job
from node.jobs import READ_BIT, ROW_BITS, JobSpec
from node.target.delta import units
from node.target.delta.columns import LakeColumn, TextColumn, of_text, time_text
from node.target.delta.tables import LakeFacts
from shared.errors import LoadError
from shared.model import BinlogPosition
from tests.unit.lake_helpers import DEL, INS, LOG, MIRROR, SPEC, UPD, change


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
    changes = [change(LOG, INS, 1 << ROW_BITS, {"id": 1, "v": "x"}),
               change(LOG, INS, 3 << ROW_BITS, {"id": 1, "v": "x"}),
               change(LOG, DEL, (4 << ROW_BITS) + 1, None, before={"id": 1, "v": "x"})]
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
    changes = [change(LOG, INS, (1 << ROW_BITS) + i, {"id": i, "v": b"caf\xc3\xa9"})
               for i in range(2)]
    changes += [change(LOG, INS, (5 << ROW_BITS) + 7, {"id": 9, "v": None})]
    [unit] = units.render(changes, SPEC)
    rows = units.read_ipc(unit.data).to_pylist()
    assert [(r["_setl_txn"], r["_setl_seq"], r["id"], r["v"], r["_setl_before"])
            for r in rows] == [("bin.000001:100", (1 << ROW_BITS), 0, "café", None),
                               ("bin.000001:100", (1 << ROW_BITS) + 1, 1, "café", None),
                               ("bin.000001:200", (2 << ROW_BITS) + 7, 9, None, None)]
    [unit] = units.render(changes, dataclasses.replace(SPEC, transactions=()))
    assert {(r["_setl_txn"], r["_setl_gtid"], r["_setl_commit_ts"])  # none known
            for r in units.read_ipc(unit.data).to_pylist()} == {("", "", None)}


def test_a_window_read_opening_a_batch_is_labelled_by_a_transaction_of_it() -> None:
    """A delete asked in a watermark window that opens its batch goes before the batch's
    first event: it was labelled with no transaction ('' position, which a reader ordering
    by position cannot place). It is the first one's, in front of its changes; and a batch
    whose only content is the window's reads (a quiet source) labels them with its end."""
    changes = [change(LOG, DEL, -1, None, before={"id": 1, "v": "x"}),
               change(LOG, INS, READ_BIT, {"id": 1, "v": "y"})]
    [unit] = units.render(changes, SPEC)
    rows = units.read_ipc(unit.data).to_pylist()
    assert [(r["_setl_op"], r["_setl_txn"], r["_setl_seq"]) for r in rows] == [
        ("D", "bin.000001:100", -1), ("I", "bin.000001:100", READ_BIT)]
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
    ("timestamp", "timestamp(6)", None, LakeColumn("c", "timestamp", 0, 6)),
    ("datetime", "datetime", None, LakeColumn("c", "datetime")),
])
def test_information_schema_types_map_as_table_map_types_do(
        data_type: str, column_type: str, charset: str | None, expected: LakeColumn) -> None:
    assert of_text(TextColumn("x", data_type, column_type, charset), "c") == expected
