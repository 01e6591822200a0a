"""``setl verify`` and ``--repair`` on real servers beside other writers: writers racing
verify give no false difference and repair of rows a writer keeps changing ends equal; rows
another table or channel writes into the same target table are not extra."""

from __future__ import annotations

import random
import threading
from typing import Any

import pymysql
import pytest

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.test_verify import found, start, verify

HOT = "CREATE TABLE `{schema}`.hot (id INT PRIMARY KEY, v INT, note VARCHAR(30))"


def writer(db: Database, table: str, keys: int, stop: threading.Event, seed: int,
           began: threading.Event | None = None, burst: int = 1) -> None:
    """Random updates, deletes and inserts of keys 1..``keys``, ``burst`` a transaction."""
    rng = random.Random(seed)
    while not stop.is_set():
        statements = []
        for _ in range(burst):
            key = rng.randint(1, keys)
            statements.append(rng.choice([
                f"UPDATE {table} SET v = v + 1, note = 'w{seed}' WHERE id = {key}",
                f"DELETE FROM {table} WHERE id = {key}",
                f"INSERT INTO {table} VALUES ({key}, {key}, 'new') "
                "ON DUPLICATE KEY UPDATE v = 0"]))
        try:
            db.script(*(["BEGIN", *statements, "COMMIT"] if burst > 1 else statements))
        except pymysql.OperationalError as exc:  # two writers' bursts deadlocked: the
            if exc.args[0] not in (1205, 1213):  # server undid this one; the next goes on
                raise
            db.execute("ROLLBACK")
            continue
        if began is not None:
            began.set()
        stop.wait(0.004)


@pytest.mark.parametrize("method", ["auto", "rows"])
def test_concurrent_writes_give_no_false_difference(
        cluster: Cluster, source: Database, target: Database, capsys: Any,
        method: str) -> None:
    schema = make_schema(source, target, HOT)
    channel = f"v-race-{method}"
    start(cluster, one_way(channel, schema, ["hot"]))
    table = f"`{schema}`.hot"
    source.execute(f"INSERT INTO {table} VALUES " + ", ".join(
        f"({i}, {i}, 'cold')" for i in range(1, 2001)))
    wait_equal(source, target, schema, ["hot"])
    target.execute(f"UPDATE {table} SET note = 'corrupt' WHERE id = 1900")  # no writer there
    stop = threading.Event()
    db = Database(cluster.sandbox, "source")
    began = threading.Event()
    thread = threading.Thread(target=writer, args=(db, table, 1500, stop, 7, began, 50),
                              daemon=True)
    thread.start()
    assert began.wait(30), "the writer did not start"
    # Load held back for the first second of verify (the pipeline's position row locked on
    # the target, which every batch writes): chunks read then find the target behind the
    # source for the keys the writer changed, and those must settle, not be reported
    holder = Database(cluster.sandbox, "target")
    holder.execute("BEGIN")
    assert holder.rows("SELECT process_id FROM retl.retl_position WHERE pipeline_id = %s "
                       "FOR UPDATE", (f"{channel}.forward",))
    release = threading.Timer(1.0, holder.execute, ("COMMIT",))
    release.start()
    try:
        # about 2 s of reading (--rate) while the writer changes thousands of rows a second
        code, report = verify(cluster, capsys, channel, "--chunk-size", "100", "--compare",
                              method, "--rate", "1000")
    finally:
        release.join(30)
        holder.close()
        stop.set()
        thread.join(30)
        db.close()
    assert code == 1, report
    hot = f"{schema}.hot"
    assert found(report, hot) == {"missing": set(), "extra": set(),
                                  "different": {((1900,), hot)}}
    [verdict] = report["reports"][0]["tables"]
    # (a row the writer changed under verify is rechecked; reads in REPEATABLE READ, as
    # since this stop, see fewer of the writer's changes than the server's default did)
    assert int(verdict["rechecked"]) >= 1, "no row changed under verify: the race was not run"
    assert float(verdict["seconds"]) > 1.5  # --rate held it back
    cluster.set_status(channel, "STOP")


def test_repair_while_a_writer_changes_the_same_keys_ends_equal(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    schema = make_schema(source, target, HOT)
    start(cluster, one_way("v-mend", schema, ["hot"], free_door={"source": "target"}))
    table = f"`{schema}`.hot"
    source.execute(f"INSERT INTO {table} VALUES " + ", ".join(
        f"({i}, {i}, 'cold')" for i in range(1, 1001)))
    wait_equal(source, target, schema, ["hot"])
    target.script(f"DELETE FROM {table} WHERE id % 31 = 0",
                  f"UPDATE {table} SET v = -1 WHERE id % 23 = 0",
                  f"INSERT INTO {table} VALUES " + ", ".join(
                      f"({i}, 0, 'stray')" for i in range(1001, 1031)))
    stop = threading.Event()
    db = Database(cluster.sandbox, "source")
    thread = threading.Thread(target=writer, args=(db, table, 1030, stop, 9), daemon=True)
    thread.start()
    try:
        code, report = verify(cluster, capsys, "v-mend", "--repair", "--chunk-size", "200")
    finally:
        stop.set()
        thread.join(30)
        db.close()
    [verdict] = report["reports"][0]["tables"]
    assert code == 0 and verdict.get("remaining", 0) == 0, report
    assert int(verdict["repaired"]) >= 50 and report["reports"][0]["buffer"] == \
        "central buffer on target"
    wait_equal(source, target, schema, ["hot"], timeout_s=30)
    cluster.set_status("v-mend", "STOP")


LOG = "CREATE TABLE `{schema}`.{table} (id INT PRIMARY KEY, msg VARCHAR(20))"


def test_tables_merged_into_one_target_compare_by_key(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    schema = make_schema(source, target, *(LOG.replace("{table}", t)
                                           for t in ("log_1", "log_2", "logs_all")))
    start(cluster, {"name": "v-merged", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": [
            {"source": {"namespace": schema, "table": "re:log_\\d"},
             "target": f"{schema}.logs_all"}]}]})
    for table, first in (("log_1", 1), ("log_2", 101)):
        source.execute(f"INSERT INTO `{schema}`.{table} VALUES " + ", ".join(
            f"({i}, 'm{i}')" for i in range(first, first + 30)))
    wait_for(lambda: len(target.table(schema, "logs_all")) == 60, 30, "60 merged rows")
    all_ = f"`{schema}`.logs_all"
    target.script(f"DELETE FROM {all_} WHERE id = 105", f"UPDATE {all_} SET msg = 'x' WHERE id = 3",
                  f"INSERT INTO {all_} VALUES (999, 'no source row')")
    code, report = verify(cluster, capsys, "v-merged")
    assert code == 1
    merged = f"{schema}.logs_all"
    assert found(report, f"{schema}.log_1") == {"missing": set(), "extra": set(),
                                                "different": {((3,), merged)}}
    assert found(report, f"{schema}.log_2") == {"missing": {((105,), merged)}, "extra": set(),
                                                "different": set()}
    tables = {t["table"]: t for t in report["reports"][0]["tables"]}
    assert tables[f"{schema}.log_1"]["method"] == "rows"
    assert "it is fed by other tables too" in tables[f"{schema}.log_1"]["notes"][0]
    # log_2 dropped on the source, its rows kept on the target (old months into one table):
    # log_1 alone now feeds logs_all, but the pair gathers tables into it, so log_2's rows
    # are not "extra" (a repair deleted them)
    source.execute("SET SESSION sql_log_bin = 0")
    source.execute(f"DROP TABLE `{schema}`.log_2")
    source.execute("SET SESSION sql_log_bin = 1")
    code, report = verify(cluster, capsys, "v-merged", "--repair")
    [verdict] = report["reports"][0]["tables"]
    assert code == 0 and verdict["repaired"] == 1, report  # row 3
    wait_for(lambda: len(target.rows(f"SELECT id FROM {all_} WHERE id > 100")) == 30, 30,
             "log_2's rows (and 999) left on the target")
    assert target.rows(f"SELECT msg FROM {all_} WHERE id = 3") == [("m3",)]
    cluster.set_status("v-merged", "STOP")


def test_rows_another_channel_writes_into_the_same_table_are_not_extra(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """Two channels merge two source tables into one target table (shards of two sources,
    as Otter merges them). Verifying one counted the other's rows as extra, and --repair
    deleted them."""
    schema = make_schema(source, target, *(LOG.replace("{table}", t)
                                           for t in ("log_a", "log_b", "logs_ab")))
    for name, table in (("v-shard-a", "log_a"), ("v-shard-b", "log_b")):
        start(cluster, {"name": name, "pipelines": [{
            "name": "forward", "source": "source", "target": "target", "pairs": [
                {"source": f"{schema}.{table}", "target": f"{schema}.logs_ab"}]}]})
    verdict = repaired_beside(cluster, source, target, capsys, schema, ("log_a", "log_b"),
                              "v-shard-a")
    assert "it is fed by other tables too" in verdict["notes"][0]
    for name in ("v-shard-a", "v-shard-b"):
        cluster.set_status(name, "STOP")


def repaired_beside(cluster: Cluster, source: Database, target: Database, capsys: Any,
                    schema: str, tables: tuple[str, str], verified: str) -> dict:
    """Rows 1–20 of the first table and 101–120 of the second merged into logs_ab by two
    channels, row 3 changed on the target, then ``verify --repair`` of channel ``verified``:
    row 3 alone is mended, the other channel's 20 rows stay. Its table's verdict."""
    for table, first in zip(tables, (1, 101), strict=True):
        source.execute(f"INSERT INTO `{schema}`.{table} VALUES " + ", ".join(
            f"({i}, 'm{i}')" for i in range(first, first + 20)))
    wait_for(lambda: len(target.table(schema, "logs_ab")) == 40, 30, "40 merged rows")
    target.execute(f"UPDATE `{schema}`.logs_ab SET msg = 'x' WHERE id = 3")
    code, report = verify(cluster, capsys, verified, "--repair")
    [verdict] = report["reports"][0]["tables"]
    assert code == 0 and verdict["repaired"] == 1, report  # row 3 only
    assert len(target.rows(f"SELECT id FROM `{schema}`.logs_ab WHERE id > 100")) == 20
    assert target.rows(f"SELECT msg FROM `{schema}`.logs_ab WHERE id = 3") == [("m3",)]
    return verdict



def test_rows_another_channel_writes_into_a_table_a_pattern_pair_fills_are_not_extra(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """One channel copies tables by a pattern ({table} templates: a whole schema), another
    writes a second source table's rows into one of them. The manager knew shared tables
    named one by one only: verify counted the other's rows as extra, and --repair deleted
    them."""
    schema = make_schema(source, target, *(LOG.replace("{table}", t)
                                           for t in ("logs_ab", "extra_b")))
    start(cluster, {"name": "v-pattern-a", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": [
            {"source": {"namespace": schema, "table": "re:logs_.*"},
             "target": {"namespace": schema, "table": "{table}"}}]}]})
    start(cluster, {"name": "v-pattern-b", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": [
            {"source": f"{schema}.extra_b", "target": f"{schema}.logs_ab"}]}]})
    repaired_beside(cluster, source, target, capsys, schema, ("logs_ab", "extra_b"),
                    "v-pattern-a")
    for name in ("v-pattern-a", "v-pattern-b"):
        cluster.set_status(name, "STOP")

