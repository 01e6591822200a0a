"""The types a replicated table's columns had before a DDL: each table's last table map,
kept by name, and the types DDLs gave its columns since (:func:`node.ddlset.set_types`: a
MODIFY's new type; a column dropped or renamed is not known until the next table map). A DDL
not replayed that may round values in place pauses by them (:mod:`node.ddlpauses`,
:mod:`node.ddltypes`); where a column's type is not known so (no table map since the node
started), by its target's column (``ddl_sync`` off: :func:`node.ddlset.target_types`), else
by the new type alone."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from node.ddl import tables_named
from node.ddlset import Types as SetTypes
from node.ddlset import modified, set_types
from node.ddltypes import OldType, old_type
from node.extract.decode import TableSchema

Types = tuple[tuple[str, str, int, int], ...]  # (lower-cased name, *OldType)
# a source table's columns' types on its target, by lower-cased name
TargetTypes = Callable[[str, str], Mapping[str, OldType]]


class LastMaps:
    def __init__(self, target: TargetTypes | None = None) -> None:
        # a table's last table map (None: none read in this run), and the types DDLs gave
        # its columns since (None: not known)
        self._maps: dict[tuple[str, str], tuple[TableSchema | None, SetTypes]] = {}
        self._target = target

    def seen(self, schema: str, table: str, layout: TableSchema) -> None:
        """A replicated table's table map: what its columns are now."""
        self._maps[(schema, table)] = (layout, {})

    def before(self, statement: str, schema: str, mode: int, settled: bool = True,
               target: bool = False) -> Types:
        """The column types of the first table a DDL names (the one an ALTER alters): its
        last table map's, but where a DDL set another since; then the types this one sets
        are kept for the next (another statement, or a table renamed: the whole table is
        forgotten, until its next table map says what it is now). ``target``: a column
        this statement modifies whose type is not known so is read from the target
        (``ddl_sync`` off). ``settled`` False: a two-phase ALTER's start or rollback (the
        columns it names are not known after it)."""
        found: dict[str, OldType | None] | None = None
        sets = set_types(statement, mode, settled)
        for at, name in enumerate(tables_named(statement, schema, mode)):
            layout, since = self._maps.pop(name, (None, {}))
            if found is None:
                found = {column.name.lower(): old_type(
                    column.type, column.precision, column.decimals, column.fsp)
                    for column in layout.columns} if layout is not None else {}
                found.update(since)
                if target and self._target is not None and any(
                        found.get(column) is None for column in modified(statement, mode)):
                    known = self._target(*name)
                    found.update({column: kind for column, kind in known.items()
                                  if found.get(column) is None})
            kept = since | (sets if at == 0 else dict.fromkeys(sets)) if sets is not None else {}
            if sets is not None and (layout is not None or kept):  # (another table it
                self._maps[name] = (layout, kept)  # names, a REFERENCES b: not altered)
        return tuple((name, *kind) for name, kind in (found or {}).items() if kind is not None)
