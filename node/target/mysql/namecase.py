"""Source tables that a target folding names to lower case would merge: a target with
``lower_case_table_names`` 1 (or 2: names compared without case) takes ``Users`` and
``users`` for one table, so two source tables the source keeps apart, mapped by their
names, would write one target table and overwrite each other's rows of equal keys, without
an error. Refused at start, and after a DDL that made such a table (before its rows load),
unless a pair gathers them into the one name on purpose (the
same target name, which :func:`node.extract.reach.gathered` treats as meant)."""

from __future__ import annotations

from typing import Any

import pymysql

from shared.endpoint import connect
from shared.errors import ConfigError, LoadError
from shared.identifiers import lowered, qualified
from shared.model import DataSource
from shared.patterns import SYSTEM_SCHEMAS


def name_cases(targets: dict[str, DataSource]) -> dict[str, int]:
    """Each target's ``lower_case_table_names``."""
    found = {}
    for name, target in targets.items():
        try:
            with connect(target, connect_timeout=5) as conn, conn.cursor() as cursor:
                cursor.execute("SELECT @@lower_case_table_names")
                row = cursor.fetchone()
        except pymysql.MySQLError as exc:
            raise LoadError(f"target {name}: cannot read lower_case_table_names: "
                            f"{exc.args[-1] if exc.args else exc}") from None
        found[name] = int(row[0]) if row else 0
    return found


def source_tables(source: DataSource) -> list[tuple[str, str]]:
    with connect(source, connect_timeout=5) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE "
                       "TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN "
                       f"({', '.join(['%s'] * len(SYSTEM_SCHEMAS))}) ORDER BY 1, 2",
                       SYSTEM_SCHEMAS)
        return [(str(schema), str(table)) for schema, table in cursor.fetchall()]


def folded_collisions(compiled: Any, tables: list[tuple[str, str]], cases: dict[str, int]
                      ) -> list[str]:
    """Why the source ``tables`` the pipeline takes would meet in one table of a target
    whose ``cases`` (its ``lower_case_table_names``) is not 0, under names that differ only
    in case."""
    met: dict[tuple[str, str, str], dict[tuple[str, str, str], tuple[str, str]]] = {}
    for schema, table in tables:
        if not (compiled.wants_schema(schema) and compiled.wants(schema, table)):
            continue
        for address in compiled.targets_of(schema, table):
            if cases.get(address[0], 0):
                key = (address[0], lowered(address[1]), lowered(address[2]))
                met.setdefault(key, {}).setdefault(address, (schema, table))
    problems = []
    for (datasource, _, _), addresses in met.items():
        if len(addresses) < 2:
            continue  # one name: gathered on purpose, or one table
        named = sorted(addresses.items())
        sources = " and ".join(qualified(*source) for _, source in named)
        names = " and ".join(qualified(*address[1:]) for address, _ in named)
        problems.append(
            f"pipeline {compiled.pipeline_id}: source tables {sources} go to {names} on "
            f"target {datasource}, which compares table names without case "
            f"(lower_case_table_names={cases[datasource]}): they are one table there, and "
            "the rows of each would overwrite the other's of equal keys. Give one of them "
            "a pair of its own whose target names another table (target: {table: "
            "'users_2'}, or a template such as '{table}_cs'), or leave it out of the "
            "pipeline's pairs")
    return problems


def refuse_folded_collisions(compiled: Any, source: DataSource,
                             targets: dict[str, DataSource] | None = None) -> None:
    """Refuse a start (``targets`` given: their settings read, kept in ``compiled``) or, after
    a DDL, a table created or renamed on the source since, whose rows would meet another
    table's in a target that folds names (read before any of its rows is loaded)."""
    if targets is not None:
        compiled.target_cases.clear()
        compiled.target_cases.update(name_cases(targets))
    cases = compiled.target_cases
    if not any(cases.values()):
        return
    problems = folded_collisions(compiled, source_tables(source), cases)
    if problems:
        raise ConfigError("; ".join(problems))
