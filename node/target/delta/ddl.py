"""What a lake table takes of a source's DDL (:meth:`node.target.delta.loader.LakeLoader.load`):
new tables and columns, index changes; and which added columns a mirror cannot take, as
they give the rows it holds a value the binlog never writes there."""

from __future__ import annotations

from node import sqllex
from node.ddlclauses import added_columns, alter_clauses


def taken(ddl: str) -> bool:
    """Whether a lake takes a DDL statement as it is: a new table or schema (made with its
    first rows), ``ALTER TABLE … ADD [COLUMN]`` clauses (a column added with the first row
    that has it), and index changes (nothing to a lake). Anything else changes what rows
    the table holds, or how: the pipeline stops. So does a foreign key whose action
    changes rows (:func:`cascades`), in any statement."""
    words = sqllex.statement_code(ddl)
    if cascades(words):
        return False
    head = [token.text.upper() for token in words[:2]]
    if head[:1] == ["CREATE"] and (words[1].is_word("TABLE", "DATABASE", "SCHEMA", "INDEX",
                                                    "UNIQUE", "FULLTEXT", "SPATIAL")
                                   if len(words) > 1 else False):
        return True
    if head == ["DROP", "INDEX"]:
        return True
    clauses = alter_clauses(words)
    return clauses is not None and all(_taken_clause(clause) for clause in clauses)


def _taken_clause(clause: list[sqllex.Token]) -> bool:
    if len(clause) < 2:
        return False
    verb, what = clause[0], clause[1]
    if verb.is_word("ADD"):
        return True  # ADD [COLUMN] c …, ADD INDEX/KEY/UNIQUE/… (nothing to a lake)
    return verb.is_word("DROP") and what.is_word("INDEX", "KEY")


def cascades(words: list[sqllex.Token]) -> bool:
    """Whether a statement gives a foreign key an action that changes its table's rows (ON
    DELETE or ON UPDATE CASCADE, SET NULL, SET DEFAULT): the rows it changes are not in the
    binlog (the start refuses such keys: :func:`node.target.delta.tables.refuse_cascades`)."""
    return any(words[at].is_word("ON") and words[at + 1].is_word("DELETE", "UPDATE") and
               words[at + 2].is_word("CASCADE", "SET") for at in range(len(words) - 2))


def filled_column(ddl: str) -> tuple[str, str] | None:
    """The first column an ``ALTER TABLE … ADD`` gives the rows a table holds a value other
    than NULL in, with how (``DEFAULT 0``, ``NOT NULL``: its type's implicit default…);
    None when every column it adds is NULL there (or it adds none, or is no ALTER TABLE).
    A generated column fills them: the server computes it for every row, and its row
    events carry it (VIRTUAL and PERSISTENT alike), so the lake table gets the column."""
    clauses = alter_clauses(sqllex.statement_code(ddl)) or []
    for clause in clauses:
        for definition in added_columns(clause):
            how = column_fill(definition[1:])
            if how:
                return sqllex.identifier(definition[0]) or definition[0].text, how
    return None


def column_fill(definition: list[sqllex.Token]) -> str:
    """How a column definition (its type and attributes) fills the rows a table holds
    already: '' when they read NULL. In doubt (a TIMESTAMP not said to be NULL, which a
    server without explicit_defaults_for_timestamp makes NOT NULL with a default), it
    fills."""
    words, depth = [], 0
    for token in definition:  # the top level only: not a type's (…) nor a CHECK's
        if token.kind == sqllex.SYMBOL and token.text in "()":
            depth += 1 if token.text == "(" else -1
            if depth == 1 and token.text == "(" and words:
                words.append(token)  # a DEFAULT (expression)
        elif depth == 0:
            words.append(token)
    if any(word.is_word("AS", "GENERATED") for word in words):
        return "AS (…): a generated column, computed for every row"
    for at, word in enumerate(words):
        following = words[at + 1] if at + 1 < len(words) else None
        if word.is_word("DEFAULT") and following is not None and \
                not following.is_word("NULL"):
            return f"DEFAULT {'(…)' if following.text == '(' else following.text}"
        if word.is_word("NOT") and following is not None and following.is_word("NULL"):
            if not any(other.is_word("DEFAULT") for other in words):
                return "NOT NULL (its type's implicit default)"
        if word.is_word("AUTO_INCREMENT"):
            return "AUTO_INCREMENT"
    explicit_null = any(word.is_word("NULL") for word in words)
    if words and words[0].is_word("TIMESTAMP") and not explicit_null:
        return "TIMESTAMP without NULL (a server without explicit_defaults_for_timestamp " \
            "makes it NOT NULL with a default)"
    return ""
