"""Lookup (反查) against a real source: chunked key queries, composite and binary keys; and
the other reads by composite key (the free door's, verify's, the two-way check's) in
charsets but utf8mb4."""

from __future__ import annotations

import dataclasses
import pickle

from node.changes import ChangeType, TargetChange
from node.charsets import Encoded
from node.extract.chunks import SplitKey
from node.extract.lookup import Lookup
from node.extract.reads import columns_of
from node.snapshot.tasks import ReadTask, run
from node.target.mysql.currentrows import current_rows
from node.target.mysql.facts import read_facts
from node.target.mysql.twoway import LoopGuard
from node.verify.readers import keys_in as verify_keys_in
from node.verify.values import decoded, read_columns, select_list
from shared import confinement
from shared.model import DataSource
from shared.secrets import SecretRef
from tests.devcluster import make_schema


def source_of(sandbox) -> DataSource:
    return DataSource("source", "127.0.0.1", sandbox.servers()["source"].port, "setl",
                      SecretRef(f"file:{sandbox.secret_file}"))


def test_rows_by_composite_key_in_chunks(sandbox, source, target):
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.pairs (a INT, b VARBINARY(8), "
                         "v VARCHAR(20), PRIMARY KEY (a, b))")
    source.execute(f"INSERT INTO `{schema}`.pairs VALUES " + ", ".join(
        f"({i}, UNHEX('{i % 256:02x}00ff'), 'v{i}')" for i in range(1, 1201)))
    wanted = [(i, bytes([i % 256, 0, 255])) for i in range(1, 1201, 2)] + [(5000, b"\x00")]
    with Lookup(source_of(sandbox), chunk=250) as lookup:
        found = lookup.rows(schema, "pairs", ("a", "b"), wanted)
        assert lookup.queries == 3  # 601 keys in chunks of 250
    assert len(found) == 600 and (5000, b"\x00") not in found
    assert found[(7, b"\x07\x00\xff")] == {"a": 7, "b": b"\x07\x00\xff", "v": "v7"}


def test_rows_come_as_the_binlog_gives_them_and_match_as_the_server_compares(sandbox, source,
                                                                             target):
    """A looked-up FLOAT was written with the six digits a SELECT prints (1234.57); a join's
    value the key's collation takes for another ('ABC' for 'abc') found no row; a join on a
    latin1 key must still work (matched by the server, not by Python)."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.t (k VARCHAR(9) CHARACTER "
                         "SET latin1 PRIMARY KEY, f FLOAT, b BIT(3), bin BINARY(4))")
    source.execute(f"INSERT INTO `{schema}`.t VALUES ('abc', 1234.567, b'101', X'6100'), "
                   "('é', 16777216, b'0', X'00')")
    with Lookup(source_of(sandbox)) as lookup:
        found = lookup.matched(schema, "t", "k", ["ABC", "abc", "É", "zz"])
        rows = lookup.rows(schema, "t", ("k",), [("abc",)])
    assert found["ABC"] == found["abc"] == rows[("abc",)] == {
        "k": "abc", "f": 1234.5670166015625, "b": 5, "bin": b"a"}
    assert found["É"] == {"k": "é", "f": 16777216.0, "b": 0, "bin": ""}
    assert "zz" not in found


def test_a_composite_key_of_text_kept_as_bytes_finds_its_row_in_another_charset(
        sandbox, source, target):
    """sjis '日本' went as bytes: it matched no row of a utf8mb4 column (a column group's
    value was written NULL), and the row found in an sjis one came back keyed as read.
    MariaDB 10.11's (a, b) IN list of several rows compares a value of another charset
    unconverted: sjis text with its charset, or a latin1 'é' sent as UTF-8, found nothing."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.u (k VARCHAR(9) CHARACTER "
                         "SET utf8mb4, n INT, v INT, PRIMARY KEY (k, n))")
    source.script(f"CREATE TABLE `{schema}`.s (k VARCHAR(9) CHARACTER SET sjis, n INT, v INT, "
                  "PRIMARY KEY (k, n))",
                  f"INSERT INTO `{schema}`.u VALUES ('日本', 1, 10), ('abc', 1, 11)",
                  f"INSERT INTO `{schema}`.s VALUES (X'93FA967B', 1, 20), ('ABC', 1, 21)",
                  f"CREATE TABLE `{schema}`.l (k VARCHAR(9) CHARACTER SET latin1, n INT, "
                  "PRIMARY KEY (k, n))",
                  f"INSERT INTO `{schema}`.l VALUES ('é', 1), ('x', 1)")
    nihon = Encoded(b"\x93\xfa\x96\x7b", "sjis")
    with Lookup(source_of(sandbox)) as lookup:
        converted = lookup.rows(schema, "u", ("k", "n"), [(nihon, 1), ("ABC", 1)])
        same = lookup.rows(schema, "s", ("k", "n"), [(nihon, 1), ("abc", 1), ("ABC", 1)])
        latin = lookup.rows(schema, "l", ("k", "n"), [("é", 1), ("zz", 1)])
        assert lookup.queries == 3  # one each
    assert converted == {(nihon, 1): {"k": "日本", "n": 1, "v": 10},
                         ("ABC", 1): {"k": "abc", "n": 1, "v": 11}}
    assert same[(nihon, 1)]["v"] == 20 and same[("abc", 1)]["v"] == same[("ABC", 1)]["v"] == 21
    assert latin == {("é", 1): {"k": "é", "n": 1}}


def test_a_free_door_read_finds_latin1_and_sjis_composite_keys(sandbox, source, target):
    """A free-door read of several keys ((k, n) IN ((…), (…))) found no row of a latin1 'é'
    (MariaDB 10.11 compares it unconverted): the request was noted missing, and a delete
    asked of a row the source still has was never followed by the row — the target lost
    it. The found rows' sjis keys are noted loaded, not missing."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.l (k VARCHAR(9) CHARACTER "
                         "SET latin1, n INT, v INT, PRIMARY KEY (k, n))")
    source.script(f"CREATE TABLE `{schema}`.s (k VARCHAR(9) CHARACTER SET sjis, n INT, v INT, "
                  "PRIMARY KEY (k, n))",
                  f"INSERT INTO `{schema}`.l VALUES ('é', 1, 10), ('é', 2, 20), ('x', 1, 30)",
                  f"INSERT INTO `{schema}`.s VALUES (X'93FA967B', 1, 40), ('x', 1, 50)")
    nihon = Encoded(b"\x93\xfa\x96\x7b", "sjis")
    reads = {}
    with source.conn.cursor() as cursor:
        for table in ("l", "s"):
            columns = columns_of(cursor, schema, table)
            reads[table] = run(ReadTask(
                1, source_of(sandbox), confinement.current(),
                SplitKey(schema, table, ("k", "n"), "varchar"), columns, "",
                keys=(("é", 1), ("zz", 1)) if table == "l" else (("日本", 1), ("x", 1)),
                deletes=(("é", 2),) if table == "l" else ()))
    latin, sjis = reads["l"], reads["s"]
    assert sorted(pickle.loads(latin.rows)) == [("é", 1, 10), ("é", 2, 20)]
    assert latin.missing == (("zz", 1),) and latin.deletes == (("é", 2),)
    assert sorted(pickle.loads(sjis.rows), key=lambda row: row[2]) == [
        (nihon, 1, 40), (Encoded(b"x", "sjis"), 1, 50)]  # as its bytes, as the binlog gives
    assert sjis.missing == ()


def test_verify_finds_rows_by_latin1_and_sjis_composite_keys(sandbox, source, target):
    """Verify re-reads keys by ``(k, n) IN ((…), (…))``: a latin1 'é' found no row, nor did
    sjis text (read as its bytes) in an sjis column or in a target column of another charset
    that verify reads converted back: the key was taken for missing there, and reported (and
    repaired) as a difference."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.l (k VARCHAR(9) CHARACTER "
                         "SET latin1, n INT, PRIMARY KEY (k, n))")
    source.script(f"CREATE TABLE `{schema}`.s (k VARCHAR(9) CHARACTER SET sjis, n INT, "
                  "PRIMARY KEY (k, n))",
                  f"CREATE TABLE `{schema}`.u (k VARCHAR(9) CHARACTER SET utf8mb4, n INT, "
                  "PRIMARY KEY (k, n))",
                  f"INSERT INTO `{schema}`.l VALUES ('é', 1), ('x', 1)",
                  f"INSERT INTO `{schema}`.s VALUES (X'93FA967B', 1), ('x', 1)",
                  f"INSERT INTO `{schema}`.u VALUES ('日本', 1), ('x', 1)")
    nihon = Encoded(b"\x93\xfa\x96\x7b", "sjis")
    found = {}
    with source.conn.cursor() as cursor:
        for table, keys in (("l", [("é", 1), ("zz", 1)]), ("s", [(nihon, 1), ("x", 1)]),
                            ("u", [(nihon, 1), ("x", 1)])):
            columns = read_columns(cursor, schema, table)
            if table == "u":  # as verify reads a target column of sjis text's source
                columns = [dataclasses.replace(columns[0], charset="sjis", converted=True,
                                               own_charset="utf8mb4"), columns[1]]
            condition, params = verify_keys_in(("k", "n"), keys, columns)
            cursor.execute(f"SELECT {select_list(columns)} FROM `{schema}`.{table} WHERE "
                           f"{condition}", params)
            found[table] = set(decoded(columns, cursor.fetchall()))
    assert found["l"] == {("é", 1)}
    assert found["s"] == found["u"] == {(nihon, 1), (Encoded(b"x", "sjis"), 1)}


def test_the_two_way_check_finds_latin1_and_sjis_rows_as_the_binlog_gives_them(
        sandbox, source, target):
    """The conflict check reads the target's rows by ``(k, n) IN ((…), (…))``: a latin1 'é'
    or sjis text found no row, and sjis text came back as text beside the before image's
    bytes — every such update looked like a conflict, and the losing side left it out."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.l (k VARCHAR(9) CHARACTER "
                         "SET latin1, n INT, v VARCHAR(9) CHARACTER SET sjis, "
                         "PRIMARY KEY (k, n))")
    target.script(f"CREATE TABLE `{schema}`.s (k VARCHAR(9) CHARACTER SET sjis, n INT, "
                  "v VARCHAR(9) CHARACTER SET sjis, f FLOAT, PRIMARY KEY (k, n))",
                  f"INSERT INTO `{schema}`.l VALUES ('é', 1, X'93FA'), ('é', 2, 'a')",
                  f"INSERT INTO `{schema}`.s VALUES (X'93FA967B', 1, X'967B', 1.5), "
                  "('x', 1, '', 2.5)")
    nihon, hon = Encoded(b"\x93\xfa\x96\x7b", "sjis"), Encoded(b"\x96\x7b", "sjis")
    latin = {"k": "é", "n": 1, "v": Encoded(b"\x93\xfa", "sjis")}
    sjis = {"k": nihon, "n": 1, "v": hon, "f": 1.5}
    changes = [TargetChange("target", schema, "l", ChangeType.UPDATE, ("k", "n"), ("é", 1),
                            {**latin, "v": "b"}, seq=1, before=latin),
               TargetChange("target", schema, "s", ChangeType.UPDATE, ("k", "n"), (nihon, 1),
                            {**sjis, "v": "c"}, seq=2, before=sjis),
               TargetChange("target", schema, "l", ChangeType.UPDATE, ("k", "n"), ("é", 2),
                            {**latin, "n": 2, "v": "d"}, seq=3,
                            before={**latin, "n": 2, "v": Encoded(b"a", "sjis")})]
    with target.conn.cursor() as cursor:
        facts = {table: read_facts(cursor, schema, table) for table in ("l", "s")}
        found = current_rows(cursor, schema, "s", ("k", "n"), [(nihon, 1), ("x", 1)],
                             facts["s"].columns)
        loser = LoopGuard("lookup-twoway", "lookup-twoway-b", wins_conflicts=False)
        kept = loser.resolve(cursor, changes, 1, facts=lambda target: facts[target[2]])
        target.execute("ROLLBACK")
    assert loser.conflicts == 0 and kept == changes
    assert {row["v"] for row in found.values()} == {hon, ""} and len(found) == 2


COLLATED = ("CREATE TABLE `{schema}`.c (tenant VARCHAR(20) CHARACTER SET utf8mb4 COLLATE "
            "utf8mb4_unicode_ci, id INT, v INT, PRIMARY KEY (tenant, id))",
            "CREATE TABLE `{schema}`.g (k VARCHAR(9) CHARACTER SET latin1 COLLATE "
            "latin1_general_cs, n INT, v INT, PRIMARY KEY (k, n))",
            "INSERT INTO `{schema}`.c VALUES ('Ärzte', 1, 10), ('acme', 2, 20), "
            "('日本', 3, 30)",
            "INSERT INTO `{schema}`.g VALUES ('A', 1, 1), ('é', 1, 2), ('b', 1, 3)",
            # rows enough that a read by key uses the primary key
            *(f"INSERT INTO `{{schema}}`.{table} SELECT CONCAT('f', seq), seq, 0 FROM "
              "`{schema}`.seq_1_to_300" for table in ("c", "g")))
# each table's keys asked and the row each finds: 'a' is not latin1_general_cs's 'A'
NIHON = Encoded("日本".encode("sjis"), "sjis")
ASKED = {"c": {("Ärzte", 1): ("Ärzte", 1, 10), ("acme", 2): ("acme", 2, 20),
               (NIHON, 3): ("日本", 3, 30), ("zz", 9): None},
         "g": {("A", 1): ("A", 1, 1), ("é", 1): ("é", 1, 2), ("a", 1): None, ("B", 1): None}}


def test_composite_keys_of_columns_in_a_collation_not_their_charsets_default(
        sandbox, source, target):
    """The reads by composite key converted each text value into its column's charset
    (``CONVERT(… USING utf8mb4)``), which gives the charset's default collation as implicit
    as the column's: a utf8mb4_unicode_ci or latin1_general_cs key column failed with
    "Illegal mix of collations" (1267) in the lookup, and in the free door's read, verify's
    and the two-way check's of one key (``(a, b) IN ((…))`` is ``=``; several keys passed).
    In the column's collation they find its rows as the column compares them
    (latin1_general_cs: 'a' is not 'A') and use the key's index."""
    schema = make_schema(source, target, *COLLATED)
    names = {"c": ("tenant", "id"), "g": ("k", "n")}
    asked = [(table, list(keys), {row for row in keys.values() if row})
             for table, keys in ASKED.items()] + [
        (table, [key], {row} if row else set())
        for table, keys in ASKED.items() for key, row in keys.items()]
    with Lookup(source_of(sandbox)) as lookup:
        for table, keys, rows in asked:
            found = lookup.rows(schema, table, names[table], keys)
            assert {tuple(row.values()) for row in found.values()} == rows
            assert set(found) == {key for key in keys if ASKED[table][key]}
    with source.conn.cursor() as cursor:
        for table, keys, rows in asked:
            read = run(ReadTask(1, source_of(sandbox), confinement.current(),
                                SplitKey(schema, table, names[table], "varchar"),
                                columns_of(cursor, schema, table), "",
                                keys=tuple(keys[:2]), deletes=tuple(keys[2:])))
            assert set(pickle.loads(read.rows)) == rows  # the free door's read
            columns = read_columns(cursor, schema, table)
            condition, params = verify_keys_in(names[table], keys, columns)
            cursor.execute(f"SELECT {select_list(columns)} FROM `{schema}`.{table} WHERE "
                           f"{condition}", params)
            assert set(decoded(columns, cursor.fetchall())) == rows  # verify's
            cursor.execute(f"EXPLAIN SELECT * FROM `{schema}`.{table} WHERE {condition}",
                           params)
            plan = cursor.fetchone()  # the key's index is used (no row: none to use)
            assert plan[5] == ("PRIMARY" if rows else None), plan
    with target.conn.cursor() as cursor:
        for table, keys, rows in asked:  # the two-way check's
            found = current_rows(cursor, schema, table, names[table], keys,
                                 read_facts(cursor, schema, table).columns)
            target.execute("ROLLBACK")
            assert {tuple(row.values()) for row in found.values()} == rows
