"""Text of a charset setl keeps as its bytes (sjis, big5, greek, swe7, …) written into a
target column of another charset: the server converts it (an introducer names the source's
charset), never takes the source's bytes for the target's."""

from __future__ import annotations

import pickle
from typing import Any

from node.changes import ChangeType, TargetChange
from node.charsets import Encoded
from node.extract import decodetypes
from node.extract.decode import ColumnSpec
from node.extract.lookup import Lookup
from node.extract.reads import ReadColumn, mend
from node.merge import merge
from node.target.mysql import loaddata
from node.target.mysql.render import Column, statements
from node.target.mysql.sqltext import literal, texts
from shared.model import DataSource

SJIS = Encoded(b"\xc2\xb1", "sjis")  # half-width katakana 'ﾂｱ'; as UTF-8 bytes, '±'


def change(kind: ChangeType, before: dict[str, Any] | None, after: dict[str, Any] | None,
           seq: int, keys: tuple[str, ...] = ()) -> TargetChange:
    key = tuple((before or {})[k] for k in keys) if before and keys else None
    return TargetChange("t", "s", "names", kind, keys, key, after, seq=seq, before=before)


def test_decoded_text_of_a_charset_kept_as_bytes_names_its_charset() -> None:
    ns: dict[str, Any] = {}
    for charset, named in (("sjis", "sjis"), ("koi8_u", "koi8u"), ("swe7", "swe7")):
        column = ColumnSpec("c", decodetypes.VARCHAR, charset=charset, max_length=10)
        value = eval(decodetypes.text_value(column, "raw", ns), {**ns, "raw": b"\xc2\xb1"})
        assert type(value) is Encoded and value == b"\xc2\xb1" and value.charset == named
        assert eval(decodetypes.text_value(column, "raw", ns), {**ns, "raw": b""}) == ""
    column = ColumnSpec("c", decodetypes.VARCHAR, charset="utf8", max_length=10)
    assert type(eval(decodetypes.text_value(column, "raw", ns), {"raw": b"ab"})) is str
    column = ColumnSpec("c", decodetypes.VARCHAR, charset="binary", max_length=10)
    assert type(eval(decodetypes.text_value(column, "raw", ns), {"raw": b"ab"})) is bytes


def test_it_travels_pickled_with_its_charset() -> None:
    again = pickle.loads(pickle.dumps({"c": SJIS}))["c"]
    assert type(again) is Encoded and again == SJIS and again.charset == "sjis"
    assert SJIS == b"\xc2\xb1" and hash(SJIS) == hash(b"\xc2\xb1")  # one key to a merge


def test_a_read_row_names_its_charset_as_the_decoder_does() -> None:
    columns = [ReadColumn("c", "varchar", "varchar(10)", "sjis"),
               ReadColumn("b", "varbinary", "varbinary(10)")]
    [(text, raw)] = mend(columns, [(b"\xc2\xb1", b"\xc2\xb1")])
    assert type(text) is Encoded and text.charset == "sjis"
    assert type(raw) is bytes  # a binary column's bytes are no text


def test_an_upsert_writes_it_with_its_charset_as_an_introducer() -> None:
    """The server converts `_sjis X'c2b1'` into a utf8mb4 column as EFBE82EFBDB1; a bare
    X'c2b1' it stored as C2B1 ('±'), and into latin1 any sjis text as other characters."""
    assert literal(SJIS) == "_sjis X'c2b1'"
    assert literal(b"\xc2\xb1") == "X'c2b1'"  # binary values: bytes, as before
    row = {"id": 1, "c": SJIS, "b": b"\x01"}
    (table,) = merge([change(ChangeType.INSERT, None, row, 0, ("id",))])
    columns = {"id": Column("int", None), "c": Column("varchar", "utf8mb4"),
               "b": Column("varbinary", None)}
    [sql] = [sql for statement in statements(table, 100, columns)
             for sql in texts(statement)]
    assert "VALUES (1, _sjis X'c2b1', X'01')" in sql.text


def test_a_keyless_match_compares_it_converted_into_the_target_columns_charset() -> None:
    columns = {"c": Column("varchar", "utf8mb4"), "b": Column("varbinary", None)}
    row = {"c": SJIS, "b": b"\x01"}
    (table,) = merge([change(ChangeType.INSERT, None, row, 0),
                      change(ChangeType.DELETE, row, None, 1)])
    delete = list(statements(table, 100, columns))[-1]
    assert delete.sql == ("DELETE FROM `s`.`names` WHERE CAST(`c` AS BINARY) = CAST(CONVERT("
                          "%s USING utf8mb4) AS BINARY) AND CAST(`b` AS BINARY) = %s LIMIT 1")
    assert "CONVERT(_sjis X'c2b1' USING utf8mb4)" in texts(delete)[0].text


def test_load_data_leaves_it_to_inserts_where_the_target_column_has_a_charset() -> None:
    """LOAD DATA writes fields as the target's bytes (CHARACTER SET binary): sjis bytes into
    a utf8mb4 or latin1 column would be stored unconverted. Into a binary column they are
    the bytes it holds."""
    columns = {"id": Column("int", None), "c": Column("varchar", "utf8mb4")}
    rows = [{"id": 1, "c": SJIS}, {"id": 2, "c": "plain"}]
    assert loaddata.replaces("s", "t", rows, columns, False) is None
    assert loaddata.replaces("s", "t", rows, {**columns, "c": Column("varchar", "latin1")},
                             False) is None
    [sql] = loaddata.replaces("s", "t", [{"id": 1, "c": SJIS}],
                              {**columns, "c": Column("varbinary", None)}, False) or []
    assert sql.data == b"1\t\xc2\xb1\n"


class _Cursor:
    """A source that holds one row, keyed ('日本', 1) in a utf8mb4 column, and finds it for
    a key whose text is written with its charset (the server converts it), not for bytes."""

    def __init__(self, asked: list[tuple[str, list[Any]]]) -> None:
        self.asked = asked

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str, args: list[Any]) -> None:
        self.asked.append((sql, args))

    def fetchall(self) -> list[dict[str, Any]]:
        sql, args = self.asked[-1]
        found = "_sjis X'93fa967b'" in sql and not any(type(a) is Encoded for a in args)
        return [{"k": "日本", "n": 1, "v": "x", "setl asked": "1"}] if found else []


class _Connection:
    def __init__(self) -> None:
        self.asked: list[tuple[str, list[Any]]] = []

    def cursor(self, *kind: object) -> _Cursor:
        return _Cursor(self.asked)


def test_a_lookup_by_composite_key_finds_its_row_by_the_key_asked() -> None:
    """A key's sjis text went as a parameter (bytes: no row of a utf8mb4 column), and the
    row found was keyed by the text read back, which the key asked never equals. Each text
    value is converted into its column's charset (MariaDB's row IN list compares it
    unconverted)."""
    lookup = Lookup(DataSource("source", "127.0.0.1", 3306, "setl"))
    lookup._conn = _Connection()  # type: ignore[assignment]
    lookup._columns[("s", "t")] = (ReadColumn("k", "varchar", "varchar(10)", "utf8mb4"),
                                   ReadColumn("n", "int", "int"),
                                   ReadColumn("v", "varchar", "varchar(10)", "utf8mb4"))
    key = (Encoded(b"\x93\xfa\x96\x7b", "sjis"), 1)
    found = lookup.rows("s", "t", ("k", "n"), [(b"\x01", 2), key])
    assert found == {key: {"k": "日本", "n": 1, "v": "x"}}
    [(sql, args)] = lookup._conn.asked  # type: ignore[attr-defined]
    assert lookup.queries == 1 and args == [b"\x01", 2, 1, b"\x01", 2, 1]
    assert ("WHERE (`k`, `n`) IN ((CONVERT(%s USING utf8mb4), %s), "
            "(CONVERT(_sjis X'93fa967b' USING utf8mb4), %s))") in sql
