"""A replayed DDL tried on a temporary table beside its target table, and the two tables'
shapes compared: how Load (:func:`node.target.mysql.ddlapply._check_alike`) tells whether a
table, column or index already on the target is what the statement makes of it.
"""

from __future__ import annotations

from typing import Any

from node.changes import TargetChange
from node.ddlclauses import added_columns, alter_clauses, is_option
from node.ddlsession import run_under
from node.sqllex import Token, identifier
from node.sqllex import statement_code as code
from shared.identifiers import qualified, quote

PROBE = "_setl_probe"  # the temporary table a statement is tried on (not in the binlog)


def run_on_probe(cursor: Any, change: TargetChange, parsed: Any, table: tuple[str, str],
                 mode: int, mark: str) -> bool:
    """Run the statement on a temporary table in the target table's database instead (for
    an ALTER or CREATE INDEX, a copy of the target's table without the column or index it
    adds); False when the statement cannot be tried so."""
    if parsed is None or not parsed.names:
        return False
    probe = qualified(table[0], PROBE)
    words = code(change.ddl, mode)
    cursor.execute(f"{mark}DROP TEMPORARY TABLE IF EXISTS {probe}")
    name = parsed.names[0]
    text = change.ddl[:name.start] + probe + change.ddl[name.end:]
    if parsed.kind == "CREATE":
        at = next((word.start for word in words if word.is_word("TABLE")), None)
        if at is None:
            return False
        text = _without_foreign_keys(text[:at] + "TEMPORARY " + text[at:], mode)
        run_under(cursor, change.session, mark + text)
        return True
    there = _drop_clauses(words, parsed.kind)
    if not there:
        return False
    cursor.execute(f"{mark}CREATE TEMPORARY TABLE {probe} LIKE {qualified(*table)}")
    cursor.execute(f"{mark}ALTER TABLE {probe} " + ", ".join(there))
    run_under(cursor, change.session, mark + text)
    return True


def _drop_clauses(words: list[Token], kind: str) -> list[str]:
    """What an ADD COLUMN, ADD INDEX or CREATE INDEX of one clause adds, as DROP clauses
    (none when it adds something else, or names none)."""
    if kind == "INDEX":
        at = next((i + 1 for i, word in enumerate(words) if word.is_word("INDEX")), len(words))
        name = _index_name(words[at:])
        return [f"DROP INDEX {quote(name)}"] if name else []
    clause = [part for part in alter_clauses(words) or [] if not is_option(part)]
    if len(clause) != 1:
        return []
    columns = added_columns(clause[0])
    if columns:
        return [f"DROP COLUMN {quote(identifier(c[0]) or c[0].text)}" for c in columns]
    rest = clause[0][1:]  # ADD [CONSTRAINT [c]] [UNIQUE|…] [INDEX|KEY] name
    if rest and rest[0].is_word("CONSTRAINT"):
        rest = rest[1:] if rest[1:2] and rest[1].is_word(*_KEY_WORDS) else rest[2:]
    while rest and rest[0].is_word(*_KEY_WORDS):
        rest = rest[1:]
    name = _index_name(rest)
    return [f"DROP INDEX {quote(name)}"] if name else []


def _without_foreign_keys(text: str, mode: int) -> str:
    """A CREATE TABLE's text without its FOREIGN KEY clauses (a temporary table takes none,
    and they decide no column's shape); as it was when the first item is one."""
    words = code(text, mode)
    at = next((i for i, word in enumerate(words) if word.text == "("), len(words))
    items: list[tuple[Token | None, list[Token]]] = [(None, [])]
    depth = 0
    for word in words[at + 1:]:
        if word.text == ")" and depth == 0:
            break
        depth += (word.text == "(") - (word.text == ")")
        if word.text == "," and depth == 0:
            items.append((word, []))
        else:
            items[-1][1].append(word)
    spans = [(comma.start, item[-1].end) for comma, item in items if comma and item and (
        item[0].is_word("FOREIGN") or (item[0].is_word("CONSTRAINT") and any(
            word.is_word("FOREIGN") for word in item[1:3])))]
    for start, end in reversed(spans):
        text = text[:start] + text[end:]
    return text


_KEY_WORDS = ("UNIQUE", "FULLTEXT", "SPATIAL", "INDEX", "KEY", "VECTOR")


def _index_name(rest: list[Token]) -> str | None:
    """The index name at the head of ``rest`` (after ``IF NOT EXISTS``)."""
    if len(rest) > 2 and rest[0].is_word("IF") and rest[1].is_word("NOT"):
        rest = rest[3:]
    if not rest or rest[0].is_word("USING", "ON") or rest[0].text == "(":
        return None
    return identifier(rest[0])


def shape(cursor: Any, table: str) -> dict[str, Any]:
    """What of a table decides the rows it holds: its columns' type, collation, NULL,
    default and extra (generated, auto_increment), its unique keys' columns."""
    cursor.execute(f"SHOW FULL COLUMNS FROM {table}")
    columns = {str(row[0]).lower(): (row[1], row[2], row[3], row[5], row[6])
               for row in cursor.fetchall()}
    cursor.execute(f"SHOW INDEX FROM {table}")
    keys: dict[str, list[tuple[str, Any]]] = {}
    for row in cursor.fetchall():  # Table, Non_unique, Key_name, Seq, Column, …, Sub_part
        if not int(row[1]):
            keys.setdefault(str(row[2]), []).append((str(row[4]).lower(), row[7]))
    return {"columns": columns, "keys": sorted(tuple(key) for key in keys.values())}


def differences(there: dict[str, Any], made: dict[str, Any], whole: bool = True) -> str:
    """How the target's table differs from the one the statement makes ('' alike). Not
    ``whole`` (a CREATE TABLE): what the statement makes only, for a target further along
    (its copy made from the source's table as it is now) holds later columns and keys too,
    whose own statements are checked when they come."""
    found = []
    names = set(there["columns"]) | set(made["columns"]) if whole else set(made["columns"])
    for name in sorted(names):
        have, want = there["columns"].get(name), made["columns"].get(name)
        if have != want:
            found.append(f"column {name} is {_column(have)} there, {_column(want)} by it")
    if there["keys"] != made["keys"] if whole else not set(made["keys"]) <= set(there["keys"]):
        found.append(f"unique keys {_keys(there['keys'])} there, {_keys(made['keys'])} by it")
    return "; ".join(found)


def _column(spec: tuple[Any, ...] | None) -> str:
    if spec is None:
        return "missing"
    kind, collation, null, default, extra = spec
    return " ".join(str(part) for part in (
        kind, collation and f"COLLATE {collation}", "NULL" if null == "YES" else "NOT NULL",
        default is not None and f"DEFAULT {default}", extra) if part)


def _keys(keys: list[tuple[tuple[str, Any], ...]]) -> str:
    return "[" + ", ".join("(" + ", ".join(c if p is None else f"{c}({p})" for c, p in key)
                           + ")" for key in keys) + "]" if keys else "none"
