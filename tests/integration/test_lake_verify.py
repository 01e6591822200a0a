"""``setl verify`` of a Delta Lake target on real servers: mirrored tables (every documented
type, a composite key) compared while a writer races verify, then each kind of corrupted
lake row found exactly and mended by ``--repair`` through the stream; a change log is left
out with the reason."""

from __future__ import annotations

import decimal
import random
import threading
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.devcluster import Cluster, Database, make_schema, wait_for
from tests.integration.lakes import (
    TYPE_ROWS,
    TYPES,
    ended,
    lake_channel,
    lake_sources,
    rows,
    started,
)
from tests.integration.test_verify import found, verify

pytestmark = pytest.mark.integration

ITEMS = ("CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(40), qty INT, "
         "price DECIMAL(10,2), at TIMESTAMP(3) NULL, big BIGINT UNSIGNED, t TIME(2))")
PARTS = ("CREATE TABLE `{schema}`.parts (a INT, b VARCHAR(10), note VARCHAR(20), "
         "PRIMARY KEY (a, b))")
LOG = "CREATE TABLE `{schema}`.log (id INT PRIMARY KEY, b VARCHAR(10))"
ITEM_COLUMNS = ["id", "name", "qty", "price", "big"]  # (big: an int here, a decimal there)


def equal(source: Database, location: Any, schema: str, name: str, columns: list[str]) -> None:
    def plain(row: tuple) -> tuple:
        return tuple(int(v) if isinstance(v, decimal.Decimal) and v == v.to_integral_value()
                     else v for v in row)
    expected = Counter(plain(row) for row in source.rows(
        f"SELECT {', '.join(columns)} FROM `{schema}`.{name}"))
    wait_for(lambda: Counter(map(plain, rows(location, schema, name, columns).elements()))
             == expected, 60, f"lake {name} equal to the source")


def test_verify_finds_each_kind_of_corrupted_lake_row_and_repair_mends_it(
        sandbox, tmp_path, capsys: Any) -> None:
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, ITEMS, PARTS, LOG, TYPES)
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-verify")
    t = f"`{schema}`"
    try:
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([lake_channel("lv", schema, [
            {"table": "items"}, {"table": "parts"}, {"table": "log", "mode": "changelog"},
            {"table": "types"}], batch_timeout_ms=20)], lake_sources(cluster, location))
        cluster.set_status("lv", "START")
        cluster.wait_running("lv")
        source.script(
            f"INSERT INTO {t}.items VALUES " + ", ".join(
                f"({i}, 'item {i}', {i % 13}, {i}.25, '2024-03-0{1 + i % 9} 10:00:0{i % 10}"
                f".125', {18446744073709551615 - i}, '-{i}:00:01.5')" for i in range(1, 301)),
            f"INSERT INTO {t}.parts VALUES " + ", ".join(
                f"({a}, 'k{b}', 'n{a}{b}')" for a in range(1, 41) for b in range(5)),
            f"INSERT INTO {t}.log VALUES (1, 'x'), (2, 'y')",
            f"INSERT INTO {t}.types VALUES {TYPE_ROWS}")
        equal(source, location, schema, "parts", ["a", "b", "note"])
        wait_for(lambda: len(rows(location, schema, "types", ["id"])) == 2, 60, "types")
        wait_for(lambda: len(rows(location, schema, "items", ["id"])) == 300, 60, "items")

        # a writer races verify: keys it changes are re-checked, never reported
        stop = threading.Event()

        def churn() -> None:
            writer, rng = Database(sandbox, "source"), random.Random(5)
            try:
                while not stop.wait(0.004):
                    key = rng.randint(1, 300)
                    writer.execute(f"UPDATE {t}.items SET qty = qty + 1, name = 'hot {key}' "
                                   f"WHERE id = {key}")
            finally:
                writer.close()

        thread = threading.Thread(target=churn, daemon=True)
        thread.start()
        try:
            code, report = verify(cluster, capsys, "lv", "--chunk-size", "50")
        finally:
            stop.set()
            thread.join(30)
        assert code == 4, report  # no difference, but the change log is not verified
        [result] = report["reports"]
        tables = {entry["table"]: entry for entry in result["tables"]}
        items, parts = f"{schema}.items", f"{schema}.parts"
        assert tables[items]["rows"] == 300 and tables[items]["method"] == "rows"
        assert tables[f"{schema}.types"]["rows"] == 2
        assert tables[parts]["rows"] == 200
        [skipped] = result["skipped"]
        assert skipped["table"] == f"{schema}.log" and "change log" in skipped["reason"]

        # each kind of damage, done to the lake by another writer than setl
        equal(source, location, schema, "items", ITEM_COLUMNS)
        lake_items = DeltaTable(str(location / schema / "items"))
        lake_items.delete("id = 5")  # missing
        lake_items.update(predicate="id = 7", new_values={"name": "changed"})
        lake_items.update(predicate="id = 13", updates={"big": "big - 1"})
        lake_items.update(predicate="id = 17", new_values={"t": "-17:00:01.49"})
        write_deltalake(lake_items, pa.Table.from_pylist(  # extra
            [{"id": 9999, "name": "only here"}], pa.schema(lake_items.schema().to_arrow())),
                        mode="append")
        lake_parts = DeltaTable(str(location / schema / "parts"))
        lake_parts.delete("a = 3 AND b = 'k1'")
        lake_parts.update(predicate="a = 4 AND b = 'k2'", updates={"note": "NULL"})
        code, report = verify(cluster, capsys, "lv", "--chunk-size", "40")
        assert code == 1, report
        assert found(report, items) == {
            "missing": {((5,), items)}, "extra": {((9999,), items)},
            "different": {((7,), items), ((13,), items), ((17,), items)}}
        assert found(report, parts) == {"missing": {((3, "k1"), parts)}, "extra": set(),
                                        "different": {((4, "k2"), parts)}}

        code, report = verify(cluster, capsys, "lv", "--repair")
        assert code == 4, report  # (the change log: not verified)
        repaired = {entry["table"]: entry for entry in report["reports"][0]["tables"]}
        assert repaired[items]["repaired"] == 5 and repaired[parts]["repaired"] == 2
        equal(source, location, schema, "items", ITEM_COLUMNS)
        equal(source, location, schema, "parts", ["a", "b", "note"])
        assert verify(cluster, capsys, "lv")[0] == 4
        assert verify(cluster, capsys, "lv", "--table", items)[0] == 0
    finally:
        ended(cluster, source, target)


def test_a_key_the_lake_holds_twice_is_a_difference_and_repair_leaves_one_row(
        sandbox, tmp_path, capsys: Any) -> None:
    """A Delta table has no unique key: another writer's append can leave a key twice. Verify
    reported such a lake (ids [1, 2, 2] against two source rows) equal; now the key differs,
    the report says why, and --repair leaves exactly the source's row."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, "
                         "name VARCHAR(40), qty INT)")
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-verify-twice")
    items = f"{schema}.items"
    try:
        started(cluster, location, "lt", schema, [{"table": "items"}], batch_timeout_ms=20)
        source.execute(f"INSERT INTO `{schema}`.items VALUES " + ", ".join(
            f"({i}, 'item {i}', {i})" for i in range(1, 41)))
        equal(source, location, schema, "items", ["id", "name", "qty"])
        lake_items = DeltaTable(str(location / schema / "items"))
        write_deltalake(lake_items, pa.Table.from_pylist(  # a copy alike, and one not
            [{"id": 2, "name": "item 2", "qty": 2}, {"id": 30, "name": "other", "qty": 0}],
            pa.schema(lake_items.schema().to_arrow())), mode="append")
        code, report = verify(cluster, capsys, "lt", "--chunk-size", "15")
        assert code == 1, report
        assert found(report, items) == {"missing": set(), "extra": set(),
                                        "different": {((2,), items), ((30,), items)}}
        [verdict] = report["reports"][0]["tables"]
        assert any(note.startswith("2 key(s) held by more than one row in lake table "
                                   f"lake:{items}") for note in verdict["notes"]), verdict
        code, report = verify(cluster, capsys, "lt", "--repair")
        assert code == 0, report
        assert report["reports"][0]["tables"][0]["repaired"] == 4  # a delete and a copy each
        held = Counter(tuple(row.values()) for row in DeltaTable(str(
            location / schema / "items")).to_pyarrow_table(columns=["id", "name", "qty"])
            .to_pylist())
        assert held == Counter(source.rows(f"SELECT id, name, qty FROM `{schema}`.items"))
        assert verify(cluster, capsys, "lt")[0] == 0
    finally:
        ended(cluster, source, target)


def test_a_table_keyed_by_a_unique_key_and_key_columns_holding_it_is_verified(
        sandbox, tmp_path, capsys: Any) -> None:
    """key_columns that hold a table's unique NOT NULL key (it has no primary key) merge its
    rows into a lake by them; verify keys the table as its pipeline does."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.seats (row_no INT NOT NULL, "
                         "seat INT NOT NULL, holder VARCHAR(20), UNIQUE KEY (row_no, seat))")
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-verify-unique")
    try:
        started(cluster, location, "lu", schema, [
            {"table": "seats", "key_columns": ["seat", "row_no"]}])
        source.execute(f"INSERT INTO `{schema}`.seats VALUES " + ", ".join(
            f"({r}, {s}, 'h{r}{s}')" for r in range(1, 4) for s in range(1, 4)))
        source.execute(f"UPDATE `{schema}`.seats SET holder = 'new' WHERE row_no = 2")
        equal(source, location, schema, "seats", ["row_no", "seat", "holder"])
        code, report = verify(cluster, capsys, "lu")
        assert code == 0, report
        assert report["reports"][0]["tables"][0]["rows"] == 9
    finally:
        ended(cluster, source, target)
