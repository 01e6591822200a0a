"""The SQL lexer under DDL sync: every byte accounted for, strings and comments told apart."""

from __future__ import annotations

import pytest

from node import sqllex
from node.sqllex import (
    ANSI_QUOTES,
    COMMENT,
    MARK,
    NAME,
    NO_BACKSLASH_ESCAPES,
    STRING,
    code,
    identifier,
    tokens,
)

TEXTS = [
    "CREATE TABLE t (a VARCHAR(9) DEFAULT '#1 # two', b INT COMMENT 'x /* y */')",
    "ALTER TABLE `we``ird`.`a.b` ADD c INT -- trailing\n, ADD d INT # hash",
    "/*!40101 CREATE TABLE*/ /*M!100100 IF NOT EXISTS */ t (id INT) /* plain */",
    "SELECT 'it''s', 'a\\'b', \"dq\"\"x\", 2*/3, a--b, 1 -- c",
    "CREATE TABLE 表 (naïve INT, `dbz5743中文` INT)",
]


@pytest.mark.parametrize("text", TEXTS)
def test_the_tokens_give_the_text_back(text: str) -> None:
    assert "".join(token.text for token in tokens(text)) == text


def test_strings_comments_and_executable_comments_are_told_apart() -> None:
    kinds = [(t.kind, t.text) for t in tokens(TEXTS[0]) if t.kind in (STRING, COMMENT)]
    assert kinds == [(STRING, "'#1 # two'"), (STRING, "'x /* y */'")]
    found = tokens(TEXTS[2])
    assert [t.text for t in found if t.kind == MARK] == ["/*!40101", "*/", "/*M!100100", "*/"]
    assert [t.text for t in found if t.kind == COMMENT] == ["/* plain */"]
    assert [t.text for t in code(TEXTS[2])][:5] == ["CREATE", "TABLE", "IF", "NOT", "EXISTS"]


def test_double_dash_is_a_comment_only_before_a_space() -> None:
    assert [t.text for t in code("a--b, 1 -- c")] == ["a", "-", "-", "b", ",", "1"]


def test_quoted_names_unquote() -> None:
    (name,) = [t for t in tokens(TEXTS[1]) if t.kind == NAME][:1]
    assert identifier(name) == "we`ird"


def test_a_session_sql_mode_changes_what_quotes_and_backslashes_mean() -> None:
    text = 'CREATE TABLE s."a ""b" (c INT DEFAULT \'x\\\' y\') -- \'\n'
    assert [(t.kind, t.text) for t in code(text)][4] == (STRING, '"a ""b"')
    ansi = code(text, ANSI_QUOTES)
    assert ansi[4].kind == NAME and identifier(ansi[4]) == 'a "b'
    assert [t.text for t in ansi if t.kind == STRING] == ["'x\\' y'"]
    # without backslash escapes the string ends at the backslash's quote
    plain = code(text, ANSI_QUOTES | NO_BACKSLASH_ESCAPES)
    assert [t.text for t in plain if t.kind == STRING] == ["'x\\'", "') -- '"]
    for mode in (0, ANSI_QUOTES, NO_BACKSLASH_ESCAPES, ANSI_QUOTES | NO_BACKSLASH_ESCAPES):
        assert "".join(t.text for t in tokens(text, mode)) == text


def test_a_ddl_is_parsed_as_its_session_reads_it() -> None:
    from node.ddl import parse

    statement = 'CREATE TABLE "odd name" ("a" INT)'
    assert parse(statement, "db") is None  # a string where a name must be
    parsed = parse(statement, "db", ANSI_QUOTES)
    assert parsed is not None and parsed.names[0].pair == ("db", "odd name")


def test_session_codecs_read_the_bytes_the_server_stored() -> None:
    from node.ddlsession import codec, sql_mode

    assert b"\xe9\x81".decode(codec("latin1")) == "\u00e9\u0081"  # MariaDB's latin1
    assert "é".encode(codec("utf8mb3")) == b"\xc3\xa9"
    with pytest.raises(LookupError):
        codec("no-such-charset")
    assert sql_mode((("sql_mode", ANSI_QUOTES), ("time_zone", "+09:00"))) == ANSI_QUOTES
    assert sql_mode(()) == 0


@pytest.mark.parametrize("where, problem", [
    ("id > 5 AND name LIKE 'a%'", None),
    ("(a = 1 OR b IN (1, 2)) AND `select` = 'SELECT; --'", None),
    ("id IN (SELECT id FROM mysql.user)", "cannot use SELECT"),
    ("id = 1; DROP TABLE t", "cannot hold ';'"),
    ("id = 1 /* x */", "cannot hold a comment"),
    ("id = 1 -- x", "cannot hold a comment"),
    ("IF(SLEEP(5), 1, 1)", "cannot use SLEEP"),
    ("LOAD_FILE('/etc/passwd') IS NOT NULL", "cannot use LOAD_FILE"),
    ("@x := 1", "cannot use variables"),
    ("(id = 1", "'(' without its ')'"),
    ("id = 1)", "')' without its '('"),
    # one string with backslash escapes, a condition under NO_BACKSLASH_ESCAPES
    ("id = '\\' OR SLEEP(5) OR '\\'", "cannot use SLEEP"),
    ("id = '\\' OR (SELECT COUNT(*) FROM mysql.user) > 0 OR '\\'", "cannot use SELECT"),
    ("name = 'C:\\\\' AND note = 'it''s'", None),
])
def test_a_row_condition_holds_nothing_but_a_condition(where: str, problem: str | None) -> None:
    found = sqllex.condition_problem(where)
    assert (found is None) if problem is None else (found is not None and problem in found)
