"""``setl verify`` by the sql method over many chunks on real servers: the node's threads
take runs of chunks as they end one (the last runs shrink to single chunks), and the
differences in the first, middle and last chunks (past the last bound too) are all found,
unthrottled and with ``--rate`` (its waves)."""

from __future__ import annotations

import json
from typing import Any

from manager import cli
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal

ROWS = ("CREATE TABLE `{schema}`.many (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(20) NOT NULL, "
        "pad VARCHAR(20))")


def verify(cluster: Cluster, capsys: Any, *args: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = cli.main(["--manager", cluster.manager_address, "-o", "json", "verify", "v-many",
                     *args])
    out = capsys.readouterr()
    assert code in (0, 1), out.err
    return code, json.loads(out.out)


def test_differences_in_every_part_of_many_chunks_are_found(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    schema = make_schema(source, target, ROWS)
    cluster.apply([one_way("v-many", schema, ["many"])])
    cluster.set_status("v-many", "START")
    cluster.wait_running("v-many")
    source.execute(f"INSERT INTO `{schema}`.many VALUES " + ", ".join(
        f"({i}, {i % 7}, 'c{i}', {'NULL' if i % 5 == 0 else repr(f'p{i}')})"
        for i in range(1, 2001)))
    wait_equal(source, target, schema, ["many"])
    table = f"{schema}.many"
    for args in ((), ("--rate", "100000")):
        code, report = verify(cluster, capsys, "--chunk-size", "20", *args)
        [verdict] = report["reports"][0]["tables"]
        assert code == 0 and verdict["method"] == "sql" and verdict["rows"] == 2000, verdict
        assert verdict["chunks"] >= 90
    t = f"`{schema}`.many"
    # the first chunk, the middle, the last runs (single chunks), past the last bound
    target.script(f"DELETE FROM {t} WHERE id IN (1, 1000, 1999)",
                  f"UPDATE {t} SET pad = '' WHERE id IN (5, 1005, 1995)",  # NULL → ''
                  f"UPDATE {t} SET c = 'c 2' WHERE id = 2",
                  f"UPDATE {t} SET k = k + 1 WHERE id = 2000",
                  f"INSERT INTO {t} VALUES (0, 0, 'x', 'x'), (2001, 0, 'x', 'x'), "
                  "(99999, 0, 'x', 'x')")
    for args in ((), ("--rate", "100000")):
        code, report = verify(cluster, capsys, "--chunk-size", "20", *args)
        [verdict] = report["reports"][0]["tables"]
        found: dict[str, set[int]] = {"missing": set(), "extra": set(), "different": set()}
        for difference in verdict["differences"]:
            assert difference["target"] == f"target:{table}"
            found[difference["kind"]].add(json.loads(difference["key"])[0])
        assert code == 1 and found == {"missing": {1, 1000, 1999}, "extra": {0, 2001, 99999},
                                       "different": {2, 5, 1005, 1995, 2000}}, verdict
    cluster.set_status("v-many", "STOP")
