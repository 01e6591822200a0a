"""What an ``ALTER TABLE``'s clauses do besides naming tables (:mod:`node.ddlparse` reads
the names): the columns and keys they add, the clauses that may rewrite values in place, the
columns whose values a replay would make anew. Read with the SQL lexer (:mod:`node.sqllex`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from node.ddldefaults import own_definition, unrepeatable_default
from node.ddltypes import OldType, rounds_from
from node.sqllex import SYMBOL, Token, identifier, parts
from node.sqllex import statement_code as code

# functions whose value differs on every call or by where it runs: a column added with one
# (its DEFAULT, or a generated column's expression) differs on a replay; a DEFAULT is read
# by an allow-list besides (:mod:`node.ddldefaults`)
UNREPEATABLE = ("UUID", "UUID_SHORT", "RAND", "SYS_GUID", "SYSDATE", "RANDOM_BYTES",
                "NEXTVAL", "LASTVAL", "SETVAL", "CONNECTION_ID")  # (SYSDATE: the clock
# now, not the session's timestamp a replay runs under; not USER or DATABASE, which a
# REFERENCES user (id) names as a table)
# sql_mode's STRICT_TRANS_TABLES and STRICT_ALL_TABLES bits: a value a column cannot hold
# fails the statement (else it is cut, with a warning)
STRICT_MODES = (1 << 21) | (1 << 22)
# types a MODIFY/CHANGE rounds a column's values to in place, strict sql_mode or not (with at
# most a note 1265, checked on MariaDB 10.11): a DECIMAL of a smaller scale (1.255 kept as
# 1.3), a FLOAT (a DOUBLE's digits lost), a DOUBLE (a BIGINT's or a DECIMAL's), fewer
# fractional seconds (10:00:00.7 kept as 10:00:00), a DATE (a DATETIME's time cut); FLOAT and
# DOUBLE's (M,D) fewer digits; an integer (a DECIMAL's or a DOUBLE's 1.655 kept as 2).
# Where the old type is not known (no rows of the table read before it since the node
# started: after a restart; the source's schema is already altered; nor set by an earlier
# ALTER of this run, nor read from the target's column: :mod:`node.ddlset`), a MODIFY/CHANGE
# to any of these pauses, whatever its digits: what it was made from is not known.
ROUNDING = ("DECIMAL", "DEC", "NUMERIC", "FIXED", "FLOAT", "FLOAT4", "FLOAT8", "DOUBLE",
            "REAL", "DATE", "DATETIME", "TIME", "TIMESTAMP", "TINYINT", "SMALLINT",
            "MEDIUMINT", "INT", "INTEGER", "BIGINT", "INT1", "INT2", "INT3", "INT4", "INT8",
            "MIDDLEINT", "BOOL", "BOOLEAN", "BIT", "YEAR", "SERIAL")
OPTIONS = frozenset(("ALGORITHM", "LOCK"))  # ALTER TABLE clauses that change nothing
# what may follow ADD in an ALTER TABLE clause that adds no column
NOT_COLUMNS = ("INDEX", "KEY", "UNIQUE", "PRIMARY", "CONSTRAINT", "FOREIGN", "FULLTEXT",
               "SPATIAL", "CHECK", "PARTITION", "PERIOD", "SYSTEM", "VECTOR")


def alter_clauses(words: list[Token]) -> list[list[Token]] | None:
    """The clauses of an ``ALTER TABLE`` (None: another statement)."""
    at = 1
    while at < len(words) and words[at].is_word("ONLINE", "IGNORE"):
        at += 1
    if len(words) < at + 3 or not (words[0].is_word("ALTER") and words[at].is_word("TABLE")):
        return None
    at += 1
    if words[at].is_word("IF") and len(words) > at + 2 and words[at + 1].is_word("EXISTS"):
        at += 2
    at += 1  # the table's name, schema-qualified or not
    while at + 1 < len(words) and words[at].text == "." and words[at].kind == SYMBOL:
        at += 2
    return parts(words[at:])


def is_option(part: list[Token]) -> bool:
    """Whether a clause ends as ``ALGORITHM [=] x`` or ``LOCK [=] x`` (the first clause
    begins with ``ALTER TABLE t``)."""
    if len(part) >= 3 and part[-2].text == "=":
        return part[-3].is_word(*OPTIONS)
    return len(part) >= 2 and part[-2].is_word(*OPTIONS)


def added_columns(clause: list[Token]) -> list[list[Token]]:
    """The column definitions (name first) an ALTER TABLE clause adds: ``ADD [COLUMN] [IF
    NOT EXISTS] c …`` or ``ADD [COLUMN] (c …, d …)``; none for ``ADD INDEX`` and the like."""
    if not clause or not clause[0].is_word("ADD"):
        return []
    at, column = 1, len(clause) > 1 and clause[1].is_word("COLUMN")
    at += column
    if len(clause) > at + 2 and clause[at].is_word("IF") and clause[at + 1].is_word("NOT"):
        at += 3  # IF NOT EXISTS
    rest = clause[at:]
    if not rest or (not column and rest[0].is_word(*NOT_COLUMNS)):
        return []
    if rest[0].kind == SYMBOL and rest[0].text == "(":
        return [part for part in parts(rest[1:-1]) if part]
    return [rest]


def unrepeatable_column(statement: str, sql_mode: int = 0) -> tuple[str, str] | None:
    """The first column an ``ALTER TABLE … ADD`` fills with values a replay would not make
    alike, with what: a DEFAULT that is not made only of literals, operators, column names
    and functions known to give the same value on the target
    (:func:`node.ddldefaults.unrepeatable_default`: not UUID(), RAND(), NEXTVAL(s),
    CURRENT_USER, DATABASE(), …), or any part of its definition calling one of
    :data:`UNREPEATABLE` (a generated column's); None for any other statement.
    CURRENT_TIMESTAMP is not one (a replay runs under the source's timestamp), nor
    AUTO_INCREMENT: it numbers the rows in the order of the table's clustered index, the
    same on both sides (the primary key, the first NOT NULL unique key, or for a keyless
    table the order its rows came in, which setl keeps), under the source's auto_increment
    step and offset."""
    for clause in alter_clauses(code(statement, sql_mode)) or []:
        for definition in added_columns(clause):
            name = identifier(definition[0]) or definition[0].text
            how = unrepeatable_default(definition)
            if how is not None:
                return name, how
            own = own_definition(definition)  # (REFERENCES uuid (id): a table's name)
            for at, token in enumerate(own[1:], 1):
                following = own[at + 1].text if at + 1 < len(own) else ""
                if token.is_word(*UNREPEATABLE) and following == "(":
                    return name, f"{token.text.upper()}()"
    return None


def rewriting_clause(statement: str, sql_mode: int | None,
                     old: Mapping[str, OldType] | None = None) -> str | None:
    """The first clause of an ``ALTER TABLE`` that may have rewritten the values a table
    holds in place, with no row event; as the source wrote it. In any session, a ``MODIFY``/
    ``CHANGE [COLUMN]`` to a type that rounds what it cannot hold exactly (:data:`ROUNDING`:
    a DECIMAL(10,3) made DECIMAL(10,1) keeps 1.255 as 1.3, a DATETIME(6) made DATETIME drops
    its fractional seconds, a DOUBLE made FLOAT its digits: a strict sql_mode does not fail
    them). When its session cut what the new type cannot hold (a ``sql_mode`` without
    STRICT_TRANS_TABLES or STRICT_ALL_TABLES, or ``ALTER IGNORE``: a VARCHAR(10) made
    VARCHAR(5) keeps 5 characters, 300 made TINYINT 127, a NULL made NOT NULL 0, a character
    latin1 lacks '?'), any ``MODIFY``/``CHANGE``, and a ``CONVERT TO CHARACTER SET`` other
    than utf8mb4 (which holds every character). None for any other statement, and when the
    session is unknown (``sql_mode`` None). ``old``: the table's columns' types before it, by
    lower-cased name, where known (:mod:`node.ddltypes`): a MODIFY that widens one, or
    changes its NULL-ness or default, rounds nothing in a strict session."""
    found = rewriting(statement, sql_mode, old)
    return found[0] if found is not None else None


def rewriting(statement: str, sql_mode: int | None,
              old: Mapping[str, OldType] | None = None) -> tuple[str, str] | None:
    """:func:`rewriting_clause`'s clause, and the column it modifies as named ("" for a
    CONVERT TO CHARACTER SET: every text column)."""
    if sql_mode is None:
        return None
    words = code(statement, sql_mode)
    ignore = any(word.is_word("IGNORE") for word in words[1:3])
    lax = not sql_mode & STRICT_MODES or ignore
    for clause in alter_clauses(words) or []:
        text = statement[clause[0].start:clause[-1].end] if clause else ""
        if clause and clause[0].is_word("MODIFY", "CHANGE") and not (
                len(clause) > 1 and clause[1].is_word("INDEX", "KEY")):
            for was, column in changed_columns(clause):
                if lax or _may_round(column, was, old):
                    return text, was
        if lax and len(clause) > 3 and clause[0].is_word("CONVERT") and clause[1].is_word("TO"):
            charset = clause[4] if clause[2].is_word("CHARACTER") else clause[3]
            if charset.text == "=" and len(clause) > clause.index(charset) + 1:
                charset = clause[clause.index(charset) + 1]
            name = (identifier(charset) or charset.text.strip("'\"")).lower()
            if not name.startswith("utf8mb4"):
                return text, ""
    return None


def adds_versioning(statement: str, sql_mode: int = 0) -> bool:
    """Whether a statement makes a table system-versioned: ``ALTER TABLE … ADD SYSTEM
    VERSIONING``, ``CREATE TABLE … WITH SYSTEM VERSIONING`` (a column's ``WITH SYSTEM
    VERSIONING`` too)."""
    words = code(statement, sql_mode)
    return any(word.is_word("ADD", "WITH") and words[at + 1].is_word("SYSTEM") and
               words[at + 2].is_word("VERSIONING") for at, word in enumerate(words[:-2]))


def _may_round(definition: list[Token], was: str, old: Mapping[str, OldType] | None
               ) -> bool:
    """Whether a MODIFY/CHANGE of column ``was`` to ``definition`` may round its values:
    by its old type where known, else by the new type alone (:func:`_rounds`: any number or
    time)."""
    known = old.get(was.lower()) if old else None
    return _rounds(definition) if known is None else rounds_from(definition, known)


def _rounds(definition: list[Token]) -> bool:
    """Whether a column definition (name first) has a type that may round the values it is
    given in place when the column's type before is not known (:data:`ROUNDING`: a number or
    a time of any digits; a DATETIME(6) made from a DECIMAL of 8 decimals rounds, from a
    TIMESTAMP goes through the zone)."""
    return len(definition) >= 2 and definition[1].is_word(*ROUNDING)


def added_keys(statement: str, sql_mode: int = 0) -> list[tuple[str, ...]]:
    """The columns of each unique key an ``ALTER TABLE`` or ``CREATE UNIQUE INDEX`` gives a
    table (``ADD [CONSTRAINT [c]] UNIQUE … (a, b)``, a column defined ``UNIQUE``); none for
    any other statement, nor for an ALTER that also drops a key (it may put one back as it
    was). A primary key is not one: a table map names it, so the changes logged while the
    table had one are keyed by it whatever was read since."""
    words = code(statement, sql_mode)
    if words and words[0].is_word("CREATE"):
        at = next((i for i, word in enumerate(words) if word.is_word("INDEX")), 0)
        if not any(word.is_word("UNIQUE") for word in words[1:at]):
            return []
        on = next((i for i, word in enumerate(words) if word.is_word("ON")), len(words))
        columns = _key_columns(words[on:])
        return [columns] if columns else []
    clauses = alter_clauses(words) or []
    if any(len(clause) > 1 and clause[0].is_word("DROP") and
           clause[1].is_word("PRIMARY", "INDEX", "KEY") for clause in clauses):
        return []
    found = []
    for clause in clauses:
        for definition in [*added_columns(clause),
                           *(column for _, column in changed_columns(clause))]:
            if any(word.is_word("UNIQUE") for word in definition[1:]):
                found.append(((identifier(definition[0]) or definition[0].text).lower(),))
        if len(clause) > 1 and not added_columns(clause) and clause[0].is_word("ADD") and any(
                word.is_word("UNIQUE") for word in clause[1:4]):
            columns = _key_columns(clause)
            if columns:
                found.append(columns)
    return found


def changed_columns(clause: list[Token]) -> list[tuple[str, list[Token]]]:
    """The old name and new column definition of a ``MODIFY [COLUMN] c …`` or ``CHANGE
    [COLUMN] old c …``."""
    if not clause or not clause[0].is_word("MODIFY", "CHANGE"):
        return []
    at = 1 + (len(clause) > 1 and clause[1].is_word("COLUMN"))
    if len(clause) > at + 2 and clause[at].is_word("IF") and clause[at + 1].is_word("EXISTS"):
        at += 2
    if len(clause) <= at:
        return []
    was = identifier(clause[at]) or clause[at].text
    at += clause[0].is_word("CHANGE")  # the old name
    return [(was, clause[at:])] if len(clause) > at else []


def _key_columns(words: list[Token]) -> tuple[str, ...]:
    """The column names of the first parenthesized list in ``words`` (a key's)."""
    return tuple((identifier(part[0]) or part[0].text).lower() for part in _key_parts(words))


def _key_parts(words: list[Token]) -> list[list[Token]]:
    """The parts of the first parenthesized list in ``words`` (a key's)."""
    start = next((i for i, word in enumerate(words) if word.text == "("), None)
    if start is None:
        return []
    depth, end = 0, len(words)
    for at in range(start, len(words)):
        depth += (words[at].text == "(") - (words[at].text == ")")
        if depth == 0:
            end = at
            break
    return [part for part in parts(words[start + 1:end]) if part]


def _part_names(key: list[list[Token]]) -> tuple[str, ...]:
    """The column names among a key's parts, as named: a part that is an expression (a
    functional index's ``(lower(name))``) names none."""
    return tuple(name for part in key if (name := identifier(part[0])) is not None)


@dataclass(frozen=True)
class Named:
    """A clause of an ``ALTER TABLE`` (or a ``CREATE INDEX``) and the columns it names."""

    clause: str  # as the source wrote it
    verb: str  # ADD, DROP, MODIFY, CHANGE, RENAME, ALTER, KEY (an index's), CONVERT
    columns: tuple[str, ...]  # as named (a CHANGE's and a RENAME COLUMN's both names); a
    # key's parts that are expressions (a functional index's ``(lower(name))``) name none
    keys: bool = False  # adds or drops a primary or unique key
    # a MODIFY/CHANGE that may rewrite the values a column holds in place, as
    # :func:`rewriting_clause` judges it: a type that rounds them, or any in a session that
    # cuts what the new type cannot hold (or whose sql_mode is not known)
    rewrites: bool = False

    @property
    def renames(self) -> bool:
        """Whether it gives a column another name (MySQL's column names ignore case)."""
        return self.verb in ("CHANGE", "RENAME") and \
            len({column.lower() for column in self.columns}) > 1


def named_columns(statement: str, sql_mode: int | None = 0,
                  old: Mapping[str, OldType] | None = None) -> list[Named]:
    """The clauses of an ``ALTER TABLE`` or ``CREATE INDEX`` that name or change columns
    (none for any other statement): a column added, dropped, modified, changed, renamed or
    altered, the columns of a key added (its parts that are column names), a ``CONVERT TO
    CHARACTER SET`` (every text column's type, none named). A ``DROP INDEX``/``KEY`` is not
    one (which key it drops is not read); a ``DROP PRIMARY KEY`` is one, naming no column.
    ``sql_mode`` (None: not known) and ``old`` (as for :func:`rewriting_clause`) tell which
    MODIFY/CHANGE clauses may rewrite values in place (:attr:`Named.rewrites`)."""
    words = code(statement, sql_mode or 0)
    if words and words[0].is_word("CREATE"):
        at = next((i for i, word in enumerate(words) if word.is_word("INDEX")), 0)
        on = next((i for i, word in enumerate(words) if word.is_word("ON")), len(words))
        unique = any(word.is_word("UNIQUE") for word in words[1:at])
        parts_ = _key_parts(words[on:])
        return [Named(statement.strip(), "KEY", _part_names(parts_), unique)] \
            if at and parts_ else []
    ignore = any(word.is_word("IGNORE") for word in words[1:3])
    lax = sql_mode is None or not sql_mode & STRICT_MODES or ignore
    found = []
    for clause in alter_clauses(words) or []:
        named = _named(clause)
        if named is not None:
            verb, columns, keys = named
            rewrites = verb in ("MODIFY", "CHANGE") and (lax or any(
                _may_round(column, was, old) for was, column in changed_columns(clause)))
            found.append(Named(statement[clause[0].start:clause[-1].end], verb,
                               tuple(columns), keys, rewrites))
    return found


def _named(clause: list[Token]) -> tuple[str, list[str], bool] | None:
    """What one ALTER TABLE clause does to columns: (verb, the columns named, whether it
    adds or drops a primary or unique key); None for a clause that names none."""
    if not clause:
        return None
    verb = clause[0].text.upper() if clause[0].is_word(
        "ADD", "DROP", "MODIFY", "CHANGE", "RENAME", "ALTER", "CONVERT") else ""
    second = clause[1] if len(clause) > 1 else None
    if verb == "ADD":
        added = added_columns(clause)
        if added:
            return verb, [_name(column[0]) for column in added], any(
                word.is_word("UNIQUE", "PRIMARY") for column in added for word in column[1:])
        if any(word.is_word("CHECK", "PARTITION", "PERIOD", "SYSTEM") for word in clause[1:4]):
            return None
        key = _key_parts(clause)
        return ("KEY", list(_part_names(key)), any(word.is_word("UNIQUE", "PRIMARY")
                                                   for word in clause[1:4])) if key else None
    if verb in ("MODIFY", "CHANGE") and not (second and second.is_word("INDEX", "KEY")):
        return verb, [name for was, column in changed_columns(clause)
                      for name in dict.fromkeys((was, _name(column[0])))], any(
            word.is_word("UNIQUE", "PRIMARY") for _, column in changed_columns(clause)
            for word in column[1:])
    if verb == "CONVERT" and second is not None and second.is_word("TO"):
        return verb, [], False
    if second is None or verb not in ("DROP", "RENAME", "ALTER"):
        return None
    if verb == "DROP" and second.is_word("PRIMARY"):
        return verb, [], True
    at = 1 + second.is_word("COLUMN")
    if verb == "DROP" and len(clause) > at + 1 and clause[at].is_word("IF") and \
            clause[at + 1].is_word("EXISTS"):
        at += 2
    if len(clause) <= at or (at == 1 and second.is_word(
            "INDEX", "KEY", "FOREIGN", "CONSTRAINT", "PARTITION", "CHECK", "PERIOD", "SYSTEM",
            "TO", "AS", "PRIMARY", "UNIQUE", "FULLTEXT", "SPATIAL")):
        return None
    if verb == "RENAME" and at == 1:
        return None  # RENAME [TO|AS] t: the table's
    names = [_name(clause[at])]
    if verb == "RENAME" and len(clause) > at + 2 and clause[at + 1].is_word("TO"):
        names.append(_name(clause[at + 2]))
    return verb, names, False


def _name(token: Token) -> str:
    return identifier(token) or token.text
