"""Snapshot chunks as the source's LOAD DATA lines (node.extract.copylines): which tables may
go that way, how keys become the tokens lines start with, and how lines whose key the
stream changed inside the window are left to the stream."""

from __future__ import annotations

import dataclasses

import pytest

from node.changes import ChangeType, RowChange
from node.extract import copylines
from node.extract.copylines import KeyPart, LinesPlan, token
from node.extract.job import Part, run_part, with_lines
from node.extract.reads import ROW_BITS, Read, ReadColumn
from node.jobs import JobSpec, in_order
from node.target.mysql import loaddata
from node.target.mysql.facts import TableFacts
from node.target.mysql.render import Column
from shared.errors import SetlError
from tests.unit.test_etl import compiled

SOURCE = (ReadColumn("id", "int", "int(11)", None, False),
          ReadColumn("name", "varchar", "varchar(20)", "utf8mb4", True),
          ReadColumn("note", "text", "text", "utf8mb4", True))


def target(**changed: Column) -> TableFacts:
    columns = {"id": Column("int", None, column_type="int(11)"),
               "name": Column("varchar", "utf8mb4", column_type="varchar(20)"),
               "note": Column("text", "utf8mb4", column_type="text")}
    return TableFacts({**columns, **changed}, (frozenset({"id"}),))


def plan(pair: str = "{source: s.t, target: s2.t}", facts: TableFacts | None = None,
         columns: tuple[ReadColumn, ...] = SOURCE, keys: tuple[str, ...] = ("id",),
         options: str = "") -> LinesPlan | None:
    return copylines.plan(compiled(pair, options=options),
                          lambda name: facts if facts is not None else target(), "s", "t",
                          columns, keys)


def test_a_pair_that_renames_and_chooses_columns_goes_as_lines() -> None:
    found = plan("{source: s.t, target: s2.u, columns: {exclude: [note]}, "
                 "column_pairs: [{source: name, target: title}]}",
                 TableFacts({"id": Column("int", None, column_type="int(11)"),
                             "title": Column("varchar", "utf8mb4", column_type="varchar(20)"),
                             "g": Column("int", None, generated=True)},
                            (frozenset({"id"}),)))
    assert found is not None
    assert (found.datasource, found.schema, found.table) == ("dst", "s2", "u")
    assert [c.name for c in found.sources] == ["id", "name"] and found.targets == ("id",
                                                                                    "title")
    assert found.keys == (KeyPart("id", "int"),)


@pytest.mark.parametrize("why, kwargs", [
    ("another type", {"facts": target(name=Column("varchar", "utf8mb4",
                                                  column_type="varchar(30)"))}),
    ("another charset", {"facts": target(name=Column("varchar", "latin1",
                                                     column_type="varchar(20)"))}),
    ("a target column the pair does not write", {"facts": target(
        extra=Column("int", None, column_type="int(11)"))}),
    ("a trigger", {"facts": TableFacts(target().columns, (frozenset({"id"}),),
                                       triggers=True)}),
    ("another unique key", {"facts": TableFacts(target().columns, (
        frozenset({"id"}), frozenset({"name"})))}),
    ("a foreign key", {"facts": TableFacts(target().columns, (frozenset({"id"}),),
                                           foreign_keys=True)}),
    ("a BIT column", {"columns": (*SOURCE[:2], ReadColumn("note", "bit", "bit(8)")),
                      "facts": target(note=Column("bit", None, column_type="bit(8)"))}),
    ("a date key", {"columns": (ReadColumn("id", "date", "date", None, False), *SOURCE[1:]),
                    "facts": target(id=Column("date", None, column_type="date"))}),
    ("a key that admits NULL", {"keys": ("name",)}),
    ("a processor", {"pair": "{source: s.t, target: s2.t, processor: 'setl_examples:mask_email'}"}),
    ("a shard route", {"pair": '{source: s.t, target: {namespace: "s2", table: "t_[0-1]"}, '
                               "shard: {column: id}}"}),
])
def test_rows_that_would_not_read_back_the_same_go_as_rows(why: str, kwargs: dict) -> None:
    assert plan(**kwargs) is None, why


def test_a_two_way_pipeline_reads_rows() -> None:
    c = compiled("{source: s.t, target: s2.t}")
    object.__setattr__(c, "two_way", True)
    assert copylines.plan(c, lambda name: target(), "s", "t", SOURCE, ("id",)) is None


def test_keys_become_the_tokens_the_source_writes() -> None:
    assert token(-42, KeyPart("id", "int")) == b"-42"
    assert token("ab ", KeyPart("c", "char", "utf-8")) == b"6162"  # CHAR read unpadded
    assert token("ab ", KeyPart("c", "varchar", "utf-8")) == b"616220"
    assert token("ü", KeyPart("c", "varchar", "latin-1")) == b"FC"
    assert token(b"\x00\x01\x00\x00", KeyPart("b", "binary")) == b"0001"
    assert token("", KeyPart("b", "binary")) == b""  # the binlog's empty binary string
    assert token(b"\x00", KeyPart("b", "varbinary")) == b"00"
    assert token(None, KeyPart("id", "int")) is None
    with pytest.raises(SetlError, match="cannot compare key column id"):
        token("7", KeyPart("id", "int"))  # never guessed: a miss would copy an older row


LINES_PLAN = LinesPlan("dst", "s2", "t", 0, (KeyPart("id", "int"), KeyPart("c", "varchar",
                                                                          "utf-8")),
                       SOURCE[:2], ("id", "name"))


def lines_read(lines: bytes, count: int) -> Read:
    return Read(1, "s", "t", ("id", "c"), ("id", "c", "name"), lines, count, "chunk 1",
                first=2, end=5, lines=LINES_PLAN)


def change(seq: int, before: dict | None, after: dict | None) -> tuple[int, RowChange]:
    kind = ChangeType.UPDATE if before and after else \
        ChangeType.INSERT if after else ChangeType.DELETE
    return seq << ROW_BITS, RowChange("s", "t", kind, ("id", "c"), before, after)


def test_lines_whose_key_changed_inside_the_window_are_left_to_the_stream() -> None:
    lines = b"1:61\t1\ta\n2:61\t2\tb\n3:62\t3\tc\n4:61\t4\t\\N\n"
    read = lines_read(lines, 4)
    # 4:'x' is not a line's key; None: no image (an insert's before)
    dropped = copylines.tokens(read, [(2, "a"), (3, "b"), (4, "x"), None])
    assert dropped == {b"2:61", b"3:62", b"4:78"}
    [unit] = copylines.units([read], lambda read: dropped)
    assert (unit.datasource, unit.schema, unit.table, unit.first_seq, unit.rows) == (
        "dst", "s2", "t", -1, 2)
    [sql] = unit.sqls
    assert sql.data == b"1:61\t1\ta\n4:61\t4\t\\N\n" and sql.rows == 2
    assert sql.text.startswith("LOAD DATA LOCAL INFILE 'setl-rows' REPLACE INTO TABLE "
                               "`s2`.`t` CHARACTER SET binary")
    assert sql.text.endswith("(@setl_key, `id`, `name`)")
    assert copylines.units([read], lambda read: dropped | {b"1:61", b"4:61"}) == []


def test_lines_stay_in_the_node_and_leave_out_what_the_batch_writes_after_their_start(
        ) -> None:
    """The part sees the batch's events and says which keys to leave out: those the batch
    writes from the window's low watermark on (inside the window, and after it: the lines
    load after the batch's transaction); a key changed only before the window stays."""
    c = compiled("{source: s.t, target: s2.t}")
    stream = [change(1, {"id": 1, "c": "a", "name": "old"}, {"id": 1, "c": "a", "name": "z"}),
              change(3, {"id": 2, "c": "a", "name": "b"}, {"id": 2, "c": "a", "name": "y"}),
              change(7, None, {"id": 3, "c": "b", "name": "after"})]
    read = lines_read(b"1:61\t1\tz\n2:61\t2\tb\n3:62\t3\tc\n5:61\t5\te\n", 4)
    result = run_part(c, JobSpec(1, False), Part(*Part.of_changes([])[:5], decoded=stream,
                                                   reads=[read._replace(rows=b"")]))
    assert result.dropped == {read.place: frozenset({b"2:61", b"3:62"})}
    [lines, *results] = with_lines([result], [read])
    [unit] = lines.units
    assert unit.apart and unit.sqls[0].data == b"1:61\t1\tz\n5:61\t5\te\n"
    assert lines.rows == 4 and unit.rows == 2
    assert [u.sqls[0].text.split()[0] for u in in_order(results)] == ["INSERT"]


def test_a_complete_result_holds_every_row_counted() -> None:
    assert copylines.complete(2, b"1\ta\n2\tb\n")
    assert not copylines.complete(3, b"1\ta\n2\tb\n")  # cut at group_concat_max_len
    assert not copylines.complete(2, b"1\ta\n2\tb")
    assert copylines.complete(0, b"")


def test_lines_are_cut_into_statements_at_whole_lines(monkeypatch) -> None:
    monkeypatch.setattr(loaddata, "CHUNK", 10)
    assert list(loaddata.pieces(b"aaa\nbbb\nccccccccccccc\nd\n")) == [
        (2, b"aaa\nbbb\n"), (1, b"ccccccccccccc\n"), (1, b"d\n")]


def test_a_target_that_locks_for_load_data_gets_multi_row_replace_tuples(monkeypatch) -> None:
    """An AUTO_INCREMENT target under innodb_autoinc_lock_mode 1 (facts.bulk_lock): the
    source writes each row as a VALUES tuple (text as _binary literals, a line break
    escaped), and the lines left after the stream's keys become REPLACE statements of about
    STATEMENT bytes, without their key tokens."""
    facts = TableFacts(target().columns, (frozenset({"id"}),), bulk_lock=True)
    found = plan(facts=facts)
    assert found is not None and found.values
    assert plan().values is False  # (the same table without the lock: LOAD DATA lines)
    # a target server that takes no LOAD DATA LOCAL (local_infile OFF) gets the same tuples
    off = plan(facts=TableFacts(target().columns, (frozenset({"id"}),), local_infile=False))
    assert off == found
    sql = copylines.query(found, "s", "t", "`id` > 5")
    assert "IFNULL(CAST(`id` AS BINARY), 'NULL')" in sql  # a number as its text
    assert "CONCAT('_binary', REPLACE(REPLACE(QUOTE(CAST(`name` AS BINARY))" in sql
    read = lines_read(b"1\t(1,_binary'a',NULL)\n2\t(2,_binary'b\\n',NULL)\n"
                      b"3\t(3,NULL,_binary'c')\n", 3)._replace(lines=found)
    monkeypatch.setattr(copylines, "STATEMENT", 20)
    [unit] = copylines.units([read], lambda read: frozenset({b"2"}))
    assert unit.apart and unit.rows == 2
    [first, second] = unit.sqls
    assert first.text == "REPLACE INTO `s2`.`t` (`id`, `name`, `note`) VALUES "
    assert (first.data, first.rows, first.inline) == (b"(1,_binary'a',NULL)", 1, True)
    assert (second.data, second.rows) == (b"(3,NULL,_binary'c')", 1)


def test_tuples_are_judged_against_the_targets_packet() -> None:
    """The source reads a chunk under its own max_allowed_packet, which may be larger than
    the target's: a VALUES tuple past the target's room reads the chunk as rows
    (copylines.fits), and a statement is cut before a long tuple that would take it past
    the room. LOAD DATA lines stream a packet at a time: any length fits."""
    facts = TableFacts(target().columns, (frozenset({"id"}),), local_infile=False,
                       packet=100)
    found = plan(facts=facts)
    assert found is not None and found.values and found.packet == 100
    space = copylines.room(100)  # (50: half of a tiny packet)
    short, long_ = b"1\t(1,NULL,NULL)\n", b"2\t(2,NULL,X'" + b"00" * 16 + b"')\n"
    assert len(long_) <= space < len(long_ + short)
    assert copylines.fits(found, short + long_)  # each tuple fits, not both together
    huge = b"3\t(3,NULL,X'" + b"00" * space + b"')\n"
    assert not copylines.fits(found, short + huge)
    assert copylines.fits(dataclasses.replace(found, values=False), short + huge)
    read = lines_read(short + long_, 2)._replace(lines=found)
    [unit] = copylines.units([read], lambda read: frozenset())
    assert [sql.rows for sql in unit.sqls] == [1, 1]  # (under STATEMENT: one, before)
    assert all(len(sql.data) <= space for sql in unit.sqls)
    assert [sql.rows for sql in copylines.units(
        [read._replace(lines=dataclasses.replace(found, packet=0))],
        lambda read: frozenset())[0].sqls] == [2]


def test_a_long_text_column_goes_as_hex_and_a_short_one_escaped() -> None:
    """Escaping by REPLACE is quadratic in the matches on MariaDB (1 MiB of zero bytes took
    27 minutes): a column whose value may pass copylines.SHORT bytes goes as its bytes in
    hex, unhexed by the target (LOAD DATA's SET, a VALUES tuple's X'…'); a short one, like
    sysbench's CHAR(120), is escaped as before."""
    wide = ReadColumn("wide", "varchar", "varchar(300)", "utf8mb4", True)
    narrow = ReadColumn("narrow", "char", "char(255)", "latin1", True)
    blob = ReadColumn("px", "mediumblob", "mediumblob", None, True)
    short_bin = ReadColumn("raw", "varbinary", "varbinary(1024)", None, True)
    assert [copylines.long(column) for column in (*SOURCE, wide, narrow, blob, short_bin)] \
        == [False, False, True, True, False, True, False]
    assert not copylines.long(ReadColumn("e", "enum", "enum('a','b')", "utf8mb4"))
    lines = LinesPlan("dst", "s2", "t", 1, (KeyPart("id", "int"),), SOURCE,
                      ("id", "name", "note"))
    sql = copylines.query(lines, "s", "t", "`id` > 5")
    # (a NULL HEX, past max_allowed_packet, makes no line: the chunk is read as rows)
    assert "IF(`note` IS NULL, '\\\\N', HEX(CAST(`note` AS BINARY)))" in sql
    assert "REPLACE(" in sql and "HEX(CAST(`name`" not in sql
    assert copylines.head(lines).endswith(
        "(@setl_key, `id`, `name`, @setl_hex2) SET `note` = UNHEX(@setl_hex2)")
    tuples = copylines.query(dataclasses.replace(lines, values=True), "s", "t", "`id` > 5")
    assert "IF(`note` IS NULL, 'NULL', CONCAT('X''', HEX(CAST(`note` AS BINARY)), ''''))" \
        in tuples
    read = lines_read(b"1\t1\ta\t00FF\n", 1)._replace(lines=lines)
    [unit] = copylines.units([read], lambda read: frozenset())
    assert unit.sqls[0].text == copylines.head(lines)
