"""The types an ``ALTER TABLE`` gives columns, and a target column's type, as an
:class:`~node.ddltypes.OldType`: what a later ``MODIFY``/``CHANGE`` of the column is judged by
(:func:`node.ddlclauses.rewriting_clause`) where no table map since the node started told
the column's type before it (:mod:`node.select.lastmaps` asks).

- A ``MODIFY``/``CHANGE``/``ADD`` sets the column's type: a second MODIFY with no row event
  between is judged by the type the first one gave it. A ``DROP``/``RENAME COLUMN`` (and a
  CHANGE's old name) leaves it not known; a table renamed, or any other statement, the whole
  table.
- Else, with ``ddl_sync`` off, the target's column (``information_schema.COLUMNS``, as
  :class:`node.target.mysql.facts.TargetFacts` reads it): the statement is not replayed, so
  the target's values stay what its column holds. Where the source's values are the
  target's (what replication keeps), they are values of the target's type, so a new type
  that holds every value of the target's holds the source's too: the source's MODIFY left
  them as they were, and the target, which keeps its own, still has the same. A new type
  that may round a value of the target's type pauses (DECIMAL(10,3) to INT, DATETIME(6) to
  DATETIME, FLOAT to DECIMAL), as does one the target's type is not known for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from node.ddlclauses import added_columns, alter_clauses, changed_columns
from node.ddldefaults import own_definition
from node.ddltypes import OldType, type_numbers
from node.sqllex import SYMBOL, WORD, Token, code, identifier
from shared.errors import SetlError

# integer types by their bits (a table map's integer: TINY, SHORT, INT24, LONG, LONGLONG)
INTEGER_BITS = {"TINYINT": 8, "INT1": 8, "BOOL": 8, "BOOLEAN": 8, "SMALLINT": 16, "INT2": 16,
                "MEDIUMINT": 24, "MIDDLEINT": 24, "INT3": 24, "INT": 32, "INTEGER": 32,
                "INT4": 32, "BIGINT": 64, "INT8": 64, "SERIAL": 64}
DECIMALS = ("DECIMAL", "DEC", "NUMERIC", "FIXED")
TIMES = ("DATETIME", "TIMESTAMP", "TIME")
# a table map's kinds of a type, as :func:`node.ddltypes.old_type` gives them
Types = dict[str, OldType | None]  # by lower-cased column name; None: not known


def defined_type(definition: list[Token]) -> OldType:
    """The type a column definition (name first, then its type: ``c DECIMAL(10,3) NOT
    NULL``) gives the column, as its table map would tell it (``other``: a type no MODIFY
    rounds from by its digits: text, BIT, YEAR, ENUM, …)."""
    if len(definition) < 2 or definition[1].kind != WORD:
        return OldType("other")
    word = definition[1].text.upper()
    numbers = type_numbers(definition[2:])
    if word in INTEGER_BITS:
        return OldType("int", INTEGER_BITS[word])
    if word in DECIMALS:
        return OldType("decimal", numbers[0] if numbers else 10,
                       numbers[1] if len(numbers) > 1 else 0)
    if word in ("FLOAT", "FLOAT4"):  # FLOAT(p) of more than 24 bits is a DOUBLE
        return OldType("double" if len(numbers) == 1 and numbers[0] > 24 else "float")
    if word in ("DOUBLE", "FLOAT8", "REAL"):
        return OldType("double")
    if word == "DATE":
        return OldType("date")
    if word in TIMES:
        return OldType(word.lower(), 0, numbers[0] if numbers else 0)
    return OldType("other")


def column_type(text: str) -> OldType:
    """A column's type as ``information_schema.COLUMNS.COLUMN_TYPE`` gives it
    (``decimal(10,3)``, ``int(11) unsigned``, ``datetime(6)``)."""
    return defined_type(code(f"c {text}"))


def set_types(statement: str, sql_mode: int = 0, settled: bool = True) -> Types | None:
    """The columns an ``ALTER TABLE`` gives a type or takes one from, by lower-cased name:
    the type a ``MODIFY``/``CHANGE``/``ADD`` sets, None for a column dropped or renamed (a
    CHANGE's old name too) or named by a ``CONVERT``, or added ``IF NOT EXISTS`` (it may
    have been there, of another type). None for any other statement, and for
    an ALTER that renames the table: what the table is after it is not known.
    ``settled`` False (a two-phase ALTER's start or rollback): every column it names is not
    known (it may not have run)."""
    clauses = alter_clauses(code(statement, sql_mode))
    if clauses is None:
        return None
    found: Types = {}
    for clause in clauses:
        if clause and clause[0].is_word("RENAME") and (
                len(clause) < 3 or clause[1].is_word("TO", "AS")):
            return None  # ALTER TABLE a RENAME [TO|AS] b
        changed = changed_columns(clause)
        for was, _ in changed:
            found[was.lower()] = None
        # (ADD IF NOT EXISTS of a column there already leaves its type as it was)
        sure = settled and not (clause and clause[0].is_word("ADD") and any(
            word.is_word("EXISTS") for word in clause[1:5]))
        for definition in [*added_columns(clause), *(column for _, column in changed)]:
            found[_name(definition[0]).lower()] = defined_type(definition) if sure else None
        if not changed and clause and clause[0].is_word("DROP", "RENAME", "CONVERT"):
            found.update(dict.fromkeys(
                (_name(word).lower() for word in clause[1:]), None))  # (more is safe)
    return found


def modified(statement: str, sql_mode: int = 0) -> list[str]:
    """The lower-cased names, before it, of the columns an ``ALTER TABLE`` modifies or
    changes."""
    return [was.lower() for clause in alter_clauses(code(statement, sql_mode)) or []
            for was, _ in changed_columns(clause)]


# a target column of these kinds tells nothing of the source's: a pair may write a TIMESTAMP
# into a DATETIME and back, and a source's MODIFY between the two rewrites every row through
# its session's zone (judged by the target's type it would change nothing; a review)
ZONED = frozenset({"datetime", "timestamp"})


def target_types(compiled: Any, facts: Any, schema: str, table: str) -> dict[str, OldType]:
    """The types of a source table's columns on its target, by lower-cased source name, read
    afresh (``facts``: a :class:`node.target.mysql.facts.TargetFacts`); none where the
    target is not read here: a pair that renames, leaves out, fills, joins or processes
    columns (its target's values need not be the source's), a shard route, a table of
    several targets whose types differ (each column where all agree), a target that does
    not answer (the MODIFY then pauses as one of an unknown type), a DATETIME or TIMESTAMP
    column (:data:`ZONED`)."""
    if not compiled.wants(schema, table):
        return {}
    entries = compiled.pairs_for(*compiled.stored(schema, table))
    if not entries or any(not entry.simple or entry.renames or entry.exclude or entry.include
                          for entry in entries):
        return {}
    found: dict[str, OldType] = {}
    for number, target in enumerate(compiled.targets_of(schema, table)):
        try:
            facts.drop(target)  # (a column altered by hand since it was read)
            columns: Mapping[str, Any] = facts.of(target).columns
        except SetlError:
            return {}
        types = {name.lower(): kind for name, kind in (
            (name, column_type(getattr(column, "column_type", "") or ""))
            for name, column in columns.items()) if kind.kind not in ZONED}
        found = types if number == 0 else {
            name: kind for name, kind in found.items() if types.get(name) == kind}
    return found


def target_reader(compiled: Any, facts: Any
                  ) -> Callable[[str, str], dict[str, OldType]]:
    """:func:`target_types` of ``compiled``'s targets, as :class:`~node.select.lastmaps.
    LastMaps` asks."""
    return lambda schema, table: target_types(compiled, facts, schema, table)


# defaults an added TIMESTAMP column takes at the statement's own instant (the same in any
# zone); any other default (a literal) is a wall-clock time read in the session's zone
CLOCK_DEFAULTS = ("CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP", "NULL")


def zone_bound_clause(statement: str, sql_mode: int = 0,
                      old: Mapping[str, OldType] | None = None) -> str | None:
    """The first clause of an ``ALTER TABLE`` that made the table's rows' values anew
    through the session's time zone, each at its own date, as the source wrote it: a
    ``MODIFY``/``CHANGE`` (a column made TIMESTAMP reads its old wall-clock values in the
    zone, a TIMESTAMP made another type writes its instants in it; for a statement that
    logged its zone, MariaDB's only conversions of this kind), an ``ADD`` of a TIMESTAMP
    column whose default is a literal (every row gets that wall-clock time, read in the
    zone). None for any other statement: one that runs in the zone only at the statement's
    own instant (``ADD … DATETIME DEFAULT CURRENT_TIMESTAMP``), or makes a default only.
    ``old``: the table's column types before it, where known: a MODIFY of a column that
    neither was nor becomes a TIMESTAMP converts nothing (one clause of an ALTER that logged
    its zone for another)."""
    for clause in alter_clauses(code(statement, sql_mode)) or []:
        text = statement[clause[0].start:clause[-1].end] if clause else ""
        for was, definition in changed_columns(clause):
            known = old.get(was.lower()) if old else None
            if known is None or known.kind == "timestamp" or (
                    len(definition) > 1 and definition[1].is_word("TIMESTAMP")):
                return text
        for definition in added_columns(clause):
            if len(definition) > 1 and definition[1].is_word("TIMESTAMP") and \
                    _literal_default(definition):
                return text
    return None


def _literal_default(definition: list[Token]) -> bool:
    """Whether a column definition has a DEFAULT that is not the statement's clock (nor
    NULL); an inline REFERENCES's ``ON DELETE SET DEFAULT`` is not one."""
    definition = own_definition(definition)
    at = next((i for i, word in enumerate(definition) if word.is_word("DEFAULT")), None)
    if at is None or at + 1 >= len(definition):
        return False
    value = definition[at + 1]
    if value.kind == SYMBOL and value.text == "(" and at + 2 < len(definition):
        value = definition[at + 2]  # DEFAULT (CURRENT_TIMESTAMP)
    return not value.is_word(*CLOCK_DEFAULTS)


def _name(token: Token) -> str:
    return identifier(token) or token.text
