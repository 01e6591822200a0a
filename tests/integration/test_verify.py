"""``setl verify`` and ``--repair`` on real servers (MariaDB source and two targets,
ZooKeeper, a node with Spark): equal tables, each kind of corrupted target row found
exactly by both methods, a keyless table, verify through renames, excluded and virtual
columns and shard routing over two targets. Values and keys that compare subtly:
test_verify_compare.py; verify beside other writers (racing it, or writing into the same
table): test_verify_writers.py."""

from __future__ import annotations

import json
import uuid
from typing import Any

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
