"""``setl verify`` on real servers where a verdict of "equal" was false: a keyless table
compared by its pair's ``key_columns`` (which need not be unique) whose target holds a row
too many or too few beside rows of the same key — the very trace of a replayed keyless
insert; a target table that does not exist; and tables left out of the comparison."""

from __future__ import annotations

import json
from typing import Any

from manager import cli
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal
from tests.integration.test_verify import found, start

KEYLESS = "CREATE TABLE `{schema}`.kl (a INT NOT NULL, v VARCHAR(9))"
ITEMS = "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(20))"


def verify(cluster: Cluster, capsys: Any, channel: str, *args: str) -> tuple[int, dict]:
    """``setl -o json verify CHANNEL ARGS``: the exit code and the report."""
    capsys.readouterr()
    code = cli.main(["--manager", cluster.manager_address, "-o", "json", "verify", channel,
                     *args])
    out = capsys.readouterr()
    assert code in (0, 1, 4), out.err
    return code, json.loads(out.out)


def test_a_keyless_table_with_a_row_too_many_or_too_few_beside_alike_rows_differs(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """Keys held by several rows, by key_columns (a): the target's rows were taken by key,
    the last row winning, so a key whose target lost a row and held another twice, or held
    one row twice, passed for equal (exit 0). By the sql method a key whose two rows alike
    both changed alike cancelled out in the chunk's XOR too. Each is now a difference, by
    both methods, and --repair writes nothing and says why."""
    schema = make_schema(source, target, KEYLESS)
    channel = one_way("v-dups", schema, ["kl"])
    channel["pipelines"][0]["pairs"][0]["key_columns"] = ["a"]
    start(cluster, channel)
    t = f"`{schema}`.kl"
    source.execute(f"INSERT INTO {t} VALUES (1, 'x'), (1, 'y'), (2, 'z'), (3, 'p'), (3, 'p'), "
                   "(4, 'w'), (4, 'w'), (5, 'e'), (5, 'f'), (6, 'g')")
    wait_equal(source, target, schema, ["kl"])
    for method in ("auto", "rows"):
        code, report = verify(cluster, capsys, "v-dups", "--compare", method)
        assert code == 0, report
    target.script(f"UPDATE {t} SET v = 'y' WHERE a = 1 AND v = 'x'",  # lost x, y twice
                  f"INSERT INTO {t} VALUES (2, 'z')",  # one too many
                  f"UPDATE {t} SET v = 'q' WHERE a = 3",  # two alike changed alike
                  f"DELETE FROM {t} WHERE a = 4 LIMIT 1")  # one too few
    table = f"{schema}.kl"
    for method in ("auto", "rows"):
        # a chunk a key: key 3's chunk sums differ only by a sum, not by an XOR
        code, report = verify(cluster, capsys, "v-dups", "--compare", method,
                              "--chunk-size", "1")
        [verdict] = report["reports"][0]["tables"]
        assert verdict["method"] == ("sql" if method == "auto" else "rows")
        assert code == 1, report
        assert found(report, table) == {"missing": set(), "extra": set(), "different": {
            ((1,), table), ((2,), table), ((3,), table), ((4,), table)}}, report
        assert any(note.startswith("2 key(s) of (a) have another number of rows on a target")
                   for note in verdict["notes"]), verdict
    code, report = verify(cluster, capsys, "v-dups", "--repair")
    [verdict] = report["reports"][0]["tables"]
    assert code == 1 and verdict.get("repaired", 0) == 0 and verdict["remaining"] == 4, verdict
    assert any(note.startswith(f"not repaired: table {table} has no primary key")
               for note in verdict["notes"]), verdict
    assert source.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE FULL_NAME = %s",
                       (table,)) == [(0,)]
    cluster.set_status("v-dups", "STOP")


def test_a_missing_target_table_differs_and_a_table_left_out_is_not_equal(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """A table verify leaves out (keyless, no key_columns) was listed as "not verified"
    above the verdict "equal", exit 0; a target table that does not exist was such a table
    too, though every source row is missing there."""
    schema = make_schema(source, target, KEYLESS, ITEMS)
    start(cluster, one_way("v-left", schema, ["kl", "items"]))
    source.execute(f"INSERT INTO `{schema}`.kl VALUES (1, 'x'), (1, 'x')")
    source.execute(f"INSERT INTO `{schema}`.items VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    wait_equal(source, target, schema, ["kl", "items"])
    code, report = verify(cluster, capsys, "v-left")
    [result] = report["reports"]
    assert code == 4 and report["exit_code"] == 4, report
    assert [t["table"] for t in result["tables"]] == [f"{schema}.items"]
    assert [s["table"] for s in result["skipped"]] == [f"{schema}.kl"]
    capsys.readouterr()
    assert cli.main(["--manager", cluster.manager_address, "verify", "v-left"]) == 4
    assert capsys.readouterr().out.rstrip().endswith(
        "no difference found in the tables verified, but not proven equal: 1 table(s) not "
        "verified")
    code, report = verify(cluster, capsys, "v-left", "--table", f"{schema}.items")
    assert code == 0, report
    target.execute(f"DROP TABLE `{schema}`.items")
    for args in ((), ("--repair",)):
        code, report = verify(cluster, capsys, "v-left", "--table", f"{schema}.items", *args)
        [verdict] = report["reports"][0]["tables"]
        assert code == 1, report
        assert (verdict["missing"], verdict["differing_keys"], verdict["rows"]) == (3, 3, 3)
        assert verdict["notes"][0].startswith(f"target table target:{schema}.items does not "
                                              "exist: every row"), verdict
    assert verdict["remaining"] == 3 and verdict["notes"][1].startswith("not repaired: ")
    cluster.set_status("v-left", "STOP")
