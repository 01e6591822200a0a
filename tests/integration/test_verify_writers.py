"""``setl verify`` and ``--repair`` on real servers beside other writers: writers racing
verify give no false difference and repair of rows a writer keeps changing ends equal; rows
another table or channel writes into the same target table are not extra."""

from __future__ import annotations

import random
import threading
from types import SimpleNamespace
from typing import Any, cast

import pymysql
import pytest
import yaml

from node.extract.chunks import Chunk
from node.spark import SparkRunner
from node.verify import run, task
from node.verify.readers import Key
from node.verify.report import Report
from shared.definitions import load_text
from shared.model import BinlogPosition
from shared.sandbox import Sandbox
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


def test_concurrent_writes_give_no_false_difference_by_rows(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """The rows method (Spark tasks, out of the test's reach) beside a writer, by time: the
    sql method's race is driven step by step below."""
    method = "rows"
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


CHANGED = (150, 450, 750, 1050, 1350, 1650)  # a key in each of six chunks of 100


def test_rows_changed_under_verify_are_rechecked_not_reported(
        cluster: Cluster, sandbox: Sandbox, source: Database, target: Database,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The sql method's race with a writer, step by step instead of by time: verify runs
    here (the node's code, in the test's process), the pipeline in the node. Right after a
    run of chunks begins its source snapshot (at S) the writer changes a row of each chunk
    and waits until the target holds it: the targets' snapshot that follows is ahead of S
    and finds those rows different. Before the recheck the writer changes them again (on
    their way to the target while it rechecks). Each is rechecked and none reported; the
    planted difference (row 1900 changed on the target) is."""
    schema = make_schema(source, target, HOT)
    channel = one_way("v-race-auto", schema, ["hot"])
    start(cluster, channel)
    table = f"`{schema}`.hot"
    source.execute(f"INSERT INTO {table} VALUES " + ", ".join(
        f"({i}, {i}, 'cold')" for i in range(1, 2001)))
    wait_equal(source, target, schema, ["hot"])
    target.execute(f"UPDATE {table} SET note = 'corrupt' WHERE id = 1900")
    pipeline_id = "v-race-auto.forward"
    writes, reads, lock = Database(sandbox, "source"), Database(sandbox, "target"), \
        threading.Lock()
    changed: set[int] = set()  # keys changed between their chunk's source and target reads

    def values(db: Database, keys: list[int]) -> list[tuple[Any, ...]]:
        return db.rows(f"SELECT id, v FROM {table} WHERE id IN ({', '.join(map(str, keys))}) "
                       "ORDER BY id")

    def change(keys: list[int], wait: bool) -> None:
        if not keys:
            return
        writes.execute(f"UPDATE {table} SET v = v + 1000, note = 'raced' WHERE id IN "
                       f"({', '.join(map(str, keys))})")
        if wait:  # the target ahead of the chunk's source snapshot
            expected = values(writes, keys)
            wait_for(lambda: values(reads, keys) == expected, 60, f"{keys} on the target")

    checked, snapshot, running = task.check_run, task.source_snapshot, threading.local()

    def check_run(reader: Any, sessions: Any, chunks: list[Chunk]) -> Any:
        running.chunks = chunks  # (each thread of verify checks a run of chunks)
        return checked(reader, sessions, chunks)

    def source_snapshot(cursor: Any) -> BinlogPosition:
        at = snapshot(cursor)  # the run's source snapshot, at S; its targets' not yet begun
        low, high = running.chunks[0].low, running.chunks[-1].high
        with lock:
            keys = [key for key in CHANGED if key not in changed and (low is None or key >= low)
                    and (high is None or key < high)]
            if keys:
                change(keys, wait=True)
                changed.update(keys)
        return at

    rechecked: list[set[Key]] = []
    settle = run.settle

    def before_recheck(pending: dict[Key, Any], *args: Any, **kwargs: Any) -> Any:
        rechecked.append(set(pending))
        change(sorted(changed), wait=False)  # on their way while the recheck reads them
        return settle(pending, *args, **kwargs)

    monkeypatch.setattr(task, "check_run", check_run)
    monkeypatch.setattr(task, "source_snapshot", source_snapshot)
    monkeypatch.setattr(run, "settle", before_recheck)
    try:
        report = in_process_verify(sandbox, channel, pipeline_id, run.Options(chunk_size=100))
        assert changed == set(CHANGED), "the writer did not change rows under each chunk's read"
        [verdict] = report.tables
        assert verdict.method == "sql" and verdict.chunks >= 20
        assert rechecked == [{(key,) for key in CHANGED} | {(1900,)}]
        assert verdict.rechecked == len(CHANGED) + 1
        assert [(kind, key) for kind, key, _ in verdict.differences] == [("different", "[1900]")]
        assert verdict.unsettled == 0
        wait_for(lambda: values(reads, list(CHANGED)) == values(source, list(CHANGED)), 60,
                 "the writer's rows on the target")
    finally:
        writes.close()
        reads.close()
    cluster.set_status("v-race-auto", "STOP")


def in_process_verify(sandbox: Sandbox, channel: dict[str, Any], pipeline_id: str,
                      options: run.Options) -> Report:
    """``setl verify`` of ``channel``'s one pipeline run by this process (so a test may
    wrap its steps), against the pipeline the node runs: its loaded position read from the
    target's position row, as the node's runner knows it."""
    secret = f"file:{sandbox.secret_file}"
    servers = sandbox.servers()
    definitions = load_text(yaml.safe_dump({"sources": [
        {"name": name, "host": "127.0.0.1", "port": servers[name].port, "user": "setl",
         "password": secret} for name in ("source", "target")], "channels": [channel]}))
    [defined] = definitions.channels
    target = Database(sandbox, "target")

    def applied() -> BinlogPosition | None:
        rows = target.rows("SELECT binlog_file, binlog_pos, gtid, source_server FROM "
                           "retl.retl_position WHERE pipeline_id = %s", (pipeline_id,))
        return BinlogPosition(str(rows[0][0]), int(rows[0][1]), str(rows[0][2] or ""),
                              str(rows[0][3] or "")) if rows and rows[0][0] else None

    spark = cast(SparkRunner, SimpleNamespace(partitions=1))  # the sql method: no Spark job
    context = run.Context(defined, defined.pipelines[0], 1,
                          {source.name: source for source in definitions.sources}, spark,
                          applied)
    try:
        return run.Verification(context, options, lambda progress: None).run()
    finally:
        target.close()


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

