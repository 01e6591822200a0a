"""The statements Load renders for one table's writes: names quoted whatever they hold,
generated columns never written, keyless tables in source order matched byte for byte."""

from __future__ import annotations

from typing import Any

import pytest

from node.changes import ChangeType, TargetChange
from node.charsets import Encoded
from node.merge import CLEAR_, DELETE, MOVE, UPSERT, PartialRow, TableWrites, merge
from node.target.mysql.pieces import BIG_VALUE
from node.target.mysql.render import Column, statements

GENERATED = {"id": Column("int", None), "price": Column("int", None),
             "total_v": Column("int", None, generated=True),
             "total_p": Column("int", None, generated=True)}


def writes(**fields: object) -> TableWrites:
    base: dict[str, object] = {"datasource": "t", "schema": "s", "table": "gen", "keys": ("id",),
                               "push_weight": 0, "first_seq": 0}
    return TableWrites(**{**base, **fields})  # type: ignore[arg-type]


def test_generated_columns_are_left_out_of_upserts_in_merged_and_ordered_writes() -> None:
    row = {"id": 1, "price": 2, "total_v": 4, "total_p": 4}
    merged = list(statements(writes(upserts=[row], deletes=[(9,)]), 100, GENERATED))
    assert [s.sql for s in merged] == [
        "DELETE FROM `s`.`gen` WHERE (`id`) IN ((%s))",
        "INSERT INTO `s`.`gen` (`id`, `price`) VALUES (%s, %s) ON DUPLICATE KEY UPDATE "
        "`price` = VALUES(`price`)"]
    assert merged[1].args == [[1, 2]]
    ordered = list(statements(writes(steps=[(UPSERT, row), (DELETE, (1,)),
                                            (MOVE, ((1,), {**row, "id": 2}))]), 100,
                              {**GENERATED, "total_p": Column("int", None)}))
    assert "`total_v`" not in ordered[0].sql and "`total_p`" in ordered[0].sql
    assert (ordered[2].sql, ordered[2].args, ordered[2].matches_one) == (
        "UPDATE `s`.`gen` SET `id` = %s, `price` = %s, `total_p` = %s WHERE (`id`) = (%s)",
        [2, 2, 4, 1], False)
    # then the row's upsert: where the old key is not there yet (a copy has not reached it),
    # the row is written, where the UPDATE moved it, it changes nothing
    assert (ordered[3].sql, ordered[3].args) == (
        "INSERT INTO `s`.`gen` (`id`, `price`, `total_p`) VALUES (%s, %s, %s) ON DUPLICATE "
        "KEY UPDATE `price` = VALUES(`price`), `total_p` = VALUES(`total_p`)", [[2, 2, 4]])
    assert len(ordered) == 4
    # one row to skip_load_exception's second try: a refused UPDATE undoes the upsert too
    # (else the row was written at its new key beside the old one the UPDATE left)
    assert [s.continues for s in ordered] == [False, False, False, True]


def test_parts_cleared_update_their_rows_where_they_are_before_the_upserts() -> None:
    """A clear never makes a row; clears of the same columns go as one UPDATE; a clear of
    key columns only (its part's columns were NULL already) writes nothing; generated
    columns are left out."""
    cleared = {"id": 1, "price": None, "total_v": None}
    w = writes(deletes=[(9,)], upserts=[{"id": 3, "price": 5}],
               clears=[cleared, {**cleared, "id": 2}, {"id": 4}, {"id": 5, "price": 7}])
    found = [(s.sql, s.args, s.matches_one) for s in statements(w, 100, GENERATED)]
    assert found == [
        ("DELETE FROM `s`.`gen` WHERE (`id`) IN ((%s))", [9], False),
        ("UPDATE `s`.`gen` SET `price` = %s WHERE (`id`) = (%s)", [7, 5], False),
        ("UPDATE `s`.`gen` SET `price` = NULL WHERE (`id`) IN ((%s), (%s))", [1, 2], False),
        ("INSERT INTO `s`.`gen` (`id`, `price`) VALUES (%s, %s) ON DUPLICATE KEY UPDATE "
         "`price` = VALUES(`price`)", [[3, 5]], False)]
    ordered = list(statements(writes(steps=[(CLEAR_, ((1,), cleared))]), 100, GENERATED))
    assert [s.sql for s in ordered] == [
        "UPDATE `s`.`gen` SET `price` = NULL WHERE (`id`) IN ((%s))"]


def test_any_name_is_quoted_with_backticks_doubled() -> None:
    odd = writes(schema="my-db.x", table="t`1 表", keys=("a b",), deletes=[(1,)],
                 upserts=[{"a b": 1, "c`d": 2}])
    delete, upsert = statements(odd, 10)
    assert delete.sql.startswith("DELETE FROM `my-db.x`.`t``1 表` WHERE (`a b`) IN")
    assert upsert.sql.startswith("INSERT INTO `my-db.x`.`t``1 表` (`a b`, `c``d`) VALUES")


def test_each_upsert_names_its_own_table_columns_and_key_however_often_rendered() -> None:
    # the statement heads are remembered (render._upsert): by table, columns and key
    cases = [(writes(table="a", upserts=[{"id": 1, "x": 2}]),
              "INSERT INTO `s`.`a` (`id`, `x`) VALUES (%s, %s) ON DUPLICATE KEY UPDATE "
              "`x` = VALUES(`x`)"),
             (writes(table="b", upserts=[{"id": 1, "x": 2}]),
              "INSERT INTO `s`.`b` (`id`, `x`) VALUES (%s, %s) ON DUPLICATE KEY UPDATE "
              "`x` = VALUES(`x`)"),
             (writes(table="a", upserts=[{"id": 1, "y": 2}]),
              "INSERT INTO `s`.`a` (`id`, `y`) VALUES (%s, %s) ON DUPLICATE KEY UPDATE "
              "`y` = VALUES(`y`)"),
             (writes(table="a", keys=("x",), upserts=[{"id": 1, "x": 2}]),
              "INSERT INTO `s`.`a` (`id`, `x`) VALUES (%s, %s) ON DUPLICATE KEY UPDATE "
              "`id` = VALUES(`id`)")]
    for _ in range(2):
        for table_writes, sql in cases:
            (upsert,) = statements(table_writes, 10)
            assert upsert.sql == sql


def change(kind: ChangeType, before: dict[str, Any] | None, after: dict[str, Any] | None,
           seq: int) -> TargetChange:
    return TargetChange("t", "s", "logs", kind, (), () if before else None, after, seq=seq,
                        before=before)


KEYLESS = {"a": Column("int", None), "b": Column("varchar", "latin1"),
           "f": Column("float", None), "g": Column("point", None),
           "v": Column("int", None, generated=True)}


def test_a_keyless_table_is_written_in_source_order_and_matched_by_its_whole_before_image(
        ) -> None:
    one = {"a": 1, "b": "x", "f": 0.10000000149011612, "g": b"\x00\x01", "v": 2}
    null = {"a": None, "b": None, "f": None, "g": None, "v": None}
    changes = [change(ChangeType.INSERT, None, one, 0), change(ChangeType.INSERT, None, one, 1),
               change(ChangeType.INSERT, None, null, 2),
               change(ChangeType.UPDATE, one, {**one, "b": "X", "v": 3}, 3),
               change(ChangeType.DELETE, null, None, 4), change(ChangeType.INSERT, None, one, 5),
               change(ChangeType.UPDATE, one, {**one, "v": 9}, 6)]  # only generated changes
    (table,) = merge(changes)
    assert table.rows == 7 and not table.upserts and not table.deletes
    written = list(statements(table, 100, KEYLESS))
    where = ("`a` = %s AND CAST(`b` AS BINARY) = CAST(CONVERT(%s USING latin1) AS BINARY) AND "
             "`f` = %s AND CAST(`g` AS BINARY) = %s")
    assert [(s.sql, s.many, s.matches_one) for s in written] == [
        ("INSERT INTO `s`.`logs` (`a`, `b`, `f`, `g`) VALUES (%s, %s, %s, %s)", True, False),
        # every column set: one the target updates ON UPDATE would otherwise take its time
        (f"UPDATE `s`.`logs` SET `a` = %s, `b` = %s, `f` = %s, `g` = %s WHERE {where} LIMIT 1",
         False, True),
        ("DELETE FROM `s`.`logs` WHERE `a` IS NULL AND `b` IS NULL AND `f` IS NULL AND "
         "`g` IS NULL LIMIT 1", False, True),
        ("INSERT INTO `s`.`logs` (`a`, `b`, `f`, `g`) VALUES (%s, %s, %s, %s)", True, False)]
    assert written[0].args == [[1, "x", 0.10000000149011612, b"\x00\x01"]] * 2 + [
        [None, None, None, None]]
    assert written[1].args == [1, "X", 0.10000000149011612, b"\x00\x01",
                               1, "x", 0.10000000149011612, b"\x00\x01"]


def test_a_keyless_update_or_delete_without_a_before_image_is_refused() -> None:
    (table,) = merge([change(ChangeType.DELETE, None, None, 0)])
    with pytest.raises(ValueError, match="no before image"):
        list(statements(table, 100, KEYLESS))


def test_a_value_too_big_for_one_statement_is_appended_a_piece_at_a_time() -> None:
    blob, text = bytes(range(256)) * (BIG_VALUE // 256) + b"\x01", "é" * (BIG_VALUE // 4 + 1)
    rows = [{"id": 1, "b": blob, "t": "small"}, {"id": 2, "b": b"x", "t": text},
            {"id": 3, "b": b"y", "t": "z"}]
    found = list(statements(writes(upserts=rows), 100))
    upsert = ("INSERT INTO `s`.`gen` (`id`, `b`, `t`) VALUES (%s, %s, %s) ON DUPLICATE KEY "
              "UPDATE `b` = VALUES(`b`), `t` = VALUES(`t`)")
    append_b = "UPDATE `s`.`gen` SET `b` = CONCAT(`b`, %s) WHERE (`id`) = (%s)"
    append_t = "UPDATE `s`.`gen` SET `t` = CONCAT(`t`, %s) WHERE (`id`) = (%s)"
    assert [(s.sql, s.many) for s in found] == [
        (upsert, True), (append_b, False), (append_b, False),
        (upsert, True), (append_t, False), (append_t, False),
        (upsert, True)]
    assert found[0].args == [[1, b"", "small"]] and found[3].args == [[2, b"x", ""]]
    assert found[1].args[0] + found[2].args[0] == blob and found[2].args[1] == 1
    assert found[4].args[0] + found[5].args[0] == text
    assert all(len(s.args[0]) <= BIG_VALUE for s in found[1:3])
    assert all(s.matches_one for s in found if not s.many)
    assert found[6].args == [[3, b"y", "z"]]


def test_a_row_with_an_empty_enum_is_written_alone_and_leniently() -> None:
    columns = {"id": Column("int", None), "e": Column("enum", "utf8mb4"),
               "v": Column("varchar", "utf8mb4")}
    rows = [{"id": 1, "e": "a", "v": ""}, {"id": 2, "e": "", "v": "x"}, {"id": 3, "e": "b",
                                                                       "v": "y"}]
    found = list(statements(writes(upserts=rows), 100, columns))
    assert [(s.args, s.lenient) for s in found] == [  # in source order; '' in a VARCHAR: plain
        ([[1, "a", ""]], ()), ([[2, "", "x"]], ("e",)), ([[3, "b", "y"]], ())]
    # an ordered table's two versions of one row: the later one is written last
    later = list(statements(writes(steps=[(UPSERT, {"id": 1, "e": "a", "v": "1"}),
                                          (UPSERT, {"id": 1, "e": "", "v": "2"})]), 100, columns))
    assert [s.args for s in later] == [[[1, "a", "1"]], [[1, "", "2"]]]
    moved = list(statements(writes(steps=[(MOVE, ((5,), {"id": 6, "e": "", "v": "z"}))]), 100,
                            columns))
    assert [s.lenient for s in moved] == [("e",), ("e",)]


def test_the_pieces_of_a_big_value_are_marked_as_continuing_their_rows_insert() -> None:
    """One-by-one mode skips a refused row with all of its statements: the pieces say
    they go on writing the row of the statement before them, and the SQL texts keep it."""
    from node.target.mysql.sqltext import texts

    rows = [{"id": 1, "b": b"a" * (BIG_VALUE + 1)}, {"id": 2, "b": b"x"},
            {"id": 3, "b": b"c" * (2 * BIG_VALUE + 1)}]
    found = list(statements(writes(upserts=rows), 1))
    assert [(s.sql.split()[0], s.continues) for s in found] == [
        ("INSERT", False), ("UPDATE", True), ("UPDATE", True),
        ("INSERT", False),
        ("INSERT", False), ("UPDATE", True), ("UPDATE", True), ("UPDATE", True)]
    assert [sql.continues for s in found for sql in texts(s, keep_what=True)] == \
        [s.continues for s in found]


def test_a_keyless_match_finds_its_columns_whatever_the_case_of_their_names() -> None:
    """The target's table was made with Login and Code where the source (and so the pair)
    names login and code: MySQL takes either spelling, and the match must still compare
    Login byte for byte (not under its case-folding collation: 'bob' deleted 'Bob') and
    pad Code, a BINARY(4), as the target stores it."""
    columns = {"Login": Column("varchar", "utf8mb4", collation="utf8mb4_general_ci"),
               "Code": Column("binary", None, column_type="binary(4)")}
    row = {"login": "bob", "code": b"ab"}
    (table,) = merge([change(ChangeType.INSERT, None, row, 0),
                      change(ChangeType.DELETE, row, None, 1)])
    written = list(statements(table, 100, columns))
    assert (written[-1].sql, written[-1].args) == (
        "DELETE FROM `s`.`logs` WHERE CAST(`login` AS BINARY) = CAST(CONVERT(%s USING "
        "utf8mb4) AS BINARY) AND CAST(`code` AS BINARY) = %s LIMIT 1", ["bob", b"ab\0\0"])


STAMPED = {"id": Column("int", None), "body": Column("longtext", "utf8mb4"),
           "v": Column("int", None), "At": Column("timestamp", None, stamped=True)}


def test_a_statement_that_changes_a_row_without_its_stamped_column_sets_it_to_itself() -> None:
    """A target column ON UPDATE CURRENT_TIMESTAMP (a table's first TIMESTAMP before MariaDB
    10.10) takes the target's clock when a statement changes the row without assigning it:
    the pieces of a big value, a column-group update, a wide row's other part or clear."""
    text = "é" * (BIG_VALUE // 4 + 1)
    found = list(statements(writes(upserts=[{"id": 1, "body": text, "at": "2020-01-01"}]),
                            100, STAMPED))
    assert found[0].sql.endswith("`body` = VALUES(`body`), `at` = VALUES(`at`)")
    assert found[1].sql == "UPDATE `s`.`gen` SET `body` = CONCAT(`body`, %s), `At` = `At` " \
        "WHERE (`id`) = (%s)"
    partial = PartialRow({"id": 1, "v": 2}, {"body": "b", "at": "2020-01-01"})
    [group] = statements(writes(upserts=[partial]), 100, STAMPED)
    assert group.sql.endswith("UPDATE `v` = VALUES(`v`), `At` = `At`")
    partial = PartialRow({"id": 1, "body": text}, {"v": 1, "at": "2020-01-01"})
    found = list(statements(writes(upserts=[partial]), 100, STAMPED))
    assert len(found) == 3 and all(s.sql.endswith("`At` = `At` WHERE (`id`) = (%s)")
                                   for s in found[1:])  # its big value's pieces too
    # a wide row's part: the stamped column is another part's (or no pair's) to write
    part, cleared = {"id": 1, "v": 2}, {"id": 2, "v": None}
    for parted, kept in ((False, ""), (True, ", `At` = `At`")):
        found = list(statements(writes(upserts=[part], clears=[cleared]), 100, STAMPED,
                                parted=parted))
        assert [s.sql for s in found] == [
            f"UPDATE `s`.`gen` SET `v` = NULL{kept} WHERE (`id`) IN ((%s))",
            f"INSERT INTO `s`.`gen` (`id`, `v`) VALUES (%s, %s) ON DUPLICATE KEY UPDATE "
            f"`v` = VALUES(`v`){kept}"]
    # a key's move assigns every column the row holds; in a wide row's table the others too
    [move, _] = statements(writes(steps=[(MOVE, ((1,), {"id": 2, "v": 3}))]), 100, STAMPED,
                           parted=True)
    assert move.sql == "UPDATE `s`.`gen` SET `id` = %s, `v` = %s, `At` = `At` WHERE (`id`) " \
        "= (%s)"


@pytest.mark.parametrize("charset, character", [("sjis", b"\x93\xfa"), ("ujis", b"\x8f\xb0\xa1"),
                                                ("greek", b"\xe1")])
def test_a_big_value_kept_as_bytes_is_appended_in_whole_characters_naming_its_charset(
        charset: str, character: bytes) -> None:
    """The server converts each piece into the target column's charset on its own: a piece
    without its charset was written as bytes, and one ending inside a character broke it."""
    value = Encoded(b"a" + character * (BIG_VALUE // len(character) + 7), charset)
    found = list(statements(writes(upserts=[{"id": 1, "s": value}]), 100,
                            {"id": Column("int", None), "s": Column("text", "utf8mb4")}))
    pieces = [s.args[0] for s in found[1:]]
    assert len(pieces) >= 2 and b"".join(pieces) == value
    assert all(type(p) is Encoded and p.charset == charset for p in pieces)
    assert all(p.startswith(character) for p in pieces[1:])  # none cut inside a character
