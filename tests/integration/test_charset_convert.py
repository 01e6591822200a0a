"""Text of a charset setl keeps as its bytes (sjis, greek: Python reads some of their
characters otherwise than the server) into target columns of another charset, as a legacy
to utf8mb4 migration has them: the target holds the source's characters converted by the
server, streamed, in multi-row INSERTs and where LOAD DATA would have written the bytes; a
character the target's charset lacks stops the pipeline instead of storing other bytes."""

from __future__ import annotations

from tests.devcluster import Database, make_schema, one_way, wait_for
from tests.integration.test_verify import found, start, verify

SOURCE = ("CREATE TABLE `{schema}`.conv (id INT PRIMARY KEY, s VARCHAR(10) CHARACTER SET sjis, "
          "g VARCHAR(10) CHARACTER SET greek, k VARCHAR(10) CHARACTER SET sjis)")
# k: a binary column holds the bytes (the same charset's keep theirs: test_types.py)
TARGET = ("CREATE TABLE `{schema}`.conv (id INT PRIMARY KEY, s VARCHAR(10) CHARACTER SET "
          "utf8mb4, g VARCHAR(10) CHARACTER SET utf8mb4, k VARBINARY(10))")
# sjis: half-width katakana 'ﾂｱ' (as UTF-8 bytes '±'), '日本', '＼'; greek 'αβγ'
ROWS = ((1, "C2B1", "E1E2E3", "C2B1"), (2, "93FA967B", "C1C2", "93FA967B"),
        (3, "815F", "41", "815F"))


def converted(db: Database, schema: str) -> list[tuple[object, ...]]:
    return db.rows(f"SELECT id, HEX(CONVERT(s USING utf8mb4)), HEX(CONVERT(g USING utf8mb4)), "
                   f"HEX(k) FROM `{schema}`.conv ORDER BY id")


def test_text_kept_as_bytes_is_converted_into_a_target_column_of_another_charset(
        cluster, source, target):
    schema = make_schema(source, target)
    source.execute(SOURCE.format(schema=schema))
    target.execute(TARGET.format(schema=schema))
    start(cluster, one_way("cs-convert", schema, ["conv"], load_data_min_rows=2))
    for row in ROWS:  # one statement each: multi-row INSERTs of one row
        source.execute(f"INSERT INTO `{schema}`.conv VALUES ({row[0]}, X'{row[1]}', "
                       f"X'{row[2]}', X'{row[3]}')")
    # a transaction of inserts only: LOAD DATA's way, which would write the bytes
    source.execute(f"INSERT INTO `{schema}`.conv SELECT seq, X'93FA967B', X'E1', X'C2B1' "
                   "FROM mysql.seq_10_to_30")
    source.execute(f"UPDATE `{schema}`.conv SET s = X'C2B1815F' WHERE id = 2")
    wait_for(lambda: len(converted(target, schema)) == 24 and
             converted(target, schema)[1][1] == converted(source, schema)[1][1], 60,
             "the rows on the target")
    assert converted(target, schema) == converted(source, schema)
    assert target.rows(f"SELECT HEX(s) FROM `{schema}`.conv WHERE id = 1") == [
        ("EFBE82EFBDB1",)]  # not C2B1, '±'
    cluster.set_status("cs-convert", "STOP")


def test_a_character_the_target_charset_lacks_stops_the_pipeline(cluster, source, target):
    schema = make_schema(source, target)
    source.execute(f"CREATE TABLE `{schema}`.narrow (id INT PRIMARY KEY, "
                   "s VARCHAR(10) CHARACTER SET sjis)")
    target.execute(f"CREATE TABLE `{schema}`.narrow (id INT PRIMARY KEY, "
                   "s VARCHAR(10) CHARACTER SET latin1)")
    start(cluster, one_way("cs-narrow", schema, ["narrow"]))
    source.execute(f"INSERT INTO `{schema}`.narrow VALUES (1, 'abc')")
    wait_for(lambda: target.table(schema, "narrow") == [(1, "abc")], 60, "the first row")
    source.execute(f"INSERT INTO `{schema}`.narrow VALUES (2, X'93FA967B')")  # '日本'
    wait_for(lambda: "Incorrect string value" in cluster.pipeline_state("cs-narrow").last_error,
             60, "the pipeline's stop")
    assert target.table(schema, "narrow") == [(1, "abc")]  # never '“ú–{'
    cluster.set_status("cs-narrow", "STOP")


def test_verify_compares_converted_text_with_the_source_s(cluster, source, target, capsys):
    """Verify read the source's sjis bytes and the target's UTF-8 text: every converted row
    with a character beyond ASCII was reported different, and repaired at every run."""
    schema = make_schema(source, target)
    source.execute(SOURCE.format(schema=schema))
    target.execute(TARGET.format(schema=schema))
    start(cluster, one_way("cs-verify", schema, ["conv"]))
    source.execute(f"INSERT INTO `{schema}`.conv VALUES " + ", ".join(
        f"({row[0]}, X'{row[1]}', X'{row[2]}', X'{row[3]}')" for row in ROWS))
    wait_for(lambda: len(converted(target, schema)) == 3, 60, "the rows on the target")
    code, report = verify(cluster, capsys, "cs-verify")
    assert code == 0, report
    target.execute(f"UPDATE `{schema}`.conv SET s = 'ﾂ' WHERE id = 1")  # one character lost
    code, report = verify(cluster, capsys, "cs-verify")
    assert code == 1 and found(report, f"{schema}.conv")["different"] == {
        ((1,), f"{schema}.conv")}
    cluster.set_status("cs-verify", "STOP")


def test_a_big_value_is_converted_piece_by_piece(cluster, source, target):
    """A value over 4 MiB is appended a piece at a time: each piece whole characters, each
    converted (the pieces were written as bytes: '日本' as '“ú–{' in UTF-8's bytes)."""
    schema = make_schema(source, target)
    source.execute(f"CREATE TABLE `{schema}`.big (id INT PRIMARY KEY, "
                   "t LONGTEXT CHARACTER SET sjis)")
    target.execute(f"CREATE TABLE `{schema}`.big (id INT PRIMARY KEY, "
                   "t LONGTEXT CHARACTER SET utf8mb4)")
    start(cluster, one_way("cs-big", schema, ["big"]))
    source.execute(f"INSERT INTO `{schema}`.big VALUES (1, CONCAT('a', "
                   "REPEAT(X'93FA967B', 1100000)))")  # 'a日本日本…': 4.4 MB
    digest = f"SELECT id, CHAR_LENGTH(t), MD5(CONVERT(t USING utf8mb4)) FROM `{schema}`.big"
    wait_for(lambda: target.rows(digest) == source.rows(digest), 90, "the big value")
    cluster.set_status("cs-big", "STOP")


def test_a_join_by_text_kept_as_bytes_finds_its_row_in_another_charset(cluster, source, target):
    """The join's value went to the source as bytes: sjis '日本' matched no row of a utf8mb4
    column, and 'missing: drop' took the order out of the target."""
    schema = make_schema(source, target)
    source.script(f"CREATE TABLE `{schema}`.orders (id INT PRIMARY KEY, "
                  "code VARCHAR(10) CHARACTER SET sjis)",
                  f"CREATE TABLE `{schema}`.places (code VARCHAR(10) CHARACTER SET utf8mb4 "
                  "PRIMARY KEY, label VARCHAR(10))",
                  f"INSERT INTO `{schema}`.places VALUES ('日本', 'JP'), ('abc', 'A')")
    target.execute(f"CREATE TABLE `{schema}`.orders (id INT PRIMARY KEY, "
                   "code VARCHAR(10) CHARACTER SET utf8mb4, label VARCHAR(10))")
    start(cluster, {"name": "cs-join", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": [
            {"source": f"{schema}.orders", "target": f"{schema}.orders",
             "joins": [{"table": f"{schema}.places", "by": "code", "key": "code",
                        "columns": ["label"], "missing": "drop"}]}]}]})
    source.execute(f"INSERT INTO `{schema}`.orders VALUES (1, X'93FA967B'), (2, 'abc')")
    wait_for(lambda: len(target.table(schema, "orders")) == 2, 60, "both orders")
    assert target.table(schema, "orders") == [(1, "日本", "JP"), (2, "abc", "A")]
    cluster.set_status("cs-join", "STOP")


def test_verify_skips_a_table_keyed_by_converted_text_saying_why(cluster, source, target,
                                                                  capsys):
    """Its keys were looked up on the target as the source's bytes: every row whose key held
    a character beyond ASCII was reported missing, and repaired at every run."""
    schema = make_schema(source, target)
    source.execute(f"CREATE TABLE `{schema}`.keyed (k VARCHAR(10) CHARACTER SET sjis "
                   "PRIMARY KEY, v INT)")
    target.execute(f"CREATE TABLE `{schema}`.keyed (k VARCHAR(10) CHARACTER SET utf8mb4 "
                   "COLLATE utf8mb4_bin PRIMARY KEY, v INT)")  # (one no looser than sjis')
    source.execute(SOURCE.format(schema=schema))  # and a table verify compares
    target.execute(TARGET.format(schema=schema))
    start(cluster, one_way("cs-keyed", schema, ["keyed", "conv"]))
    source.execute(f"INSERT INTO `{schema}`.keyed VALUES (X'93FA967B', 1), ('abc', 2)")
    wait_for(lambda: len(target.table(schema, "keyed")) == 2, 60, "the rows")
    code, report = verify(cluster, capsys, "cs-keyed")
    assert code == 4, report  # equal where verified, this table not verified
    [skipped] = [t for r in report["reports"] for t in r.get("skipped", [])]
    assert "key column(s) k hold text" in str(skipped), skipped
    cluster.set_status("cs-keyed", "STOP")


def test_enum_and_set_members_of_such_a_charset_are_converted_too(cluster, source, target):
    """A member of sjis went as its bytes (an ENUM into utf8mb4 stopped, 'Data truncated');
    a SET of them could not be written at all."""
    schema = make_schema(source, target)
    # '日', '本', 'a' (as sjis bytes on the source, as text on the target)
    for db, members, charset in ((source, "X'93FA', X'967B', 'a'", "sjis"),
                                 (target, "'日', '本', 'a'", "utf8mb4")):
        db.execute(f"CREATE TABLE `{schema}`.kinds (id INT PRIMARY KEY, "
                   f"e ENUM({members}) CHARACTER SET {charset}, "
                   f"s SET({members}) CHARACTER SET {charset})")
    start(cluster, one_way("cs-members", schema, ["kinds"]))
    source.execute(f"INSERT INTO `{schema}`.kinds VALUES (1, X'93FA', CONCAT(X'93FA', ',a')), "
                   "(2, 'a', X'967B')")
    shown = (f"SELECT id, HEX(CONVERT(e USING utf8mb4)), HEX(CONVERT(s USING utf8mb4)) "
             f"FROM `{schema}`.kinds ORDER BY id")
    wait_for(lambda: len(target.rows(shown)) == 2, 60, "the rows")
    assert target.rows(shown) == source.rows(shown)
    cluster.set_status("cs-members", "STOP")


def test_a_transaction_deleting_rows_of_a_composite_latin1_key_deletes_them_on_the_target(
        cluster, source, target):
    """MariaDB compares the text of a multi-row ``(k, n) IN ((…), (…))`` unconverted into
    its column's charset: Load's DELETE of two keys 'é7' and 'é8' of a latin1 column (as
    UTF-8 parameters) matched no row, and the target kept both, silently."""
    schema = make_schema(source, target)
    for db in (source, target):
        db.execute(f"CREATE TABLE `{schema}`.pairs (k VARCHAR(10) CHARACTER SET latin1 "
                   "COLLATE latin1_general_cs, n INT, v INT, PRIMARY KEY (k, n))")
    start(cluster, one_way("cs-composite", schema, ["pairs"]))
    source.execute(f"INSERT INTO `{schema}`.pairs VALUES ('é7', 1, 0), ('é8', 1, 0), "
                   "('É7', 1, 0), ('ab', 1, 0)")
    wait_for(lambda: len(target.table(schema, "pairs")) == 4, 60, "the rows on the target")
    source.execute(f"DELETE FROM `{schema}`.pairs WHERE k IN ('é7', 'é8')")
    source.execute(f"INSERT INTO `{schema}`.pairs VALUES ('zz', 1, 1)")  # (after the delete)
    wait_for(lambda: ("zz", 1, 1) in target.table(schema, "pairs"), 60, "the last row")
    assert sorted(target.table(schema, "pairs")) == sorted(source.table(schema, "pairs")) == \
        [("ab", 1, 0), ("zz", 1, 1), ("É7", 1, 0)]
    cluster.set_status("cs-composite", "STOP")
