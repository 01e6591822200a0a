"""Every MariaDB column type round-trips exactly, compared cell by cell as the server prints
it (so a Python conversion cannot hide a difference)."""

from __future__ import annotations

from tests.devcluster import Database, make_schema, one_way, wait_for

COLUMNS = [
    ("ti", "TINYINT"), ("tiu", "TINYINT UNSIGNED"), ("si", "SMALLINT"),
    ("siu", "SMALLINT UNSIGNED"), ("mi", "MEDIUMINT"), ("miu", "MEDIUMINT UNSIGNED"),
    ("i", "INT"), ("iu", "INT UNSIGNED"), ("bi", "BIGINT"), ("biu", "BIGINT UNSIGNED"),
    ("dec", "DECIMAL(65,30)"), ("f", "FLOAT"), ("d", "DOUBLE"), ("b1", "BIT(1)"),
    ("b64", "BIT(64)"), ("dt", "DATE"), ("tm", "TIME(6)"), ("dtm", "DATETIME(6)"),
    ("ts", "TIMESTAMP(6) NULL"), ("yr", "YEAR"), ("ch", "CHAR(10)"), ("vc", "VARCHAR(100)"),
    ("tx", "TEXT"), ("bn", "BINARY(4)"), ("vb", "VARBINARY(300)"), ("bl", "BLOB"),
    ("en", "ENUM('a','b','c')"), ("st", "SET('x','y','z')"), ("js", "JSON"),
]
ROWS = [
    "(1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, "
    "-9223372036854775808, 18446744073709551615, "
    "'-12345678901234567890123456789012345.123456789012345678901234567890', "
    "-3.40282e38, -1.7976931348623157e308, b'1', b'" + "1" * 64 + "', "
    "'1000-01-01', '-838:59:59.000000', '1000-01-01 00:00:00.000000', "
    "'1970-01-01 00:00:01.000000', 1901, 'a', '𝄞 emoji 😀', 'ünïcødé 中文', "
    "x'00FF7F80', x'000102FEFF', x'00', 'a', 'x,z', '{\"k\": [1, 2.5, null, \"ü\"]}')",
    "(2, 127, 0, 32767, 0, 8388607, 0, 2147483647, 0, 9223372036854775807, 0, "
    "'12345678901234567890123456789012345.123456789012345678901234567890', "
    "1.17549e-38, 2.2250738585072014e-308, b'0', b'0', '9999-12-31', '838:59:59.999999', "
    "'9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999999', 2155, '', '', '', "
    "x'00000000', x'', x'', 'c', '', '[]')",
    "(3" + ", NULL" * 29 + ")",
]


def printed(db: Database, schema: str, columns: list[tuple[str, str]] = COLUMNS,
            table: str = "alltypes") -> list[tuple[object, ...]]:
    """Each cell as text the server renders (binary as hex), so types cannot blur a compare."""
    exprs = []
    for name, kind in columns:
        if kind.startswith(("BIT", "BINARY", "VARBINARY", "BLOB")):
            exprs.append(f"HEX(`{name}`)")
        elif kind in ("FLOAT", "DOUBLE"):
            exprs.append(f"CAST(`{name}` AS CHAR)")
        else:
            exprs.append(f"CAST(`{name}` AS CHAR CHARACTER SET utf8mb4)")
    return db.rows(f"SELECT id, {', '.join(exprs)} FROM `{schema}`.{table} ORDER BY id")


def assert_same_cells(source: Database, target: Database, schema: str,
                      columns: list[tuple[str, str]] = COLUMNS, table: str = "alltypes") -> None:
    want = printed(source, schema, columns, table)
    got = printed(target, schema, columns, table)
    assert len(got) == len(want), f"{table}: {len(want)} rows on the source, {len(got)} here"
    for expected, actual in zip(want, got, strict=True):
        for (name, _), a, b in zip([("id", ""), *columns], expected, actual, strict=True):
            assert a == b, f"{table} row {expected[0]} column {name}: source {a!r}, " \
                           f"target {b!r}"


def test_every_type_round_trips_cell_by_cell(cluster, source, target):
    columns = ", ".join(f"`{name}` {kind}" for name, kind in COLUMNS)
    schema = make_schema(source, target, f"CREATE TABLE `{{schema}}`.alltypes (id INT PRIMARY KEY, "
                         f"{columns}) DEFAULT CHARSET=utf8mb4")
    cluster.apply([one_way("types", schema, ["alltypes"])])
    cluster.set_status("types", "START")
    cluster.wait_running("types")
    source.execute("SET time_zone = '+00:00'")
    for row in ROWS:
        source.execute(f"INSERT INTO `{schema}`.alltypes VALUES {row}")
    source.execute(f"UPDATE `{schema}`.alltypes SET id = 4 WHERE id = 3")  # all NULLs updated
    source.execute(f"INSERT INTO `{schema}`.alltypes (id, dt, dtm, ts, yr) VALUES "  # zeros
                   "(5, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', 0000)")
    source.execute(f"UPDATE `{schema}`.alltypes SET yr = 0 WHERE id = 1")  # found by its key
    wait_for(lambda: len(target.table(schema, "alltypes")) == 4, 60, "all rows on the target")
    wait_for(lambda: target.rows(f"SELECT yr FROM `{schema}`.alltypes WHERE id = 1") == [(0,)],
             60, "the year 0000")
    assert_same_cells(source, target, schema)


# every type LOAD DATA … REPLACE writes (a BIT column keeps a table's rows on INSERTs), and
# the text charsets it encodes itself
REPLACED = [*(column for column in COLUMNS if not column[1].startswith("BIT")),
            ("l1", "VARCHAR(20) CHARACTER SET latin1"), ("a1", "VARCHAR(20) CHARACTER SET ascii"),
            ("u3", "VARCHAR(20) CHARACTER SET utf8mb3")]


def replaced_schema(source: Database, target: Database, table: str) -> str:
    """A schema with ``alltypes`` and ``table`` (the REPLACED columns) on both servers."""
    columns = ", ".join(f"`{name}` {kind}" for name, kind in COLUMNS)
    replaced = ", ".join(f"`{name}` {kind}" for name, kind in REPLACED)
    return make_schema(
        source, target,
        f"CREATE TABLE `{{schema}}`.alltypes (id INT PRIMARY KEY, {columns}) "
        "DEFAULT CHARSET=utf8mb4",
        f"CREATE TABLE `{{schema}}`.{table} (id INT PRIMARY KEY, {replaced}) "
        "DEFAULT CHARSET=utf8mb4")


def fill_replaced(source: Database, schema: str, table: str) -> None:
    """``alltypes`` gets ROWS; ``table`` their values, escapes in every charset, binary
    values with backslashes and zero bytes, zero dates and 1,000 rows more."""
    source.execute("SET time_zone = '+00:00'")
    for row in ROWS:
        source.execute(f"INSERT INTO `{schema}`.alltypes VALUES {row}")
    names = ", ".join(f"`{name}`" for name, _ in COLUMNS if name not in ("b1", "b64"))
    source.script(
        f"INSERT INTO `{schema}`.{table} (id, {names}) SELECT id, {names} FROM "
        f"`{schema}`.alltypes",
        f"UPDATE `{schema}`.{table} SET l1 = 'é\\t\\n\\\\ \\0 ÿ€', a1 = 'tab\\there', "
        "u3 = 'ünï\\\\N', vc = '\\\\N', tx = 'line\\nbreak\\r\\t', vb = x'5c4e000a09', "
        "bn = x'5c000000' WHERE id = 1",
        f"UPDATE `{schema}`.{table} SET id = 4, l1 = '' WHERE id = 3",
        f"INSERT INTO `{schema}`.{table} (id, dt, dtm, ts, yr) VALUES "
        "(5, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', 0000)",
        f"INSERT INTO `{schema}`.{table} (id, vc, tx) SELECT seq, CONCAT('row ', seq), "
        "REPEAT('long text ', seq) FROM mysql.seq_10_to_1009")


def test_rows_loaded_by_load_data_round_trip_cell_by_cell(cluster, source, target):
    """The same values, each row a batch's upsert written as LOAD DATA … REPLACE (from one
    row on): cell by cell equal, escapes and NULLs included; the target counts the loads."""
    schema = replaced_schema(source, target, "loaded")
    cluster.apply([one_way("loaded", schema, ["loaded"], load_data_min_rows=1)])
    cluster.set_status("loaded", "START")
    cluster.wait_running("loaded")
    loads = int(target.rows("SHOW GLOBAL STATUS LIKE 'Com_load'")[0][1])
    fill_replaced(source, schema, "loaded")
    wait_for(lambda: len(target.table(schema, "loaded")) == 1004, 60, "all rows on the target")
    assert_same_cells(source, target, schema, REPLACED, "loaded")
    assert int(target.rows("SHOW GLOBAL STATUS LIKE 'Com_load'")[0][1]) > loads


def test_every_type_copied_as_the_sources_own_lines_round_trips_cell_by_cell(
        cluster, source, target):
    """A snapshot reads chunks as the source's LOAD DATA lines (node.extract.copylines) where
    the target has the same column types and charsets: cell by cell equal, escapes, NULLs,
    zero dates and an empty ENUM value (its chunk read as rows) included. The same rows in
    a table with an AUTO_INCREMENT key go as multi-row REPLACE tuples (LOAD DATA would lock
    that table). A table with a BIT column is read as rows, and is equal too."""
    schema = replaced_schema(source, target, "copied")
    fill_replaced(source, schema, "copied")
    source.script(
        "SET SESSION sql_mode = ''",
        f"INSERT INTO `{schema}`.copied (id, en) VALUES (2000, 'not a value')",  # ''
        "SET SESSION sql_mode = DEFAULT")
    assert source.rows(f"SELECT en FROM `{schema}`.copied WHERE id = 2000") == [("",)]
    for db in (source, target):
        db.script(f"CREATE TABLE `{schema}`.counted LIKE `{schema}`.copied",
                  f"ALTER TABLE `{schema}`.counted MODIFY id INT NOT NULL AUTO_INCREMENT")
    source.script("SET SESSION sql_mode = ''",
                  f"INSERT INTO `{schema}`.counted SELECT * FROM `{schema}`.copied",
                  "SET SESSION sql_mode = DEFAULT")
    replaces = int(target.rows("SHOW GLOBAL STATUS LIKE 'Com_replace'")[0][1])
    log = cluster.workdir / "node-1.log"
    cluster.apply([one_way("lines", schema, ["copied"], start="snapshot",
                           snapshot_chunk_size=100),
                   one_way("tuples", schema, ["counted"], start="snapshot",
                           snapshot_chunk_size=100),
                   one_way("asrows", schema, ["alltypes"], start="snapshot")])
    for name in ("lines", "tuples", "asrows"):
        cluster.set_status(name, "START")

    def done(name: str) -> bool:
        copies = list(cluster.pipeline_state(name).snapshots)
        return bool(copies) and all(copy.state == "done" for copy in copies)

    for name in ("lines", "tuples", "asrows"):
        wait_for(lambda name=name: done(name), 120, f"{name}: the copy done")
    assert_same_cells(source, target, schema, REPLACED, "copied")
    assert_same_cells(source, target, schema, REPLACED, "counted")
    assert_same_cells(source, target, schema)
    windows = [line for line in log.read_text().splitlines() if "event=snapshot_window " in line]
    as_lines = {name: sum(int(line.rsplit("as_lines=", 1)[1]) for line in windows
                          if f"pipeline={name}.forward " in line)
                for name in ("lines", "tuples", "asrows")}
    assert as_lines["lines"] >= 5 and as_lines["tuples"] >= 5 and as_lines["asrows"] == 0, \
        as_lines
    # the tuples went as REPLACE statements (one a chunk at least; nothing else replaces)
    assert int(target.rows("SHOW GLOBAL STATUS LIKE 'Com_replace'")[0][1]) - replaces >= 5


def test_mariadb_uuid_and_inet6_columns_are_refused_until_left_out(cluster, source, target):
    """MariaDB's UUID and INET6 types: a binlog carries the bytes they store, a SELECT (a
    copy, verify) their text, and the two do not meet on a target (a UUID's bytes stopped the
    load as no UUID's text): such a column is refused at the start, naming it, and a pair
    that leaves it out runs."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.ids (id INT PRIMARY KEY, "
                         "a INET6, u UUID, n INT)")
    t = f"`{schema}`.ids"
    cluster.apply([one_way("uuids", schema, ["ids"])])
    cluster.set_status("uuids", "START")
    wait_for(lambda: "is MariaDB's INET6" in cluster.pipeline_state("uuids").last_error, 60,
             "the refusal")
    assert f"column a of {schema}.ids is MariaDB's INET6, which setl does not replicate yet" \
        in cluster.pipeline_state("uuids").last_error
    cluster.set_status("uuids", "STOP")
    wait_for(lambda: cluster.pipeline_state("uuids").state != "running", 30, "the stop")
    left_out = one_way("uuids", schema, ["ids"])
    left_out["pipelines"][0]["pairs"][0]["columns"] = {"exclude": ["a", "u"]}
    target.execute(f"ALTER TABLE {t} DROP COLUMN a, DROP COLUMN u")
    cluster.apply([left_out])
    cluster.set_status("uuids", "START")
    cluster.wait_running("uuids")
    source.execute(f"INSERT INTO {t} VALUES (1, '2001:db8::1', UUID(), 10), (2, '::', "
                   "'00000000-0000-0000-0000-000000000000', 20)")
    wait_for(lambda: sorted(target.table(schema, "ids")) == [(1, 10), (2, 20)], 60,
             "the rows without the columns left out")
    cluster.set_status("uuids", "STOP")


def test_text_in_mariadbs_uca1400_collations_keeps_its_bytes(cluster, source, target):
    """MariaDB 10.10+'s UCA-14.0 collations have ids the binlog library does not know (from
    2048; the default for ucs2/utf16/utf32 from 11.5): their text was read as UTF-8, and a
    UTF-16 'AB' reached the target as '\\0A\\0B'. Each charset's text keeps its bytes."""
    charsets = ("utf16", "ucs2", "utf32", "utf8mb4", "utf8mb3")
    columns = ", ".join(f"c_{name} VARCHAR(20) CHARACTER SET {name} COLLATE "
                        f"{name}_uca1400_ai_ci" for name in charsets)
    schema = make_schema(source, target, f"CREATE TABLE `{{schema}}`.uca (id INT PRIMARY KEY, "
                         f"{columns})")
    cluster.apply([one_way("uca", schema, ["uca"])])
    cluster.set_status("uca", "START")
    cluster.wait_running("uca")
    values = ("AB", "héllo wörld", "€ 中文", "plain")
    for row, text in enumerate(values, 1):
        source.execute(f"INSERT INTO `{schema}`.uca VALUES ({row}{', %s' * len(charsets)})",
                       [text] * len(charsets))
    hexes = ", ".join(f"HEX(c_{name})" for name in charsets)
    query = f"SELECT id, {hexes} FROM `{schema}`.uca ORDER BY id"
    wait_for(lambda: len(target.rows(query)) == len(values), 60, "the rows on the target")
    assert target.rows(query) == source.rows(query)
    cluster.set_status("uca", "STOP")


# every character set a MariaDB column may have, but the Unicode ones (tested above) and
# binary: each column gets every byte sequence of one or two bytes its charset holds
CHARSETS = ("big5", "dec8", "cp850", "hp8", "koi8r", "latin1", "latin2", "swe7", "ascii",
            "ujis", "sjis", "hebrew", "tis620", "euckr", "koi8u", "gb2312", "greek", "cp1250",
            "gbk", "latin5", "armscii8", "cp866", "keybcs2", "macce", "macroman", "cp852",
            "latin7", "cp1251", "cp1256", "cp1257", "geostd8", "cp932", "eucjpms")


def fill_chars(source: Database, schema: str, table: str) -> None:
    """Row 1: every character of one byte of each charset; row 2: every one of two bytes
    (the sequences the server reads as a character, as they are: not through Unicode, where
    sjis 0x815F comes back as 0x5C)."""
    ones = "FROM mysql.seq_1_to_255 b", "LPAD(HEX(b.seq), 2, '0')", "b.seq"
    twos = ("FROM mysql.seq_129_to_254 l, mysql.seq_64_to_254 t", "HEX(l.seq * 256 + t.seq)",
            "l.seq, t.seq")
    source.script("SET SESSION sql_mode = ''", "SET SESSION group_concat_max_len = 16777216",
                  f"INSERT INTO `{schema}`.{table} (id) VALUES (1), (2)")
    for row, (rows, hexed, order) in ((1, ones), (2, twos)):
        for name in CHARSETS:
            char = f"CONVERT(UNHEX({hexed}) USING {name})"
            unicode = f"CONVERT({char} USING utf8mb4)"  # ('?', U+FFFD: not a character)
            source.execute(
                f"UPDATE `{schema}`.{table} SET c_{name} = (SELECT GROUP_CONCAT({char} ORDER "
                f"BY {order} SEPARATOR '') {rows} WHERE LOCATE('?', {unicode}) = 0 AND "
                f"LOCATE(_utf8mb4 X'EFBFBD', {unicode}) = 0) WHERE id = {row}")
    source.script("SET SESSION sql_mode = DEFAULT")


def differing_charsets(source: Database, target: Database, schema: str, table: str
                       ) -> list[str]:
    """The charsets whose column differs between source and target once the target has
    caught up (a table's last change, its last charset's row 2, is there)."""
    hexes = ", ".join(f"MD5(HEX(c_{name}))" for name in CHARSETS)
    query = f"SELECT id, {hexes} FROM `{schema}`.{table} ORDER BY id"
    last = f"SELECT c_{CHARSETS[-1]} IS NOT NULL FROM `{schema}`.{table} WHERE id = 2"
    wait_for(lambda: target.rows(last) == [(1,)], 120, f"the last change of {table}")
    expected, found = source.rows(query), target.rows(query)
    return [name for index, name in enumerate(CHARSETS, 1)
            if any(one[index] != other[index]
                   for one, other in zip(expected, found, strict=True))]


def test_every_character_of_every_charset_keeps_its_bytes(cluster, source, target):
    """The stream decodes text by Python's codec of its charset and the target encodes it
    again by the server's: where the two tables differ for a character, its bytes would
    change on the way. Every one- and two-byte character of each charset (what the server
    keeps of all sequences) reaches the target as the bytes the source holds, streamed and
    copied (found: sjis, ujis, greek, hebrew, koi8u and cp866 changed characters; big5,
    euckr, ujis and tis620 stopped the pipeline on characters Python's codecs lack; a copy
    read through Unicode wrote sjis 0x815F as 0x5C)."""
    columns = ", ".join(f"c_{name} MEDIUMTEXT CHARACTER SET {name}" for name in CHARSETS)
    schema = make_schema(source, target,
                         *(f"CREATE TABLE `{{schema}}`.{table} (id INT PRIMARY KEY, {columns})"
                           for table in ("streamed", "copied")))
    fill_chars(source, schema, "copied")
    cluster.apply([one_way("streamed", schema, ["streamed"]),
                   one_way("copied", schema, ["copied"], start="snapshot")])
    for name in ("streamed", "copied"):
        cluster.set_status(name, "START")
        cluster.wait_running(name)
    fill_chars(source, schema, "streamed")
    assert differing_charsets(source, target, schema, "streamed") == []
    assert differing_charsets(source, target, schema, "copied") == []
    for name in ("streamed", "copied"):
        cluster.set_status(name, "STOP")
