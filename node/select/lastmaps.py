"""The types a replicated table's columns had before a DDL: each table's last table map,
kept by name, and the columns DDLs changed since (unknown until the next table map). A DDL
not replayed that may round values in place pauses by them (:mod:`node.ddlpauses`,
:mod:`node.ddltypes`); where the types are not known, by the new type alone."""

from __future__ import annotations

from node.ddl import tables_named
from node.ddlclauses import retyped_columns
from node.ddltypes import old_type
from node.extract.decode import TableSchema

Types = tuple[tuple[str, str, int, int], ...]  # (lower-cased name, *OldType)


class LastMaps:
    def __init__(self) -> None:
        self._maps: dict[tuple[str, str], tuple[TableSchema, frozenset[str]]] = {}

    def seen(self, schema: str, table: str, layout: TableSchema) -> None:
        """A replicated table's table map: what its columns are now."""
        self._maps[(schema, table)] = (layout, frozenset())

    def before(self, statement: str, schema: str, mode: int) -> Types:
        """The column types of the first table a DDL names whose table map this run read,
        but the columns a DDL changed since; then the columns this one changes are unknown
        too (a statement other than an ALTER TABLE: the whole table, until its next table
        map says what it is now)."""
        found: Types = ()
        retyped = retyped_columns(statement, mode)
        for name in tables_named(statement, schema, mode):
            known = self._maps.pop(name, None)
            if known is None:
                continue
            layout, unknown = known
            if not found:
                found = tuple((column.name.lower(), *old_type(
                    column.type, column.precision, column.decimals, column.fsp))
                    for column in layout.columns if column.name.lower() not in unknown)
            if retyped is not None:
                self._maps[name] = (layout, unknown | retyped)
        return found
