"""Schema, table and column names as MySQL/MariaDB allow them: any character of the Unicode
BMP but U+0000, at most 64 characters, not ending with a space. Every place that puts a name
into SQL quotes it with :func:`quote`; every place that reads ``schema.table`` from a user
splits it with :func:`split_qualified`, where backticks quote a name holding a dot:
`` `my-db`.`t.1` ``, `` shop.`order items` ``.
"""

from __future__ import annotations

import functools
import re

from shared.errors import ConfigError

MAX_LENGTH = 64


def quote(name: str) -> str:
    """The name as a quoted identifier: in backticks, a backtick inside doubled."""
    return "`" + name.replace("`", "``") + "`"


def qualified(schema: str, table: str) -> str:
    return f"{quote(schema)}.{quote(table)}"


# a quoted name, a string literal (backslash escapes, doubled quotes) or anything else
_PARTS = re.compile(r"(`(?:[^`]|``)*`)|('(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\")"
                    r"|([^`'\"]+|.)", re.S)


@functools.lru_cache(maxsize=512)
def template(sql: str) -> str:
    """``sql`` as a ``%``-format template (PyMySQL's parameters) whose quoted names mean
    what they say: a ``%`` inside a name doubled, so `` `t%%x` `` still names ``t%%x`` and
    `` `100%` `` formats at all. Placeholders and ``%%`` outside names stay as written. The
    one step between a statement with names and the formatting of its parameters: every
    connection's cursor (shared.endpoint) and Load's statement texts take it.

    Remembered for the last 512 texts: a pipeline renders the same few statements of each
    table for every batch, and scanning their names was a third of rendering a caught-up
    batch (``tests/unit/test_identifiers.py`` checks the cached answer is the scan's)."""
    if "%" not in sql or "`" not in sql:
        return sql
    return _PARTS.sub(lambda m: m.group().replace("%", "%%") if m.group(1) else m.group(), sql)


def condition(where: str) -> str:
    """A condition a user wrote, to put into a template: its ``%`` (``LIKE 'a%'``) doubled
    outside quoted names (:func:`template` doubles those when the statement runs)."""
    return _PARTS.sub(lambda m: m.group() if m.group(1) else m.group().replace("%", "%%"),
                      where)


def is_quoted(text: str) -> bool:
    """Whether ``text`` is one whole backtick-quoted identifier (`` `a``b` ``)."""
    if len(text) < 2 or text[0] != "`" or text[-1] != "`":
        return False
    inner = text[1:-1]
    return "`" not in inner.replace("``", "")


def unquote(text: str) -> str:
    """The name a (possibly backtick-quoted) identifier stands for."""
    return text[1:-1].replace("``", "`") if is_quoted(text) else text


def problem(name: str) -> str | None:
    """Why ``name`` cannot be a schema, table or column name, or None."""
    if not name:
        return "a name cannot be empty"
    if len(name) > MAX_LENGTH:
        return f"{name!r} is longer than {MAX_LENGTH} characters"
    if "\x00" in name:
        return f"{name!r} holds the character U+0000, which no name may hold"
    if any(ord(char) > 0xFFFF for char in name):
        return f"{name!r} holds a character outside the Unicode BMP, which no name may hold"
    if name.endswith(" "):
        return f"{name!r} ends with a space, which no name may do"
    return None


def split_qualified(text: str) -> tuple[str, str]:
    """``schema.table`` split at its one dot outside backticks; each part as written (still
    quoted if it was). Raise ConfigError when there is not exactly one such dot."""
    parts, current, quoted, index = [], [], False, 0
    while index < len(text):
        char = text[index]
        if char == "`":
            if quoted and text[index + 1:index + 2] == "`":
                current.append("``")
                index += 2
                continue
            quoted = not quoted
        if char == "." and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    if quoted or len(parts) != 2 or not all(parts):
        raise ConfigError(
            f"expected schema.table, got \"{text}\"; a name that holds a dot goes in "
            "backticks, e.g. `my-db`.`t.1` (for a regular expression write "
            "{namespace: ..., table: 're:...'})")
    return parts[0], parts[1]


def short_form(schema: str, table: str) -> str:
    """``schema.table`` as :func:`split_qualified` reads it back: a part is quoted only when
    it needs to be."""
    def part(name: str) -> str:
        return quote(name) if any(c in name for c in ".`[]{}") or name.startswith("re:") \
            else name
    return f"{part(schema)}.{part(table)}"


# capitals whose lower case MariaDB and MySQL (utf8mb3_general_ci, which folds table names)
# give as Python does: ASCII, Latin-1, Latin Extended-A (not İ), Greek and Cyrillic
_SURE_CAPITALS = ((0x41, 0x5A), (0xC0, 0xDE), (0x100, 0x12F), (0x131, 0x17F), (0x386, 0x3AB),
                  (0x400, 0x42F))


def lowered(name: str) -> str:
    """A name lower-cased letter by letter, as the server compares names without case
    (``lower_case_table_names`` 2): no final sigma, so 'ΤΑΣ' is 'τασ' as 'τασ' is."""
    if name.isascii():
        return name.lower()
    return "".join(letter if len(low := letter.lower()) != 1 else low for letter in name)


def folded(name: str) -> str:
    """A name as a server with ``lower_case_table_names = 1`` stores it (its table maps,
    information_schema), from a name as a statement typed it. A capital whose lower case
    the server may give otherwise than Python ('İ', one of a newer Unicode) is refused:
    guessed, a DDL of the table would be taken for one of another table, or none."""
    if name.isascii():
        return name.lower()
    for letter in name:
        if letter.lower() != letter and not any(
                low <= ord(letter) <= high for low, high in _SURE_CAPITALS
                if ord(letter) != 0x130):
            raise ConfigError(
                f"the name {name!r} holds {letter!r} (U+{ord(letter):04X}), whose lower case "
                "the source server (lower_case_table_names=1) may store otherwise than setl "
                "would fold it, so setl cannot tell which table the name means. Write the "
                "name in lower case as the server stores it (information_schema.TABLES "
                "shows it); for a statement already in the binlog, run it on the target by "
                "hand and move the pipeline past it (setl position set … the next "
                "transaction's position)")
    return lowered(name)
