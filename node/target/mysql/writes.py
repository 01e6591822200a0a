"""One target's share of a batch as Load (:mod:`node.target.mysql.loader`) writes it: the
units Extract/Transform rendered, changes rendered here (a two-way channel's, whose
conflicts are resolved first), or DDL; and what to write on each try.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pymysql

from node.changes import Batch, TargetChange
from node.jobs import JobSpec, PartResult, Unit, in_order
from node.target.mysql.units import render
from shared.errors import LoadError, SetlError

if TYPE_CHECKING:
    from node.target.mysql.loader import Loader


@dataclass
class Writes:
    """One target's share of a batch: rendered units, changes to render here (a two-way
    channel's, or a test's), or DDL."""

    units: list[Unit] = field(default_factory=list)
    changes: list[TargetChange] | None = None
    ddl: list[TargetChange] = field(default_factory=list)
    redo: Callable[[], list[PartResult]] | None = None  # rendered again, a statement a row
    unchecked: frozenset[int] | None = None  # changes' places with foreign_key_checks off

    def prepare(self, loader: Loader) -> None:
        for change in self.changes or ():
            loader.facts.of((change.datasource, change.schema, change.table))

    def rows(self, loader: Loader) -> int:
        """The rows it would write (a dry run)."""
        if self.changes is not None:
            self.prepare(loader)
            return sum(unit.rows for unit in render(self.changes, self._spec(loader, False)))
        return sum(unit.rows for unit in self.units) + len(self.ddl)

    def for_attempt(self, loader: Loader, batch: Batch, cursor: Any,
                    one_by_one: bool) -> list[Unit]:
        """The units to write now: a two-way batch leaves out the changes that lose a
        conflict; a second try writes a row a statement."""
        if self.ddl:
            return []
        if self.changes is not None:
            changes = self.changes
            if loader.loop is not None and changes:
                loader.loop.refuse_engines(loader.facts.of, changes)
                changes = loader.loop.resolve(cursor, changes, batch.process_id,
                                              loader.facts.of)
            try:
                return render(changes, self._spec(loader, one_by_one))
            except (SetlError, pymysql.MySQLError):
                raise
            except Exception as exc:  # a Python error names where it happened, as every error
                table = f"{changes[0].schema}.{changes[0].table}" if len(
                    {(c.schema, c.table) for c in changes}) == 1 else "of the batch"
                raise LoadError(
                    f"stage load, pipeline {loader.pipeline_id}, processId {batch.process_id}, "
                    f"position {batch.end}, target {changes[0].datasource}, table {table}: "
                    f"{type(exc).__name__}: {exc}") from exc
        if one_by_one and self.redo is not None:
            name = self.units[0].datasource if self.units else ""
            return [unit for unit in in_order(self.redo())
                    if unit.datasource == name and not unit.apart]
        return self.units

    def _spec(self, loader: Loader, one_by_one: bool) -> JobSpec:
        facts = {(c.datasource, c.schema, c.table): loader.facts.of(
            (c.datasource, c.schema, c.table)) for c in self.changes or ()}
        return JobSpec(0, False, facts, load_batch_size=loader.params.load_batch_size,
                       one_by_one=one_by_one, unchecked=self.unchecked)
