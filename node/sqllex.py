"""A small SQL lexer for MySQL/MariaDB statements, enough to find names in DDL and replace
them while every other byte stays as written.

It knows strings (``'…'`` and ``"…"`` with doubled quotes and backslash escapes), quoted
names (`` `…` `` with doubled backticks), comments (``-- `` and ``#`` to the end of the line,
``/* … */``) and executable comments (``/*! … */``, ``/*!100100 … */``, ``/*M!… */``), whose
content the server runs: their markers are tokens of their own and what is inside is lexed
as code. Tokens carry their place in the text, so a caller rebuilds the statement by
replacing spans.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WORD, NAME, STRING, SYMBOL, SPACE, COMMENT, MARK = (
    "word", "name", "string", "symbol", "space", "comment", "mark")
TRIVIA = (SPACE, COMMENT, MARK)

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<mark>/\*M?!\d*|\*/)
  | (?P<comment>/\*.*?\*/|\#[^\n]*|--(?:[ \t\r\n\f][^\n]*)?(?=\n|$))
  | (?P<name>`(?:[^`]|``)*`)
  | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<word>[0-9A-Za-z_$\u0080-\uffff]+)
  | (?P<symbol>.)
""", re.S | re.X)


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int
    end: int

    def is_word(self, *words: str) -> bool:
        return self.kind == WORD and self.text.upper() in words


def tokens(text: str) -> list[Token]:
    """Every token of ``text``, trivia included (their texts joined give ``text`` back)."""
    found, inside = [], False  # inside an executable comment, "*/" closes it
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or SYMBOL
        value = match.group()
        if kind == MARK and value == "*/" and not inside:
            kind = SYMBOL  # a stray "*/" (e.g. in arithmetic): not a marker
        if kind == MARK:
            inside = value != "*/"
        found.append(Token(kind, value, match.start(), match.end()))
    return found


def code(text: str) -> list[Token]:
    """The tokens that mean something: no spaces, comments or executable-comment markers."""
    return [token for token in tokens(text) if token.kind not in TRIVIA]


def identifier(token: Token) -> str | None:
    """The name a token stands for, when it can be one."""
    if token.kind == NAME:
        return token.text[1:-1].replace("``", "`")
    if token.kind == WORD:
        return token.text
    return None
