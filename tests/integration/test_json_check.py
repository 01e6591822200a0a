"""Values a CHECK constraint guards, on real MariaDB servers (both at an 8 MiB
max_allowed_packet here, so the start check passes). MariaDB's JSON is a LONGTEXT with
``CHECK (json_valid(`doc`))``: a document over BIG_VALUE (4 MiB) was written a piece at a
time, an empty start then ``CONCAT`` appends, and the check refused the partial document at
every retry — streamed or copied by a snapshot. So did any check a partial value fails
(``CHECK (note LIKE '%x')``). Such a value now goes whole, in one statement; one that no
statement under the target's packet can carry stops the pipeline at once, before anything
of its batch is written, saying the table, the column, the sizes and what to raise."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for

MIB = 1 << 20
PACKET = 8 * MIB
# id, a JSON document, a text a check guards (it must end in x), a text no check names
TABLE = ("CREATE TABLE `{schema}`.j (id INT PRIMARY KEY, doc JSON, "
         "note LONGTEXT CHECK (note LIKE '%x'), body LONGTEXT) DEFAULT CHARSET=utf8mb4")
# a 5 MiB document: 'a\"é' a MiB times in a string (5 bytes, two of them escaped in SQL)
DOC = "CONCAT('{\"k\": \"', REPEAT(%s, %s), '\", \"n\": [1, 2]}')"
PART = 'a\\"é'


@pytest.fixture(scope="module", autouse=True)
def packets(source: Database, target: Database) -> Iterator[None]:
    """Both servers' max_allowed_packet at 8 MiB while the module runs (connections made
    from then on take it): a 5 MiB value's hex (10 MiB) is past the source's, so a copy
    reads its chunk as rows, which Load writes as statements; put back after."""
    before = {db: db.rows("SELECT @@GLOBAL.max_allowed_packet")[0][0]
              for db in (source, target)}
    for db in (source, target):
        db.execute(f"SET GLOBAL max_allowed_packet = {PACKET}")
    yield
    for db, packet in before.items():
        db.execute(f"SET GLOBAL max_allowed_packet = {packet}")


def digest(db: Database, schema: str) -> list[tuple[object, ...]]:
    return db.rows("SELECT id, LENGTH(doc), MD5(doc), LENGTH(note), MD5(note), LENGTH(body), "
                   f"MD5(body) FROM `{schema}`.j ORDER BY id")


def test_json_documents_and_checked_values_over_big_value_load_whole(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, TABLE)
    t = f"`{schema}`.j"
    source.execute(f"INSERT INTO {t} VALUES (1, {DOC}, 'x', NULL)", (PART, MIB))
    source.execute(f"INSERT INTO {t} VALUES (2, '[]', CONCAT(REPEAT('n', {3 * MIB}), 'x'), "
                   f"REPEAT('b', {3 * MIB}))")  # (a row the source sends: under 8 MiB)
    assert [row[:2] for row in digest(source, schema)] == [(1, 5 * MIB + 22), (2, 2)]
    cluster.apply([one_way("json", schema, ["j"], start="snapshot", snapshot_chunk_size=1,
                           max_retries=0)])
    cluster.set_status("json", "START")
    wanted = digest(source, schema)

    def loaded() -> bool:
        assert cluster.channel_status("json") == "START", \
            cluster.pipeline_state("json").last_error
        return digest(target, schema) == wanted

    wait_for(loaded, 180, "the copied rows on the target, byte for byte")
    # streamed: a new document, a changed one, a checked text (each statement under 8 MiB)
    source.execute(f"INSERT INTO {t} VALUES (3, {DOC}, NULL, 'small')", ("b\\\\", MIB))
    source.execute(f"UPDATE {t} SET doc = {DOC} WHERE id = 1", ("c\\u00e9", MIB // 2))
    source.execute(f"UPDATE {t} SET note = CONCAT(REPEAT('m', {3 * MIB}), 'x') WHERE id = 2")
    wanted = digest(source, schema)
    wait_for(loaded, 180, "the streamed documents on the target, byte for byte")
    wait_equal(source, target, schema, ["j"], 60)
    cluster.set_status("json", "STOP")


def test_a_json_document_over_the_packet_stops_the_pipeline_saying_what_to_raise(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A 7 MiB document of backslashes (each escaped in a statement's text: 14 MiB) fits
    no statement under the target's 8 MiB, and a part of it is no document: the pipeline
    pauses at once, nothing of its transaction written (a small row before it); raised,
    the document loads whole."""
    schema = make_schema(source, target, TABLE)
    t = f"`{schema}`.j"
    cluster.apply([one_way("jsonbig", schema, ["j"], max_retries=3)])
    cluster.set_status("jsonbig", "START")
    cluster.wait_running("jsonbig")
    source.execute(f"INSERT INTO {t} VALUES (0, '[0]', 'x', 'before')")
    wait_for(lambda: len(target.table(schema, "j")) == 1, 60, "the first row")
    source.script("BEGIN", f"INSERT INTO {t} VALUES (1, '[1]', 'small x', NULL)")
    source.execute(f"INSERT INTO {t} VALUES (2, CONCAT('[\"', REPEAT(%s, %s), '\"]'), NULL, "
                   "NULL)", ("\\\\", 7 * MIB // 2))
    source.execute("COMMIT")
    wait_for(lambda: cluster.channel_status("jsonbig") == "PAUSE", 120, "the pause")
    error = cluster.pipeline_state("jsonbig").last_error
    value = (7 * MIB + 4) + (7 * MIB + 2) + 2  # its characters, the escaped ones, quotes
    assert f"table {schema}.j: a row's value of `doc` (a JSON document: its CHECK " \
        f"(json_valid) refuses a part of one) takes {value:,} bytes, its statement " \
        f"{value + 3 * 64 + 2:,}, over the target's max_allowed_packet ({PACKET:,} bytes); " \
        "such a value goes in one statement, it cannot be cut" in error, error
    assert "Raise the target's max_allowed_packet to at least 15728640 (SET GLOBAL " \
        "max_allowed_packet = 15728640; and in my.cnf), then resume the channel" in error
    log = [line for line in cluster.nodes[1].output().splitlines()
           if "pipeline=jsonbig.forward" in line]
    assert not [line for line in log if "event=pipeline_failed" in line], log  # at once:
    assert [line for line in log if "event=pipeline_paused" in line]  # no retry sent it
    assert [row[0] for row in target.table(schema, "j")] == [0]  # none of the transaction
    target.execute(f"SET GLOBAL max_allowed_packet = {2 * PACKET}")
    try:
        cluster.set_status("jsonbig", "START")
        wait_equal(source, target, schema, ["j"], 120)
    finally:
        target.execute(f"SET GLOBAL max_allowed_packet = {PACKET}")
    assert digest(target, schema) == digest(source, schema)
    cluster.set_status("jsonbig", "STOP")


def test_a_value_under_a_unique_index_goes_whole(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A 1.2 M-character text under a prefix UNIQUE index, another row's value empty: written
    a piece at a time, its empty start met that row in the index, the INSERT … ON DUPLICATE
    KEY UPDATE updated it instead, and the append found no row ("the tables differ", a stop
    that copying again cannot mend; a review). It goes whole."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.u (id INT PRIMARY KEY, "
                         "doc LONGTEXT, UNIQUE KEY (doc(20)))")
    cluster.apply([one_way("uniq", schema, ["u"], max_retries=0)])
    cluster.set_status("uniq", "START")
    cluster.wait_running("uniq")
    source.execute(f"INSERT INTO `{schema}`.u VALUES (1, '')")
    source.execute(f"INSERT INTO `{schema}`.u VALUES (2, REPEAT('y', 1200000))")
    source.execute(f"INSERT INTO `{schema}`.u VALUES (3, 'three')")
    query = f"SELECT id, LENGTH(doc), MD5(doc) FROM `{schema}`.u ORDER BY id"
    wanted = source.rows(query)
    wait_for(lambda: target.rows(query) == wanted
             or cluster.channel_status("uniq") == "PAUSE", 120, "the rows or a pause")
    assert cluster.channel_status("uniq") != "PAUSE", cluster.pipeline_state("uniq").last_error
    assert target.rows(query) == wanted
    cluster.set_status("uniq", "STOP")


UNCUT = {  # the source's table, the target's, and the rows; a review's cases
    # a target column spelt otherwise than the row (names ignore case): the marks did not apply
    "json case": ("CREATE TABLE `{schema}`.u (id INT PRIMARY KEY, doc JSON)",
                  "CREATE TABLE `{schema}`.u (id INT PRIMARY KEY, Doc JSON)",
                  ["(1, '[1]')", "(2, CONCAT('[\"', REPEAT('y', 1200000), '\"]'))"]),
    "unique case": ("CREATE TABLE `{schema}`.u (id INT PRIMARY KEY, doc LONGTEXT, "
                    "UNIQUE KEY (doc(20)))",
                    "CREATE TABLE `{schema}`.u (id INT PRIMARY KEY, Doc LONGTEXT, "
                    "UNIQUE KEY (Doc(20)))",
                    ["(1, '')", "(2, REPEAT('y', 1200000))", "(3, 'three')"]),
    # a unique hash of the text (a generated column): the text's empty start met row 1's hash
    "unique hash": ("CREATE TABLE `{schema}`.u (id INT PRIMARY KEY, doc LONGTEXT, "
                    "h CHAR(32) AS (MD5(doc)) VIRTUAL, UNIQUE KEY (h))", "",
                    ["(1, '')", "(2, REPEAT('y', 1200000))", "(3, 'three')"]),
}


@pytest.mark.parametrize("case", list(UNCUT))
def test_a_value_a_piece_would_break_goes_whole_whatever_names_it(
        cluster: Cluster, source: Database, target: Database, case: str) -> None:
    """Values over BIG_VALUE in a column whose partial value a constraint would refuse or
    meet elsewhere, named by the target otherwise than by the row, or guarded through a
    generated column computed from it: whole, equal on the target (a review found each
    written in pieces: a stop that no resume or copy could mend)."""
    ours, theirs, rows = UNCUT[case]
    schema = make_schema(source, target, ours)
    if theirs:
        target.execute(f"DROP TABLE `{schema}`.u")
        target.execute(theirs.format(schema=schema))
    name = "uncut" + case.split()[-1]
    cluster.apply([one_way(name, schema, ["u"], max_retries=0)])
    cluster.set_status(name, "START")
    cluster.wait_running(name)
    for row in rows:
        source.execute(f"INSERT INTO `{schema}`.u (id, doc) VALUES {row}")
    query = f"SELECT id, LENGTH(doc), MD5(doc) FROM `{schema}`.u ORDER BY id"
    wanted = source.rows(query)
    wait_for(lambda: target.rows(query) == wanted
             or cluster.channel_status(name) == "PAUSE", 120, "the rows or a pause")
    assert cluster.channel_status(name) != "PAUSE", cluster.pipeline_state(name).last_error
    assert target.rows(query) == wanted
    cluster.set_status(name, "STOP")
