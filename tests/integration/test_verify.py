"""``setl verify`` and ``--repair`` on real servers (MariaDB source and two targets,
ZooKeeper, a node with Spark): equal tables, each kind of corrupted target row found
exactly by both methods, verify through renames, excluded and virtual columns and shard
routing over two targets, writers racing verify without a false difference, and repair of
rows a writer keeps changing ending equal."""

from __future__ import annotations

import json
import random
import threading
import uuid
from typing import Any

import pymysql
import pytest

from manager import cli
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for

ITEMS = ("CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(40), qty INT, "
         "price DECIMAL(10,2), at TIMESTAMP(3) NULL, f FLOAT, flags SET('a','b','c'), "
         "bits BIT(5))")
PARTS = ("CREATE TABLE `{schema}`.parts (a INT, b VARCHAR(10), note VARCHAR(20), "
         "PRIMARY KEY (a, b))")


def verify(cluster: Cluster, capsys: Any, channel: str, *args: str) -> tuple[int, dict]:
    """``setl -o json verify CHANNEL ARGS``: the exit code and the report."""
    capsys.readouterr()
    code = cli.main(["--manager", cluster.manager_address, "-o", "json", "verify", channel,
                     *args])
    out = capsys.readouterr()
    assert code in (0, 1, 4), out.err  # 4: equal, but some tables not verified
    return code, json.loads(out.out)


def found(report: dict, table: str) -> dict[str, set]:
    """The differences of one table by kind, as sets of (key, target table)."""
    [verdict] = [t for r in report["reports"] for t in r.get("tables", [])
                 if t["table"] == table]
    kinds: dict[str, set] = {"missing": set(), "extra": set(), "different": set()}
    for difference in verdict.get("differences", []):
        kinds[difference["kind"]].add((tuple(json.loads(difference["key"])),
                                       difference["target"].split(":", 1)[1]))
    return kinds


def start(cluster: Cluster, channel: dict) -> None:
    cluster.apply([channel])
    cluster.set_status(channel["name"], "START")
    cluster.wait_running(channel["name"])


def fill(source: Database, schema: str, rows: int) -> None:
    source.execute(f"INSERT INTO `{schema}`.items VALUES " + ", ".join(
        f"({i}, 'item {i}', {i % 13}, {i}.25, '2024-03-0{1 + i % 9} 10:00:0{i % 10}.125', "
        f"{i}.1, '{'a,c' if i % 2 else 'b'}', {i % 32})" for i in range(1, rows + 1)))


def test_equal_tables_and_each_kind_of_corrupted_row_found_exactly_then_repaired(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    schema = make_schema(source, target, ITEMS, PARTS)
    start(cluster, one_way("v-kinds", schema, ["items", "parts"]))
    fill(source, schema, 300)
    source.execute(f"INSERT INTO `{schema}`.parts VALUES " + ", ".join(
        f"({a}, 'k{b}', 'n{a}{b}')" for a in range(1, 41) for b in range(5)))
    wait_equal(source, target, schema, ["items", "parts"])
    for method in ("auto", "rows"):
        code, report = verify(cluster, capsys, "v-kinds", "--compare", method)
        assert code == 0, report
        tables = {t["table"]: t for t in report["reports"][0]["tables"]}
        assert tables[f"{schema}.items"]["rows"] == 300
        assert tables[f"{schema}.items"]["method"] == ("sql" if method == "auto" else "rows")
    t = f"`{schema}`"
    target.script(f"DELETE FROM {t}.items WHERE id = 5",  # missing
                  f"INSERT INTO {t}.items (id, name) VALUES (9999, 'only here')",  # extra
                  f"UPDATE {t}.items SET name = 'changed' WHERE id = 7",  # different
                  f"UPDATE {t}.items SET id = 5011 WHERE id = 11",  # changed key
                  f"UPDATE {t}.items SET f = f + 0.001 WHERE id = 13",
                  f"UPDATE {t}.items SET at = at + INTERVAL 1 SECOND WHERE id = 17",
                  f"UPDATE {t}.items SET bits = 31 WHERE id = 18",
                  f"DELETE FROM {t}.parts WHERE a = 3 AND b = 'k1'",
                  f"UPDATE {t}.parts SET note = NULL WHERE a = 4 AND b = 'k2'")
    items, parts = f"{schema}.items", f"{schema}.parts"
    for method in ("auto", "rows"):
        code, report = verify(cluster, capsys, "v-kinds", "--compare", method,
                              "--chunk-size", "40")
        assert code == 1
        assert found(report, items) == {
            "missing": {((5,), items), ((11,), items)},
            "extra": {((9999,), items), ((5011,), items)},
            "different": {((7,), items), ((13,), items), ((17,), items), ((18,), items)}}
        assert found(report, parts) == {"missing": {((3, "k1"), parts)}, "extra": set(),
                                         "different": {((4, "k2"), parts)}}
    code, report = verify(cluster, capsys, "v-kinds", "--repair")
    assert code == 0, report
    repaired = {t["table"]: t for t in report["reports"][0]["tables"]}
    assert repaired[items]["repaired"] == 8  # deletes of 9999 and 5011, 6 copies
    assert repaired[items].get("remaining", 0) == 0
    wait_equal(source, target, schema, ["items", "parts"], timeout_s=30)
    assert verify(cluster, capsys, "v-kinds")[0] == 0
    manager = ["--manager", cluster.manager_address, "verify", "v-kinds"]
    assert cli.main([*manager, "--table", f"{schema}.nope"]) == 2
    assert f"does not replicate {schema}.nope" in capsys.readouterr().err
    cluster.set_status("v-kinds", "STOP")
    wait_for(lambda: cluster.pipeline_state("v-kinds").owner_node == 0, 30, "the stop")
    assert cli.main(manager) == 2
    assert "is not running on any node: start the channel" in capsys.readouterr().err


ALIKE = ("CREATE TABLE `{schema}`.alike (id INT PRIMARY KEY, f FLOAT, a VARCHAR(9), b BLOB, "
         "c BLOB)")


def test_rows_that_would_print_alike_are_told_apart_by_the_databases_hash(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """The sql method hashed the values as the server prints them, joined by '#': FLOAT with
    six digits (1234567 and 1234568 both print 1.23457e+06), and 'a#', 'b' joined as 'a',
    '#b'; bytes holding the separator that moved between two binary columns too. Each of
    these target rows passed for equal."""
    schema = make_schema(source, target, ALIKE)
    start(cluster, one_way("v-alike", schema, ["alike"]))
    t = f"`{schema}`.alike"
    source.execute(f"INSERT INTO {t} VALUES (1, 1234567, 'x', 'y', ''), (2, 1, 'a#', 'b', ''), "
                   "(3, 2, 'c', X'781F', 'y'), (4, 3, 'd', 'e', 'f')")
    wait_equal(source, target, schema, ["alike"])
    target.script(f"UPDATE {t} SET f = 1234568 WHERE id = 1",
                  f"UPDATE {t} SET a = 'a', b = '#b' WHERE id = 2",
                  f"UPDATE {t} SET b = 'x', c = X'1F79' WHERE id = 3")
    for joined in (f"SELECT CONCAT_WS('#', f, a, b) FROM {t} WHERE id < 3",
                   f"SELECT CONCAT_WS(CHAR(31), b, c) FROM {t} WHERE id = 3"):
        assert target.rows(joined) == source.rows(joined)  # print alike
    code, report = verify(cluster, capsys, "v-alike")
    assert report["reports"][0]["tables"][0]["method"] == "sql"
    table = f"{schema}.alike"
    assert code == 1 and found(report, table) == {
        "missing": set(), "extra": set(),
        "different": {((1,), table), ((2,), table), ((3,), table)}}
    cluster.set_status("v-alike", "STOP")


def test_a_table_keyed_by_columns_that_admit_null_is_not_passed_for_equal(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """key_columns (a, b) of a keyless table where b admits NULL: a row with b NULL cannot
    be found by its key on either side, so its difference hid and the table passed for
    equal. It is now not verified, and says why."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.loose (a INT NOT NULL, "
                         "b INT NULL, v VARCHAR(9))")
    channel = one_way("v-loose", schema, ["loose"])
    channel["pipelines"][0]["pairs"][0]["key_columns"] = ["a", "b"]
    start(cluster, channel)
    t = f"`{schema}`.loose"
    source.execute(f"INSERT INTO {t} VALUES (1, NULL, 'x'), (2, 2, 'y')")
    wait_equal(source, target, schema, ["loose"])
    target.execute(f"UPDATE {t} SET v = 'changed' WHERE a = 1")
    capsys.readouterr()
    code = cli.main(["--manager", cluster.manager_address, "-o", "json", "verify", "v-loose"])
    report = json.loads(capsys.readouterr().out)
    assert code == 2, report  # nothing verified: never "equal"
    [skipped] = report["reports"][0]["skipped"]
    assert "key_columns b admit NULL" in skipped["reason"]
    cluster.set_status("v-loose", "STOP")


def test_an_extra_target_row_with_a_null_key_is_not_passed_for_equal(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """The source's key (a, b) admits no NULL, the target's table was made without that
    key and b admits NULL there: a row (1, NULL) on the target lies in no chunk's key range,
    and a lookup by key finds it on neither side, so verify called the tables equal. It
    says now that the target holds such rows, and never "equal"."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.pair (a INT NOT NULL, "
                         "b INT NOT NULL, v VARCHAR(9), PRIMARY KEY (a, b))")
    t = f"`{schema}`.pair"
    target.script(f"ALTER TABLE {t} DROP PRIMARY KEY, MODIFY b INT NULL",
                  f"ALTER TABLE {t} ADD UNIQUE KEY ab (a, b)")
    start(cluster, one_way("v-nullkey", schema, ["pair"]))
    source.execute(f"INSERT INTO {t} VALUES " + ", ".join(f"({i}, {i}, 'r')" for i in range(1, 9)))
    wait_equal(source, target, schema, ["pair"])
    code, report = verify(cluster, capsys, "v-nullkey", "--chunk-size", "2")
    assert code == 0, report  # (equal, before the row)
    target.execute(f"INSERT INTO {t} VALUES (1, NULL, 'stray')")
    capsys.readouterr()
    code = cli.main(["--manager", cluster.manager_address, "-o", "json", "verify",
                     "v-nullkey", "--chunk-size", "2"])
    report = json.loads(capsys.readouterr().out)
    assert code == 2, report  # nothing verified: never "equal"
    [skipped] = report["reports"][0]["skipped"]
    assert "holds 1 row(s) with NULL in key column(s) b" in skipped["reason"], skipped
    cluster.set_status("v-nullkey", "STOP")


def test_a_keyless_table_is_compared_by_key_columns_but_not_repaired(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """A keyless table replicates by its whole image: a repair request read by its pair's
    key_columns was upserted into the keyless target, beside the row it was to mend. Verify
    still says what differs; repair writes nothing and says why."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.kl (a INT NOT NULL, "
                         "v VARCHAR(9))")
    channel = one_way("v-keyless", schema, ["kl"])
    channel["pipelines"][0]["pairs"][0]["key_columns"] = ["a"]
    start(cluster, channel)
    t = f"`{schema}`.kl"
    source.execute(f"INSERT INTO {t} VALUES (1, 'x'), (2, 'y')")
    wait_equal(source, target, schema, ["kl"])
    target.execute(f"UPDATE {t} SET v = 'changed' WHERE a = 1")
    code, report = verify(cluster, capsys, "v-keyless", "--repair")
    table = f"{schema}.kl"
    [verdict] = report["reports"][0]["tables"]
    assert code == 1 and found(report, table)["different"] == {((1,), table)}, report
    assert verdict.get("repaired", 0) == 0 and verdict["remaining"] == 1, verdict
    assert any(note.startswith(f"not repaired: table {table} has no primary key and no unique "
                               "key over NOT NULL columns") for note in verdict["notes"]), verdict
    assert source.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE FULL_NAME = %s",
                       (table,)) == [(0,)]
    assert sorted(target.table(schema, "kl")) == [(1, "changed"), (2, "y")]
    cluster.set_status("v-keyless", "STOP")


PEOPLE = ("CREATE TABLE `{schema}`.people (id INT PRIMARY KEY, first VARCHAR(20), "
          "last VARCHAR(20), email VARCHAR(60), secret VARCHAR(20))")
PEOPLE_COPY = ("CREATE TABLE `{schema}`.people_copy (id INT PRIMARY KEY, given VARCHAR(20), "
               "last VARCHAR(20), email VARCHAR(60), full_name VARCHAR(41), "
               "origin VARCHAR(10), secret VARCHAR(20) DEFAULT 'kept')")
ORDERS = "CREATE TABLE `{schema}`.{table} (id INT PRIMARY KEY, uid INT, note VARCHAR(20))"
LOGS = "CREATE TABLE `{schema}`.logs (id INT PRIMARY KEY, email VARCHAR(60), note VARCHAR(9))"


def test_through_renames_excluded_and_virtual_columns_and_shards_on_two_targets(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    cluster.sandbox.up(second_target=True)
    target2 = Database(cluster.sandbox, "target2")
    base = f"t_{uuid.uuid4().hex[:8]}"
    for db in (source, target):
        db.execute(f"CREATE DATABASE `{base}`")
        db.execute(LOGS.format(schema=base))
    source.execute(PEOPLE.format(schema=base))
    source.execute(ORDERS.format(schema=base, table="orders"))
    target.execute(PEOPLE_COPY.format(schema=base))
    for index in range(4):
        db = target if index < 2 else target2
        db.execute(f"CREATE DATABASE `{base}_{index}`")
        for table in ("orders_0", "orders_1"):
            db.execute(ORDERS.format(schema=f"{base}_{index}", table=table))
    servers, secret = cluster.sandbox.servers(), f"file:{cluster.sandbox.secret_file}"
    sources = [{"name": name, "host": "127.0.0.1", "port": servers[name].port, "user": "setl",
                "password": secret} for name in ("source", "target", "target2")]
    rule = {"column": "uid", "algorithm": "modulo"}
    cluster.apply([{"name": "v-maps", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": [
            {"source": f"{base}.people", "target": f"{base}.people_copy",
             "columns": {"exclude": ["secret"]},
             "column_pairs": [{"source": "first", "target": "given"}],
             "virtual_columns": [
                 {"name": "full_name", "expression": "concat_ws(' ', first, last)"},
                 {"name": "origin", "value": "eu-1"}]},
            {"source": f"{base}.orders", "shard": rule,
             "target": {"namespace": f"{base}_[0-1]", "table": "orders_[0-1]"}},
            {"source": f"{base}.orders", "shard": rule, "target": {
                "datasource": "target2", "namespace": f"{base}_[2-3]", "table": "orders_[0-1]"}},
            {"source": f"{base}.logs", "target": f"{base}.logs",
             "processor": "setl_examples:mask_email"}]}]}], sources)
    cluster.set_status("v-maps", "START")
    cluster.wait_running("v-maps")
    source.execute(f"INSERT INTO `{base}`.people VALUES " + ", ".join(
        f"({i}, 'First{i}', 'Last{i}', 'p{i}@x.org', 's{i}')" for i in range(1, 61)))
    source.execute(f"INSERT INTO `{base}`.orders VALUES " + ", ".join(
        f"({i}, {i * 3}, 'n{i}')" for i in range(1, 81)))
    source.execute(f"INSERT INTO `{base}`.logs VALUES (1, 'a@x.org', 'one'), (2, NULL, 'two')")

    def slot(uid: int) -> tuple[Database, str]:
        number = uid % 8
        return (target if number < 4 else target2), f"`{base}_{number // 2}`.orders_{number % 2}"

    wait_for(lambda: len(target.table(base, "people_copy")) == 60, 60, "60 people")
    wait_for(lambda: sum(db.rows(f"SELECT COUNT(*) FROM {name}")[0][0] for db, name in
                         (slot(u) for u in range(8))) == 80, 60, "80 orders")
    code, report = verify(cluster, capsys, "v-maps")
    assert code == 4, report  # equal, but logs (a processor's) not verified
    [result] = report["reports"]
    assert {t["table"]: t["method"] for t in result["tables"]} == {
        f"{base}.orders": "rows", f"{base}.people": "rows"}
    assert [s["table"] for s in result["skipped"]] == [f"{base}.logs"]
    assert "processor setl_examples:mask_email" in result["skipped"][0]["reason"]
    copy = f"`{base}`.people_copy"
    target.script(f"UPDATE {copy} SET full_name = 'wrong' WHERE id = 3",
                  f"UPDATE {copy} SET given = 'Other' WHERE id = 4",
                  f"UPDATE {copy} SET secret = 'not compared' WHERE id = 6",  # excluded
                  f"DELETE FROM {copy} WHERE id = 5")
    db, here = slot(21)  # order 7 (uid 21) moved to the next slot
    db.execute(f"DELETE FROM {here} WHERE id = 7")
    db2, there = slot(22)
    db2.execute(f"INSERT INTO {there} VALUES (7, 21, 'n7')")
    db, extra = slot(4)
    db.execute(f"INSERT INTO {extra} VALUES (999, 4, 'stray')")
    db, row8 = slot(24)
    db.execute(f"UPDATE {row8} SET note = 'bad' WHERE id = 8")
    code, report = verify(cluster, capsys, "v-maps", "--chunk-size", "15")
    assert code == 1
    copy_name = f"{base}.people_copy"
    assert found(report, f"{base}.people") == {
        "missing": {((5,), copy_name)}, "extra": set(),
        "different": {((3,), copy_name), ((4,), copy_name)}}
    name = lambda uid: slot(uid)[1].replace("`", "")  # noqa: E731
    assert found(report, f"{base}.orders") == {
        "missing": {((7,), name(21))}, "extra": {((7,), name(22)), ((999,), name(4))},
        "different": {((8,), name(24))}}
    code, report = verify(cluster, capsys, "v-maps", "--table", f"{base}.logs",
                          "--columns", "id,note")
    assert code == 0 and report["reports"][0]["tables"][0]["rows"] == 2
    code, report = verify(cluster, capsys, "v-maps", "--repair")
    assert code == 4, report
    assert verify(cluster, capsys, "v-maps")[0] == 4
    assert target.rows(f"SELECT secret FROM {copy} WHERE id = 6") == [("not compared",)]
    target2.close()
    cluster.set_status("v-maps", "STOP")


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
    assert int(verdict["rechecked"]) > 1, "no row changed under verify: the race was not run"
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


def test_a_column_the_target_names_in_another_case_is_compared(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """Column names ignore case: the stream writes the source's Email into the target's
    email. Verify matched names exactly, so it compared neither way's email: a wrong one
    on the target was never found nor repaired."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.cased (Id INT PRIMARY KEY, "
                         "Email VARCHAR(40))")
    t = f"`{schema}`.cased"
    target.execute(f"ALTER TABLE {t} CHANGE Id id INT, CHANGE Email email VARCHAR(40)")
    start(cluster, one_way("v-cased", schema, ["cased"]))
    source.execute(f"INSERT INTO {t} VALUES (1, 'a@x'), (2, 'b@x'), (3, 'c@x')")
    wait_equal(source, target, schema, ["cased"])
    target.execute(f"UPDATE {t} SET email = 'wrong' WHERE id = 2")
    table = f"{schema}.cased"
    for method in ("auto", "rows"):
        code, report = verify(cluster, capsys, "v-cased", "--compare", method)
        assert code == 1, report
        assert found(report, table) == {"missing": set(), "extra": set(),
                                        "different": {((2,), table)}}
    assert verify(cluster, capsys, "v-cased", "--repair")[0] == 0
    wait_equal(source, target, schema, ["cased"], timeout_s=30)
    cluster.set_status("v-cased", "STOP")


ODD = ("CREATE TABLE `{schema}`.{table} (id INT PRIMARY KEY, b BINARY(4), ts TIMESTAMP(6) NULL, "
       "name VARCHAR(20) CHARACTER SET sjis)")


def test_values_the_select_reads_otherwise_than_the_binlog_compare_equal_and_repair_once(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """The stream writes the binlog decoder's values: a BINARY without its zero padding, the
    zero TIMESTAMP(6) without its fraction, sjis text as its bytes. A SELECT gives them
    padded, with '.000000' and decoded (0x815F as '＼'): virtual columns computed from those
    differed from the stream's on every such row, and --repair rewrote them, again and again."""
    schema = make_schema(source, target, ODD.format(schema="{schema}", table="odd"),
                         ODD.format(schema="{schema}", table="plain"))
    target.execute(f"ALTER TABLE `{schema}`.odd ADD vb INT, ADD vt VARCHAR(40), ADD vn INT")
    channel = one_way("v-odd", schema, ["odd", "plain"])
    channel["pipelines"][0]["pairs"][0]["virtual_columns"] = [
        {"name": "vb", "expression": "length(b)"}, {"name": "vt", "expression": "str(ts)"},
        {"name": "vn", "expression": "length(name)"}]
    start(cluster, channel)
    values = ("(1, X'6162', '0000-00-00 00:00:00.000000', X'815F82A0'), "
              "(2, X'61626364', '2024-01-02 03:04:05.123456', X'82A0'), (3, X'', NULL, ''), "
              "(4, NULL, '0000-00-00 00:00:00', 'abc')")
    source.script("SET SESSION sql_mode = ''", f"INSERT INTO `{schema}`.odd VALUES {values}",
                  f"INSERT INTO `{schema}`.plain VALUES {values}",
                  "SET SESSION sql_mode = DEFAULT")
    wait_equal(source, target, schema, ["plain"])
    wait_for(lambda: len(target.table(schema, "odd")) == 4, 60, "4 odd rows")
    decoded = [(b"ab", "0000-00-00 00:00:00", b"\x81\x5f\x82\xa0"),  # as the stream has
               (b"abcd", "2024-01-02 03:04:05.123456", b"\x82\xa0"), ("", None, ""),
               (None, "0000-00-00 00:00:00", b"abc")]  # them (length(): bytes' count)
    assert sorted(target.rows(f"SELECT id, vb, vt, vn FROM `{schema}`.odd")) == [
        (i, None if b is None else len(b), ts, len(name))
        for i, (b, ts, name) in enumerate(decoded, 1)]
    odd, plain = f"{schema}.odd", f"{schema}.plain"
    for method in ("auto", "rows"):
        code, report = verify(cluster, capsys, "v-odd", "--compare", method)
        assert code == 0, report
        methods = {t["table"]: t["method"] for t in report["reports"][0]["tables"]}
        assert methods == {odd: "rows", plain: "sql" if method == "auto" else "rows"}
    target.script(f"UPDATE `{schema}`.odd SET vb = 9 WHERE id = 2",
                  f"UPDATE `{schema}`.plain SET name = X'815F' WHERE id = 2")
    for method in ("auto", "rows"):
        code, report = verify(cluster, capsys, "v-odd", "--compare", method)
        assert code == 1, report
        assert found(report, odd)["different"] == {((2,), odd)}
        assert found(report, plain)["different"] == {((2,), plain)}
    code, report = verify(cluster, capsys, "v-odd", "--repair")
    assert code == 0, report
    repaired = {t["table"]: t for t in report["reports"][0]["tables"]}
    assert repaired[odd]["repaired"] == 1 and repaired[plain]["repaired"] == 1
    wait_equal(source, target, schema, ["plain"], timeout_s=30)
    code, report = verify(cluster, capsys, "v-odd", "--repair")
    assert code == 0, report  # nothing left to repair: no loop
    assert all(not t.get("repaired") for t in report["reports"][0]["tables"])
    cluster.set_status("v-odd", "STOP")
