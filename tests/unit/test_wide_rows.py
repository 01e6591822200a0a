"""Rows judged by their rendered size against the target's max_allowed_packet: a keyed row
of several values under BIG_VALUE each that would not fit writes its largest values a piece
at a time, every statement text under the packet; a keyless one that would not fit is
refused before anything is sent, saying what to raise; so is a keyed row whose statement
would not fit even without the values that can go in pieces (what is left: a JSON document,
a column a CHECK constraint names, the key). Such values go whole where they fit: a check
refuses a part of one."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from node.changes import ChangeType, TargetChange
from node.charsets import Encoded
from node.merge import MOVE, TableWrites, merge
from node.target.mysql import pieces
from node.target.mysql.render import statements
from node.target.mysql.sqltext import literal, texts
from shared.errors import PAUSE_AT_ONCE, RowTooLargeError

PACKET = 4 << 20
VALUE = 1_572_864  # 1.5 MiB: 3 MiB as hex, under the packet alone; five over it


def writes(**fields: object) -> TableWrites:
    base: dict[str, object] = {"datasource": "t", "schema": "s", "table": "w", "keys": ("id",),
                               "push_weight": 0, "first_seq": 0}
    return TableWrites(**{**base, **fields})  # type: ignore[arg-type]


def wide(key: int) -> dict[str, Any]:
    return {"id": key, **{f"c{n}": bytes([key + n]) * VALUE for n in range(1, 6)}}


def sent(found: list[Any]) -> list[str]:
    return [sql.text for statement in found for sql in texts(statement)]


def test_a_keyed_row_over_the_packet_writes_its_largest_values_a_piece_at_a_time() -> None:
    rows = [{"id": 1, "c1": b"a", "c2": None, "c3": "", "c4": None, "c5": None}, wide(2),
            {"id": 3, "c1": b"b" * 1000, "c2": None, "c3": "x", "c4": None, "c5": None}]
    found = list(statements(writes(upserts=rows), 100, packet=PACKET))
    assert all(len(text.encode()) < PACKET - pieces.HEAD for text in sent(found))
    kinds = [(s.sql.split()[0], s.continues) for s in found]
    assert kinds[0] == ("INSERT", False) and kinds[1] == ("INSERT", False)
    assert kinds[-1] == ("INSERT", False) and found[-1].args[0][0] == 3
    assert all(kind == ("UPDATE", True) for kind in kinds[2:-1])
    inserted = dict(zip(["id", "c1", "c2", "c3", "c4", "c5"], found[1].args[0], strict=True))
    emptied = [name for name, value in inserted.items() if value == b""]
    assert len(emptied) == 4  # the largest, until the rest fits: one stays whole
    row = {**inserted}
    for statement in found[2:-1]:  # the pieces append to the emptied values, in order
        name = statement.sql.split("`")[5]
        row[name] += statement.args[0]
        assert statement.args[1:] == [2]
    assert row == wide(2)
    # under a packet it fits, the row goes with the others as before
    assert [s.sql.split()[0] for s in statements(writes(upserts=rows), 100,
                                                 packet=64 << 20)] == ["INSERT"]


def test_a_wide_rows_key_change_leaves_its_pieced_values_to_the_upsert() -> None:
    row = wide(6)
    found = list(statements(writes(steps=[(MOVE, ((5,), row))]), 100, packet=PACKET))
    assert all(len(text.encode()) < PACKET - pieces.HEAD for text in sent(found))
    assert found[0].sql.startswith("UPDATE `s`.`w` SET `id` = %s") and \
        found[0].sql.endswith("WHERE (`id`) = (%s)")
    assert found[0].args[0] == 6 and found[0].args[-1] == 5
    assert all(statement.continues for statement in found[1:])


def keyless(kind: ChangeType, before: dict[str, Any] | None, after: dict[str, Any] | None
            ) -> list[TableWrites]:
    return merge([TargetChange("t", "s", "k", kind, (), () if before else None, after,
                               seq=0, before=before)])


def test_a_keyless_row_over_the_packet_is_refused_before_anything_is_sent() -> None:
    row = {"id": 2, "v": b"\x01" * (2 * VALUE)}  # 6 MiB as hex
    (table,) = keyless(ChangeType.INSERT, None, row)
    with pytest.raises(RowTooLargeError) as refused:
        list(statements(table, 100, packet=PACKET))
    assert str(refused.value) == (
        "target t: table s.k (keyless): a row's INSERT takes 6,291,605 bytes, over the "
        "target's max_allowed_packet (4,194,304 bytes); a keyless row goes in one statement, "
        "it cannot be cut (no key to append a value to). Raise the target's "
        "max_allowed_packet to at least 7340032 (SET GLOBAL max_allowed_packet = 7340032; "
        "and in my.cnf), then resume the channel: nothing of the batch was written")
    assert isinstance(refused.value, PAUSE_AT_ONCE)  # the same row fails again: no retry
    # an update carries the row twice (its before image finds it)
    half = {"id": 2, "v": b"\x01" * (VALUE // 2)}
    (table,) = keyless(ChangeType.UPDATE, half, {**half, "id": 3})
    with pytest.raises(RowTooLargeError, match=r"a row.s UPDATE takes 3,146,024 bytes"):
        list(statements(table, 100, packet=2 << 20))
    assert len(list(statements(table, 100, packet=PACKET))) == 1
    (table,) = keyless(ChangeType.INSERT, None, row)
    assert len(list(statements(table, 100, packet=16 << 20))) == 1
    assert len(list(statements(table, 100, big=False, packet=PACKET))) == 1  # not looked at


@pytest.mark.parametrize("value", ["plain", "quote ' \\ \" \0 \n \r \x1a", "é漢字😀" * 2000,
                                   "'\\" * 3000, b"\x00\xff" * 3000, Encoded(b"\x82\xa0", "sjis"),
                                   17, None, {"a": ["b"]}])
def test_a_values_size_is_at_least_its_literals(value: Any) -> None:
    assert pieces.size(value) >= len(literal(value).encode("utf-8", "surrogatepass"))


def test_a_small_target_packet_makes_smaller_events_be_looked_at_row_by_row() -> None:
    """Rows of events up to a quarter of what a statement may carry go unlooked at (a
    byte of a row takes at most 4 in the statement's text): a target at 1 MiB lowers that
    from BIG_VALUE to its room."""
    from node.extract.job import _small
    from node.jobs import JobSpec
    from node.target.mysql.facts import TableFacts

    def spec(*packets: int) -> JobSpec:
        return JobSpec(0, False, {("t", "s", str(n)): TableFacts(packet=packet)
                                  for n, packet in enumerate(packets)})

    assert _small(spec()) == _small(spec(0, 64 << 20)) == pieces.BIG_VALUE
    assert _small(spec(16 << 20, 1 << 20)) == (1 << 20) - pieces.HEAD


def test_values_of_types_a_piece_cannot_hold_are_never_written_a_piece_at_a_time() -> None:
    """A BINARY(n) pads an empty start, a JSON document, ENUM, SET or geometry refuses a
    part: such a column's value stays whole, the row's text and blob values go in pieces
    (a review's rows: a 2 MB JSON document beside a BINARY(16), on a 4 MiB target)."""
    from node.target.mysql.render import Column
    columns = {"id": Column("int", None), "doc": Column("json", None),
               "tag": Column("binary", None, column_type="binary(16)"),
               "note": Column("longtext", "utf8mb4"), "blob": Column("longblob", None)}
    row = {"id": 1, "doc": {"k": "v" * 2_100_000}, "tag": b"\x01" * 16, "note": "hello",
           "blob": b"\x02" * 1_100_000}
    found = list(statements(writes(upserts=[row]), 100, columns, packet=PACKET))
    inserted = dict(zip(["id", "doc", "tag", "note", "blob"], found[0].args[0], strict=True))
    assert inserted["tag"] == b"\x01" * 16 and inserted["doc"] == row["doc"]
    assert inserted["blob"] == b""  # the one value that can go in pieces went so
    assert all(statement.sql.split("`")[5] == "blob" for statement in found[1:])
    # a JSON document is as large as its text (not twice): alone it is written whole
    assert [s.sql.split()[0] for s in statements(
        writes(upserts=[{**row, "blob": None}]), 100, columns, packet=PACKET)] == ["INSERT"]


def test_the_columns_a_check_constraint_names_are_marked() -> None:
    """MariaDB's JSON is a LONGTEXT its check tells from text; a column any check names may
    refuse a partial value (an empty start, ``LIKE '%x'``, a length): none goes in pieces."""
    from node.target.mysql.checks import with_checks
    from node.target.mysql.render import Column
    text = Column("longtext", "utf8mb4")
    columns = {"id": Column("int", None), "doc": text, "tag": text, "note": text,
               "Body": text, "free": text, "doc2": text, "x": text}
    marked = with_checks(columns, ["json_valid(`doc`)", "octet_length(`tag`) > 10",
                                   "`note` like '%x' and `id` > 0", "body <> 'it''s x'"])
    assert {name for name, column in marked.items() if column.checked} == \
        {"id", "doc", "tag", "note", "Body"}
    assert {name for name, column in marked.items() if column.json} == {"doc"}
    assert with_checks(columns, []) is columns
    found = list(statements(writes(upserts=[{"id": 1, "doc": "[" + "1," * 600_000 + "1]",
                                             "free": "f" * 1_200_000}]), 100, marked,
                            packet=8 << 20))
    assert found[0].args[0][1].startswith("[1,1,") and found[0].args[0][2] == ""
    assert {statement.sql.split("`")[5] for statement in found[1:]} == {"free"}


class Checks:
    """A cursor answering the check queries as a server of ``kind`` does."""

    def __init__(self, kind: str) -> None:
        self.kind, self.asked = kind, []  # type: ignore[var-annotated]

    def execute(self, sql: str, args: Any = None) -> None:
        self.asked.append(sql)
        if self.kind == "old":
            raise pymysql.err.OperationalError(1109, "Unknown table 'CHECK_CONSTRAINTS'")
        if self.kind == "mysql" and "TABLE_CONSTRAINTS" not in sql:
            raise pymysql.err.OperationalError(1054, "Unknown column 'TABLE_NAME'")
        if self.kind == "denied":
            raise pymysql.err.OperationalError(1142, "SELECT command denied")

    def fetchall(self) -> list[tuple[str]]:
        return [("(`v` > 0)",)]


def test_check_clauses_are_read_on_mariadb_mysql_and_servers_without_them() -> None:
    from node.target.mysql.checks import check_clauses
    mariadb, mysql, old = Checks("mariadb"), Checks("mysql"), Checks("old")
    assert check_clauses(mariadb, "s", "t") == ["(`v` > 0)"] and len(mariadb.asked) == 1
    assert check_clauses(mysql, "s", "t") == ["(`v` > 0)"] and len(mysql.asked) == 2
    assert "JOIN information_schema.TABLE_CONSTRAINTS" in mysql.asked[1]
    assert check_clauses(old, "s", "t") == []  # (no checks to enforce either)
    with pytest.raises(pymysql.err.OperationalError, match="denied"):  # (as LoadError)
        check_clauses(Checks("denied"), "s", "t")


def json_columns() -> dict[str, Any]:
    from node.target.mysql.render import Column
    return {"id": Column("int", None), "doc": Column("longtext", "utf8mb4", checked=True,
                                                     json=True),
            "blob": Column("longblob", None)}


def test_a_json_document_over_big_value_goes_whole_where_it_fits_the_packet() -> None:
    """A 5 MiB document (over BIG_VALUE) under MariaDB's default 16 MiB packet: one INSERT,
    whole; a blob beside it still goes in pieces where the rest would not fit."""
    doc = '{"k": "' + "é\\\"" * ((5 << 20) // 3) + '"}'
    row = {"id": 1, "doc": doc, "blob": b"\x01" * 10}
    found = list(statements(writes(upserts=[row]), 100, json_columns(), packet=16 << 20))
    assert len(found) == 1 and found[0].args == [[1, doc, b"\x01" * 10]]
    assert all(len(text.encode()) < (16 << 20) - pieces.HEAD for text in sent(found))
    row = {**row, "blob": b"\x01" * (3 << 20)}  # 6 MiB as hex, beside a 7 MiB document
    found = list(statements(writes(upserts=[row]), 100, json_columns(), packet=16 << 20))
    assert found[0].args == [[1, doc, b""]] and len(found) == 2
    assert found[1].sql.split("`")[5] == "blob" and found[1].args[0] == row["blob"]


def test_a_value_no_piece_can_hold_over_the_packet_stops_before_anything_is_sent() -> None:
    """It went to the target, which dropped the connection at every retry; now the render
    refuses it, the pipeline pauses at once (an upsert, a key change: both carry it)."""
    doc = "[" + "1," * (3 << 20) + "1]"  # 6 MiB
    row = {"id": 7, "doc": doc, "blob": b"\x02" * (1 << 20)}
    message = (
        "target t: table s.w: a row's value of `doc` (a JSON document: its CHECK "
        "(json_valid) refuses a part of one) takes 6,291,461 bytes, its statement "
        "6,291,527, over the target's max_allowed_packet (4,194,304 bytes); such a value "
        "goes in one statement, it cannot be cut. Raise the target's max_allowed_packet to "
        "at least 7340032 (SET GLOBAL max_allowed_packet = 7340032; and in my.cnf), then "
        "resume the channel: nothing of the batch was written")
    with pytest.raises(RowTooLargeError) as refused:
        list(statements(writes(upserts=[{"id": 6}, row]), 100, json_columns(), packet=PACKET))
    assert str(refused.value) == message
    assert isinstance(refused.value, PAUSE_AT_ONCE)
    with pytest.raises(RowTooLargeError, match="its statement 6,291,591, over"):
        list(statements(writes(steps=[(MOVE, ((5,), row))]), 100, json_columns(),
                        packet=PACKET))  # (the old key too)
    assert len(list(statements(writes(upserts=[row]), 100, json_columns(),
                               packet=8 << 20))) == 2  # the blob in a piece of its own
    # a MySQL JSON document (a dict), a long key: each says why it cannot be cut
    from node.target.mysql.render import Column
    columns = {"id": Column("varchar", "utf8mb4"), "doc": Column("json", None,
                                                                 column_type="json")}
    with pytest.raises(RowTooLargeError, match=r"`doc` \(json: a part of a value is no "
                                               r"value of its type\)"):
        list(statements(writes(upserts=[{"id": 1, "doc": {"k": "v" * (5 << 20)}}]), 100,
                        columns, packet=PACKET))
    with pytest.raises(RowTooLargeError, match=r"`id` \(a key column: it finds the row"):
        list(statements(writes(upserts=[{"id": "k" * (5 << 20), "doc": None}]), 100,
                        columns, packet=PACKET))
    with pytest.raises(RowTooLargeError, match=r"max_allowed_packet .16,777,216 bytes: not "
                                               r"known, taken as the default"):
        list(statements(writes(upserts=[{"id": 1, "doc": {"k": "v" * (17 << 20)}}]), 100,
                        columns))


def test_a_value_in_a_unique_index_goes_whole() -> None:
    """A text column under a (prefix) unique index: its empty start would meet another
    row's empty value there and update that row instead (a review: the target then held the
    other row, and the append found no row); over BIG_VALUE it goes whole where it fits."""
    from node.target.mysql.render import Column
    text = "y" * 1_200_000  # over BIG_VALUE // 4 characters
    columns = {"id": Column("int", None, unique=True),
               "doc": Column("longtext", "utf8mb4", unique=True)}
    found = list(statements(writes(upserts=[{"id": 2, "doc": text}]), 100, columns,
                            packet=16 << 20))
    assert len(found) == 1 and found[0].args == [[2, text]]
    assert "CONCAT" not in " ".join(sent(found))
    plain = {**columns, "doc": Column("longtext", "utf8mb4")}  # (no index: in pieces)
    assert len(list(statements(writes(upserts=[{"id": 2, "doc": text}]), 100, plain,
                               packet=16 << 20))) > 1


def test_a_column_the_target_spells_otherwise_keeps_its_mark() -> None:
    """The target's `Doc` (JSON) and the row's `doc`: names ignore case, so the mark holds
    (a review: the document went in pieces, the check refused the empty start)."""
    from node.target.mysql.render import Column
    doc = '["' + "y" * 1_200_000 + '"]'
    columns = {"Id": Column("int", None, unique=True),
               "Doc": Column("longtext", "utf8mb4", checked=True, json=True)}
    found = list(statements(writes(upserts=[{"id": 2, "doc": doc}]), 100, columns,
                            packet=16 << 20))
    assert len(found) == 1 and found[0].args == [[2, doc]]
    with pytest.raises(RowTooLargeError, match=r"`doc` \(a JSON document"):
        list(statements(writes(upserts=[{"id": 2, "doc": doc * 8}]), 100, columns,
                        packet=4 << 20))


def test_the_columns_a_guarded_generated_column_is_computed_from_are_marked() -> None:
    """``h AS (MD5(doc)) UNIQUE`` and ``g AS (LEFT(body, 1)) CHECK (g = '{')``: doc is marked
    unique, body checked; a column no guarded expression names is not."""
    from node.target.mysql.checks import with_generated
    from node.target.mysql.render import Column
    columns = {"id": Column("int", None), "doc": Column("longtext", "utf8mb4"),
               "body": Column("longtext", "utf8mb4"), "other": Column("longtext", "utf8mb4"),
               "h": Column("char", "utf8mb4", generated=True, unique=True),
               "g": Column("char", "utf8mb4", generated=True, checked=True),
               "n": Column("int", None, generated=True)}
    marked = with_generated(columns, {"h": "md5(`doc`)", "g": "left(`body`,1)",
                                      "n": "length(`other`)"})
    assert marked["doc"].unique and not marked["doc"].checked
    assert marked["body"].checked and not marked["body"].unique
    assert marked["other"] == columns["other"] and marked["id"] == columns["id"]


def test_a_value_longer_than_the_targets_packet_stops_though_it_could_go_in_pieces() -> None:
    """A 5 MiB blob to a 4 MiB target: each piece fits, but the server builds the value
    whole and CONCAT refuses it past the packet (a copy retried it forever): it stops at
    once, saying what to raise; where the packet is not known, the pieces are tried."""
    row = {"id": 1, "blob": b"\x03" * (5 << 20)}
    with pytest.raises(RowTooLargeError, match=r"`blob` takes 5,242,880 bytes, over the "
                       r"target's max_allowed_packet \(4,194,304 bytes\).*at least 6291456"):
        list(statements(writes(upserts=[row]), 100, {}, packet=PACKET))
    assert len(list(statements(writes(upserts=[row]), 100, {}, packet=0))) > 1
    assert len(list(statements(writes(upserts=[row]), 100, {}, packet=8 << 20))) > 1


def test_a_text_longer_in_bytes_than_the_targets_packet_stops_by_its_bytes() -> None:
    """5 Mi CJK characters are 15 MiB of UTF-8: over a 8 MiB packet though their count is
    not (a review: counted in characters, the row went in pieces the target refused at every
    retry); in a latin1 column, a character is a byte."""
    from node.target.mysql.render import Column
    text = "中" * (5 << 20)
    row = {"id": 1, "body": text}
    with pytest.raises(RowTooLargeError, match=r"`body` takes 15,728,640 bytes, over the "
                       r"target's max_allowed_packet \(8,388,608 bytes\).*at least 16777216"):
        list(statements(writes(upserts=[row]), 100,
                        {"id": Column("int", None), "body": Column("longtext", "utf8mb4")},
                        packet=8 << 20))
    latin = {"id": 1, "body": "é" * (5 << 20)}
    assert len(list(statements(writes(upserts=[latin]), 100,
                               {"id": Column("int", None), "body": Column("longtext", "latin1")},
                               packet=8 << 20))) > 1
