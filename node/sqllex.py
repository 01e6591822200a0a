"""A small SQL lexer for MySQL/MariaDB statements, enough to find names in DDL and replace
them while every other byte stays as written.

It knows strings (``'…'`` and ``"…"`` with doubled quotes and backslash escapes), quoted
names (`` `…` `` with doubled backticks, and ``"…"`` under ``ANSI_QUOTES``), the source
session's ``NO_BACKSLASH_ESCAPES``, comments (``-- `` and ``#`` to the end of the line,
``/* … */``) and executable comments (``/*! … */``, ``/*!100100 … */``, ``/*M!… */``), whose
content the server runs: their markers are tokens of their own and what is inside is lexed
as code. Tokens carry their place in the text, so a caller rebuilds the statement by
replacing spans.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

WORD, NAME, STRING, SYMBOL, SPACE, COMMENT, MARK = (
    "word", "name", "string", "symbol", "space", "comment", "mark")
TRIVIA = (SPACE, COMMENT, MARK)

ANSI_QUOTES, NO_BACKSLASH_ESCAPES = 1 << 2, 1 << 20  # sql_mode bits (MariaDB and MySQL)
_PATTERN = r"""
    (?P<space>\s+)
  | (?P<mark>/\*M?!\d*|\*/)
  | (?P<comment>/\*.*?\*/|\#[^\n]*|--(?:[ \t\r\n\f][^\n]*)?(?=\n|$))
  | (?P<name>`(?:[^`]|``)*`DOUBLE_NAME)
  | (?P<string>'(?:[^'BACKSLASH]|BACKSLASH_ESCAPE'')*'DOUBLE_STRING)
  | (?P<word>[0-9A-Za-z_$\u0080-\uffff]+)
  | (?P<symbol>.)
"""


@functools.cache
def _token_pattern(sql_mode: int) -> re.Pattern[str]:
    """The token pattern under a session's sql_mode (its quoting bits; the rest do not
    change how a statement splits into tokens)."""
    escape = not sql_mode & NO_BACKSLASH_ESCAPES
    double = '"(?:[^"BACKSLASH]|BACKSLASH_ESCAPE"")*"'
    pattern = _PATTERN.replace("DOUBLE_NAME", '|"(?:[^"]|"")*"' if sql_mode & ANSI_QUOTES else "")
    pattern = pattern.replace("DOUBLE_STRING", "" if sql_mode & ANSI_QUOTES else f"|{double}")
    pattern = pattern.replace("BACKSLASH_ESCAPE", r"\\.|" if escape else "")
    pattern = pattern.replace("BACKSLASH", r"\\" if escape else "")
    return re.compile(pattern, re.S | re.X)


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int
    end: int

    def is_word(self, *words: str) -> bool:
        return self.kind == WORD and self.text.upper() in words


def tokens(text: str, sql_mode: int = 0) -> list[Token]:
    """Every token of ``text`` as a session with ``sql_mode`` reads it, trivia included
    (their texts joined give ``text`` back)."""
    found, inside = [], False  # inside an executable comment, "*/" closes it
    for match in _token_pattern(sql_mode & (ANSI_QUOTES | NO_BACKSLASH_ESCAPES)).finditer(text):
        kind = match.lastgroup or SYMBOL
        value = match.group()
        if kind == MARK and value == "*/" and not inside:
            kind = SYMBOL  # a stray "*/" (e.g. in arithmetic): not a marker
        if kind == MARK:
            inside = value != "*/"
        found.append(Token(kind, value, match.start(), match.end()))
    return found


def code(text: str, sql_mode: int = 0) -> list[Token]:
    """The tokens that mean something: no spaces, comments or executable-comment markers."""
    return [token for token in tokens(text, sql_mode) if token.kind not in TRIVIA]


def second_statement(text: str, sql_mode: int = 0) -> str:
    """What follows a ``;`` that ends ``text``'s statement ('' when nothing does): the server
    that runs it splits there (a load connection takes several statements), also inside an
    executable comment the source skipped, e.g. ``/*M!110400 ; DROP DATABASE retl */`` from
    a server older than the target."""
    found = tokens(text, sql_mode)
    for at, token in enumerate(found):
        if token.kind == SYMBOL and token.text == ";":
            rest = [t for t in found[at + 1:] if t.kind not in TRIVIA]
            if rest:
                return text[rest[0].start:].strip()
    return ""


def statement_code(text: str, sql_mode: int = 0) -> list[Token]:
    """The meaningful tokens of the statement ``text`` runs: without MariaDB's ``SET
    STATEMENT var = value, … FOR`` before it (``SET STATEMENT lock_wait_timeout = 5 FOR ALTER
    TABLE …``, how DBAs bound an online DDL's wait)."""
    words = code(text, sql_mode)
    if len(words) > 1 and words[0].is_word("SET") and words[1].is_word("STATEMENT"):
        depth = 0
        for at, token in enumerate(words):
            if token.kind == SYMBOL and token.text in "()":
                depth += 1 if token.text == "(" else -1
            elif depth == 0 and token.is_word("FOR"):
                return words[at + 1:]
    return words


# SET STATEMENT settings that only bound how long a statement may run or wait
TIME_BOUNDS = ("MAX_STATEMENT_TIME", "LOCK_WAIT_TIMEOUT", "INNODB_LOCK_WAIT_TIMEOUT")


def without_time_bounds(text: str, sql_mode: int = 0) -> str:
    """``text`` without the time bounds of a ``SET STATEMENT … FOR`` before it (the whole
    prefix when it holds nothing else); other settings there (an engine, a sql_mode) stay."""
    words = code(text, sql_mode)
    if not (len(words) > 1 and words[0].is_word("SET") and words[1].is_word("STATEMENT")):
        return text
    proper = statement_code(text, sql_mode)
    if len(proper) == len(words) or not proper:
        return text
    settings = parts(words[2:len(words) - len(proper) - 1])
    kept = [part for part in settings if part and not part[0].is_word(*TIME_BOUNDS)]
    if len(kept) == len(settings):
        return text
    rest = text[proper[0].start:]
    if not kept:
        return rest
    return ("SET STATEMENT " + ", ".join(text[part[0].start:part[-1].end] for part in kept)
            + " FOR " + rest)


def identifier(token: Token) -> str | None:
    """The name a token stands for, when it can be one."""
    if token.kind == NAME:
        quote = token.text[0]
        return token.text[1:-1].replace(quote * 2, quote)
    if token.kind == WORD:
        return token.text
    return None


def parts(words: list[Token]) -> list[list[Token]]:
    """``words`` split at their top-level commas (none inside parentheses): an ALTER
    TABLE's clauses, a list's items."""
    found: list[list[Token]] = [[]]
    depth = 0
    for token in words:
        if token.kind == SYMBOL and token.text in "()":
            depth += 1 if token.text == "(" else -1
        if token.kind == SYMBOL and token.text == "," and depth == 0:
            found.append([])
        else:
            found[-1].append(token)
    return found


# what a row condition (verify's and a snapshot's --where) may not hold: another statement,
# a query of other tables, a file, a pause or a lock, a variable
_NOT_IN_CONDITIONS = frozenset({
    "SELECT", "UNION", "INTO", "OUTFILE", "DUMPFILE", "LOAD_FILE", "SLEEP", "BENCHMARK",
    "GET_LOCK", "RELEASE_LOCK", "IS_FREE_LOCK", "IS_USED_LOCK", "MASTER_POS_WAIT",
    "MASTER_GTID_WAIT", "SET", "CALL", "EXECUTE", "PREPARE", "HANDLER", "DO", "VALUES",
    "TABLE", "WITH", "LOCK", "FOR"})


def condition_problem(where: str) -> str | None:
    """Why ``where`` is not one condition on a table's own rows, or None: no second
    statement, comment, subquery, variable, file, sleep or lock — the node runs it against
    the source with its own rights, so it must not read beyond the table's rows. It is read
    under every quoting the server's sql_mode may give it: ``'\\' OR SLEEP(5) OR '\\'`` is one
    string to a server with backslash escapes and a condition to one with
    ``NO_BACKSLASH_ESCAPES``."""
    for mode in (0, NO_BACKSLASH_ESCAPES, ANSI_QUOTES, ANSI_QUOTES | NO_BACKSLASH_ESCAPES):
        found = _condition_problem(where, mode)
        if found:
            return found
    return None


def _condition_problem(where: str, sql_mode: int) -> str | None:
    depth = 0
    for token in tokens(where, sql_mode):
        if token.kind in (COMMENT, MARK):
            return f"--where cannot hold a comment ({token.text[:20]!r})"
        if token.kind == SYMBOL:
            if token.text == ";":
                return "--where is one SQL condition; it cannot hold ';'"
            if token.text == "@":
                return "--where cannot use variables (@)"
            depth += {"(": 1, ")": -1}.get(token.text, 0)
            if depth < 0:
                return "--where has a ')' without its '('"
        if token.kind == WORD and token.text.upper() in _NOT_IN_CONDITIONS:
            return (f"--where cannot use {token.text.upper()}: it is one condition on the "
                    "table's own columns (no subquery, file, sleep, lock or statement)")
    return "--where has a '(' without its ')'" if depth else None
