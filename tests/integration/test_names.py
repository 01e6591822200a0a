"""Names that look like placeholders (``%``, ``%%``, ``%s``, ``{}``) on real servers: a row
for `` `t%%x` `` lands in `` `t%%x` ``, never in `` `t%x` ``, through the snapshot's chunk
reads, the stream, DDL replay, the free door and verify with its repair."""

from __future__ import annotations

import json
import uuid
from typing import Any

from manager import cli
from shared.identifiers import qualified, quote, short_form
from shared.retl import encode_key
from tests.devcluster import Cluster, Database, wait_equal

TABLES = {
    "t%x": "(id INT PRIMARY KEY, `100%` VARCHAR(10))",
    "t%%x": "(id INT PRIMARY KEY, `%s` VARCHAR(10), `{}` INT)",
    "k%": "(`a%` INT, `b%s` VARCHAR(10))",  # keyless: duplicates matched by every column
}


def test_percent_and_brace_names_reach_their_own_tables_in_every_phase(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    schema = f"p%s{{}}_{uuid.uuid4().hex[:8]}"
    t, tt, k = (qualified(schema, name) for name in TABLES)
    for db in (source, target):
        db.execute(f"CREATE DATABASE {quote(schema)}")
        for name, columns in TABLES.items():
            db.execute(f"CREATE TABLE {qualified(schema, name)} {columns}")
    source.execute(f"USE {quote(schema)}")  # (where seq_1_to_N is found)
    source.script(  # before the start: copied by snapshots, chunk by chunk
        f"INSERT INTO {t} SELECT seq, CONCAT(seq, '%') FROM seq_1_to_300",
        f"INSERT INTO {tt} SELECT seq, CONCAT('%s', seq), seq FROM seq_1_to_300")
    name = "names-percent"
    cluster.apply([{"name": name, "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "snapshot_chunk_size": 50,
        "ddl_sync": True,
        "pairs": [{"source": short_form(schema, table), "target": short_form(schema, table)}
                  for table in TABLES]}]}])
    cluster.set_status(name, "START")
    cluster.wait_running(name)
    manager = ["--manager", cluster.manager_address, "snapshot", name, "--wait", "--table"]
    # a condition with a % in a name and in a string, then a whole table
    assert cli.main([*manager, short_form(schema, "t%x"), "--where", "`100%` LIKE '1%'"]) == 0
    assert target.rows(f"SELECT COUNT(*) FROM {t}") == \
        source.rows(f"SELECT COUNT(*) FROM {t} WHERE `100%` LIKE '1%'")
    assert cli.main([*manager, short_form(schema, "t%x")]) == 0
    assert cli.main([*manager, short_form(schema, "t%%x")]) == 0
    source.execute(f"INSERT INTO {k} VALUES (1, '%'), (1, '%'), (2, '%s'), (NULL, NULL)")
    source.script(  # the stream: each kind of change, and DDL replayed on the target
        f"UPDATE {t} SET `100%` = '%%' WHERE id = 1",
        f"UPDATE {tt} SET id = 1000 WHERE id = 2", f"DELETE FROM {t} WHERE id = 3",
        f"UPDATE {k} SET `b%s` = '%d' WHERE `a%` = 1 LIMIT 1",
        f"DELETE FROM {k} WHERE `a%` IS NULL LIMIT 1",
        f"ALTER TABLE {t} ADD COLUMN `5%` INT DEFAULT 5",
        f"INSERT INTO {t} VALUES (301, 'after', 55)",
        f"INSERT INTO {k} VALUES (1, '%')")
    wait_equal(source, target, schema, list(TABLES), 90)
    assert target.rows(f"SELECT `100%`, `5%` FROM {t} WHERE id IN (1, 301) ORDER BY id") == \
        [("%%", 5), ("after", 55)]
    assert target.rows(f"SELECT COUNT(*) FROM {tt}") == [(300,)]

    # the free door: rows never in the binlog, asked for by key
    source.execute("SET SESSION sql_log_bin = 0")
    source.script(f"INSERT INTO {t} VALUES (500, 'quiet', 1)",
                  f"INSERT INTO {tt} VALUES (500, 'quiet', 1)")
    source.execute("SET SESSION sql_log_bin = 1")
    source.conn.cursor().executemany(
        "INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA) VALUES (%s, 'I', %s)",
        [(short_form(schema, "t%x"), encode_key((500,))),
         (short_form(schema, "t%%x"), encode_key((500,)))])
    wait_equal(source, target, schema, list(TABLES))
    # and by `setl backfill`, with a condition holding % in a name and in a pattern
    source.execute("SET SESSION sql_log_bin = 0")
    source.script(f"UPDATE {tt} SET `{{}}` = -`{{}}` WHERE `%s` LIKE '%s1%'")
    source.execute("SET SESSION sql_log_bin = 1")
    assert cli.main(["--manager", cluster.manager_address, "--config",
                     str(cluster.workdir / "node.yaml"), "backfill", name, "--table",
                     short_form(schema, "t%%x"), "--where", "`%s` LIKE '%s1%'"]) == 0
    wait_equal(source, target, schema, list(TABLES))

    # verify finds a difference in `t%%x` only, and repair mends it
    target.execute(f"UPDATE {tt} SET `%s` = 'wrong' WHERE id = 7")
    target.execute(f"DELETE FROM {t} WHERE id = 8")
    report = _verify(capsys, cluster, name, 1)
    differences = {(table["table"], d["kind"], d["key"]) for r in report["reports"]
                   for table in r.get("tables", []) for d in table.get("differences", [])}
    assert differences == {(short_form(schema, "t%%x"), "different", "[7]"),
                           (short_form(schema, "t%x"), "missing", "[8]")}
    # (exit 4: the keyless table is not verified, so nothing is proven equal; it is named)
    report = _verify(capsys, cluster, name, 4, "--repair")
    assert {skip["table"] for r in report["reports"] for skip in r.get("skipped", [])} == \
        {short_form(schema, "k%")}
    wait_equal(source, target, schema, list(TABLES))
    cluster.set_status(name, "STOP")


def _verify(capsys: Any, cluster: Cluster, channel: str, code: int, *args: str) -> dict:
    capsys.readouterr()
    found = cli.main(["--manager", cluster.manager_address, "-o", "json", "verify", channel,
                      *args])
    out = capsys.readouterr()
    assert found == code, (out.out, out.err)
    return json.loads(out.out)
