"""A corpus case and group, and the common statements of a case."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Group:
    """One channel: its pipeline parameters and whether the target is made by DDL sync."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    # one pair per schema, every table under the same names: {schema}.{table} templates
    # (else one pair per table, in the short form)
    templates: bool = False

    @property
    def ddl_sync(self) -> bool:
        return bool(self.params.get("ddl_sync"))


@dataclass(frozen=True)
class Case:
    id: str
    group: str
    tables: tuple[str, ...]
    setup: tuple[str, ...] = ()
    work: tuple[str, ...] = ()
    schema: str = ""  # the odd part of the schema name; "" = a plain unique name
    schema_options: str = ""  # e.g. CHARACTER SET latin1
    pair_options: dict[str, Any] = field(default_factory=dict)  # per table, e.g. key_columns
    xfail: str = ""
    # a case setl cannot copy on its own: the channel pauses with an error holding `pauses`;
    # `remedy` (statements on the target) is what the error tells the user to do, after which
    # the channel is started again and must copy everything
    pauses: str = ""
    remedy: tuple[str, ...] = ()


def crud(table: str, rows: list[str], update: str, key: str = "id") -> tuple[str, ...]:
    """Insert rows keyed 1, 2, 3, …; update row 1 (not its key), move row 2 to another key,
    delete row 3, and in one transaction move row 1 away and back (merged in one batch)."""
    t, k = f"{{s}}.{table}", key
    return (f"INSERT INTO {t} VALUES " + ", ".join(rows),
            f"UPDATE {t} SET {update} WHERE {k} = 1",
            f"UPDATE {t} SET {k} = {k} + 100 WHERE {k} = 2",
            f"DELETE FROM {t} WHERE {k} = 3",
            "BEGIN",
            f"UPDATE {t} SET {k} = 1000 WHERE {k} = 1",
            f"UPDATE {t} SET {k} = 1 WHERE {k} = 1000",
            "COMMIT")
