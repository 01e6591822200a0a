"""DDL sync: table DDL from the source's binlog, with its table names mapped through the pairs.

With ``ddl_sync: true`` CREATE/ALTER/DROP/RENAME/TRUNCATE TABLE on a table a pair matches is
replayed on the pair's target, the names replaced by the target's (fully qualified), one
statement per target table: ``DROP TABLE a, b`` becomes two statements when a and b map to
different targets. Other statements (CREATE DATABASE, GRANT, views, …) and statements on
tables no pair matches are not replayed. The rest of the statement is kept as written, so a
column a pair renames or excludes is not renamed in the DDL: give such tables their target
DDL by hand (``ddl_sync: false``, the default, filters every DDL).

Select puts a DDL in a batch of its own, so DDL never shares a target transaction with rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from node.changes import ChangeType, RowChange, TargetChange
from shared.identifiers import quote

_NAME = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_QUALIFIED = rf"{_NAME}(?:\s*\.\s*{_NAME})?"
_COMMENT = re.compile(r"/\*.*?\*/|--[^\n]*|#[^\n]*", re.S)
_HEADS = {
    "CREATE": re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?",
                         re.I),
    "ALTER": re.compile(r"^\s*ALTER\s+(?:ONLINE\s+)?(?:IGNORE\s+)?TABLE\s+(?:IF\s+EXISTS\s+)?",
                        re.I),
    "DROP": re.compile(r"^\s*DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?", re.I),
    "TRUNCATE": re.compile(r"^\s*TRUNCATE\s+(?:TABLE\s+)?", re.I),
    "RENAME": re.compile(r"^\s*RENAME\s+TABLES?\s+", re.I),
}
_ONE_NAME = re.compile(_QUALIFIED)
_LIST = re.compile(rf"\s*({_QUALIFIED})\s*(,)?")
_RENAME = re.compile(rf"\s*({_QUALIFIED})\s+TO\s+({_QUALIFIED})\s*(,)?", re.I)

# the target of one source table: (datasource, schema, table) for every pair that maps it
Mapper = Callable[[str, str], list[tuple[str, str, str]]]


@dataclass(frozen=True)
class TableDdl:
    """A DDL statement split into the source tables it names and how to rebuild it."""

    kind: str
    head: str  # the statement up to the first name, e.g. "DROP TABLE IF EXISTS "
    names: tuple[tuple[str, str], ...]  # (schema, table) as named in the statement
    tail: str  # what follows the (last) name
    renames: tuple[tuple[tuple[str, str], tuple[str, str]], ...] = ()


def _unquote(part: str) -> str:
    return part[1:-1].replace("``", "`") if part.startswith("`") else part


def _split_name(text: str, default_schema: str) -> tuple[str, str]:
    parts = [_unquote(p.strip()) for p in re.findall(_NAME, text)]
    return (default_schema, parts[0]) if len(parts) == 1 else (parts[0], parts[1])


def parse(statement: str, default_schema: str) -> TableDdl | None:
    """The table DDL in a statement, or None for any other statement."""
    text = _COMMENT.sub(" ", statement).strip()
    for kind, head in _HEADS.items():
        found = head.match(text)
        if not found:
            continue
        rest, start = text[found.end():], text[:found.end()]
        if kind == "RENAME":
            renames = []
            for match in _RENAME.finditer(rest):
                renames.append((_split_name(match.group(1), default_schema),
                                _split_name(match.group(2), default_schema)))
                if not match.group(3):
                    break
            return TableDdl(kind, start, (), "", tuple(renames)) if renames else None
        if kind == "DROP":
            names, end = [], 0
            for match in _LIST.finditer(rest):
                if match.start() != end:
                    break
                names.append(_split_name(match.group(1), default_schema))
                end = match.end()
                if not match.group(2):
                    break
            return TableDdl(kind, start, tuple(names), rest[end:]) if names else None
        match = _ONE_NAME.match(rest)
        if not match:
            return None
        return TableDdl(kind, start, (_split_name(match.group(0), default_schema),),
                        rest[match.end():])
    return None


def target_statements(ddl: TableDdl, mapper: Mapper) -> Iterator[tuple[str, str, str, str]]:
    """(datasource, schema, table, statement) to run on the targets, one per target table."""
    if ddl.kind == "RENAME":
        for old, new in ddl.renames:
            for (source, schema, table), (new_source, new_schema, new_table) in zip(
                    mapper(*old), mapper(*new), strict=False):
                if source == new_source:
                    yield source, schema, table, (
                        f"{ddl.head}{quote(schema)}.{quote(table)} TO "
                        f"{quote(new_schema)}.{quote(new_table)}")
        return
    for name in ddl.names:
        for source, schema, table in mapper(*name):
            yield source, schema, table, f"{ddl.head}{quote(schema)}.{quote(table)}{ddl.tail}"


def transform_ddl(change: RowChange, seq: int, mapper: Mapper) -> Iterator[TargetChange]:
    """A source DDL change as the target DDL changes it maps to (none for other DDL)."""
    ddl = parse(change.ddl, change.schema)
    if ddl is None:
        return
    for source, schema, table, statement in target_statements(ddl, mapper):
        yield TargetChange(source, schema, table, ChangeType.DDL, (), None, None, seq=seq,
                           ddl=statement)
