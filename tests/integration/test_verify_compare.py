"""``setl verify`` on real servers, values and keys that compare subtly: rows that would
print alike told apart by the database's hash, keys that admit NULL, a column the target
names in another case, and values a SELECT reads otherwise than the binlog gives them."""

from __future__ import annotations

import json
from typing import Any

from manager import cli
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.test_verify import found, start, verify

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

