"""The SQL lexer under DDL sync: every byte accounted for, strings and comments told apart."""

from __future__ import annotations

import pytest

from node.sqllex import COMMENT, MARK, NAME, STRING, code, identifier, tokens

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
