"""A parent's ``ON DELETE`` / ``ON UPDATE`` actions, written by Load itself.

The binlog carries a parent's delete (or key change), never the rows the source's engine
cascaded from it; the target's own foreign keys redo them, but only where the target holds
the parent row. During a snapshot it may not: the parent was deleted on the source before
the copy reached it, while the target already holds its children (their chunk copied first,
or written by the stream). The target's delete then finds no parent and keeps the children.

So after a checked delete of a table with children whose foreign key (on the target) says
``CASCADE`` or ``SET NULL``, Load writes the action itself — ``DELETE FROM child WHERE
(fk) = (the row's referenced values)``, ``UPDATE child SET fk = NULL`` — and after a checked
key change ``UPDATE child SET fk = (new values)`` (or NULL), whether or not the parent row
is there: where it is, the target's cascade already did it and the statement finds nothing.
Grandchildren follow through the target's own foreign keys from these statements (checks
are on). ``RESTRICT`` / ``NO ACTION``: nothing to do. A change the source made with checks
off (or a row a window read) cascades nowhere, and gets none.

Each statement runs only while the target still has the foreign key with that action (its
constraint in ``information_schema``): one dropped or changed by hand since the facts were
read keeps the rows the target's schema now keeps. Only a foreign key whose referenced
columns are all among the columns the parent's rows are keyed by can be followed (a delete
carries its key, not its whole row). The statements touch only rows the target's own
cascade would have touched had the parent been there, also of a child table the pipeline
does not replicate.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from node.target.mysql.keys import sql_value
from shared.identifiers import qualified, quote

ACTIONS = frozenset({"CASCADE", "SET NULL"})  # the referential actions Load writes itself


class Child(NamedTuple):
    """A foreign key to a table, as the target holds it: the child table, its columns, the
    parent's columns they reference (in the same order), and its referential actions."""

    schema: str
    table: str
    columns: tuple[str, ...]
    referenced: tuple[str, ...]
    on_delete: str  # CASCADE, SET NULL, RESTRICT, NO ACTION, SET DEFAULT
    on_update: str
    name: str = ""  # the constraint's: each action runs only while the target still has it


def read_children(cursor: Any, schema: str, table: str) -> tuple[Child, ...]:
    """The foreign keys to ``schema.table`` with a ``CASCADE`` or ``SET NULL`` action."""
    cursor.execute(
        "SELECT k.TABLE_SCHEMA, k.TABLE_NAME, k.CONSTRAINT_NAME, k.COLUMN_NAME, "
        "k.REFERENCED_COLUMN_NAME, r.DELETE_RULE, r.UPDATE_RULE FROM "
        "information_schema.KEY_COLUMN_USAGE k JOIN information_schema.REFERENTIAL_CONSTRAINTS "
        "r ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = "
        "k.CONSTRAINT_NAME AND r.TABLE_NAME = k.TABLE_NAME WHERE k.REFERENCED_TABLE_SCHEMA = %s "
        "AND k.REFERENCED_TABLE_NAME = %s AND (r.DELETE_RULE IN ('CASCADE', 'SET NULL') OR "
        "r.UPDATE_RULE IN ('CASCADE', 'SET NULL')) ORDER BY k.TABLE_SCHEMA, k.TABLE_NAME, "
        "k.CONSTRAINT_NAME, k.ORDINAL_POSITION", (schema, table))
    found: dict[tuple[str, str, str], list[Any]] = {}
    for child_schema, child, name, column, referenced, on_delete, on_update in cursor.fetchall():
        one = found.setdefault((str(child_schema), str(child), str(name)),
                               [[], [], str(on_delete), str(on_update)])
        one[0].append(str(column))
        one[1].append(str(referenced))
    return tuple(Child(child_schema, child, tuple(columns), tuple(referenced), on_delete,
                       on_update, name)
                 for (child_schema, child, name), (columns, referenced, on_delete, on_update)
                 in found.items())


def _held(child: Child, rule: str, action: str) -> tuple[str, list[Any]]:
    """A condition true while the target still has ``child``'s foreign key with this action
    (``rule``: DELETE_RULE or UPDATE_RULE): the facts are read once and kept until a DDL in
    the stream, and a key dropped or changed on the target by hand since must not have its
    old action written (rows the target's own schema keeps were deleted; a review)."""
    return (f" AND EXISTS (SELECT 1 FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE "
            f"CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s AND CONSTRAINT_NAME = %s AND "
            f"{rule} = %s)", [child.schema, child.table, child.name, action])


def _places(child: Child, keys: tuple[str, ...]) -> tuple[int, ...] | None:
    """Where each column ``child`` references is in a key of ``keys`` (None: not all are)."""
    named = {key.lower(): place for place, key in enumerate(keys)}
    places = tuple(named.get(column.lower(), -1) for column in child.referenced)
    return None if -1 in places else places


def _where(child: Child, values: list[tuple[Any, ...]]) -> tuple[str, list[Any]]:
    """Rows of ``child`` whose foreign key holds one of ``values`` (never a NULL: it matches
    no parent). A column compared with ``=`` (the server converts a value into the column's
    charset, which a row constructor's ``IN`` does not)."""
    if len(child.columns) == 1:
        return (f"{quote(child.columns[0])} IN ({', '.join(['%s'] * len(values))})",
                [sql_value(value[0]) for value in values])
    one = "(" + " AND ".join(f"{quote(column)} = %s" for column in child.columns) + ")"
    return (" OR ".join([one] * len(values)),
            [sql_value(v) for value in values for v in value])


def deleted(keys: tuple[str, ...], gone: list[tuple[Any, ...]], children: tuple[Child, ...]
            ) -> Iterator[tuple[str, list[Any]]]:
    """The ``ON DELETE`` actions of deleting the rows of these keys (as the target compares
    them), a statement per child: SQL with ``%s`` and its arguments."""
    for child in children:
        if child.on_delete not in ACTIONS:
            continue
        places = _places(child, keys)
        if places is None:
            continue
        values = list(dict.fromkeys(
            value for value in (tuple(key[p] for p in places) for key in gone)
            if None not in value))
        if not values:
            continue
        where, args = _where(child, values)
        held, named = _held(child, "DELETE_RULE", child.on_delete)
        if child.on_delete == "CASCADE":
            yield (f"DELETE FROM {qualified(child.schema, child.table)} WHERE ({where}){held}",
                   args + named)
        else:
            yield (f"UPDATE {qualified(child.schema, child.table)} SET "
                   + ", ".join(f"{quote(column)} = NULL" for column in child.columns)
                   + f" WHERE ({where}){held}", args + named)


def moved(keys: tuple[str, ...], old: tuple[Any, ...], new: tuple[Any, ...],
          children: tuple[Child, ...]) -> Iterator[tuple[str, list[Any]]]:
    """The ``ON UPDATE`` actions of a row's key change from ``old`` to ``new`` (as the
    target compares them), written after the row's own update and upsert: the new parent
    is there, so a checked ``CASCADE`` finds it."""
    for child in children:
        if child.on_update not in ACTIONS:
            continue
        places = _places(child, keys)
        if places is None:
            continue
        before = tuple(old[p] for p in places)
        after = tuple(new[p] for p in places)
        if None in before or before == after:
            continue
        where, args = _where(child, [before])
        if child.on_update == "CASCADE":
            assigned, values = ", ".join(f"{quote(c)} = %s" for c in child.columns), \
                [sql_value(value) for value in after]
        else:
            assigned, values = ", ".join(f"{quote(c)} = NULL" for c in child.columns), []
        held, named = _held(child, "UPDATE_RULE", child.on_update)
        yield (f"UPDATE {qualified(child.schema, child.table)} SET {assigned} WHERE "
               f"({where}){held}", values + args + named)
