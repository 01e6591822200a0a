"""Source DDL that ``ddl_sync`` cannot replay as it ran, because a pair's transforms stand
between the source's table and the target's (:func:`node.ddl.extract_ddl` asks): such a
statement pauses the pipeline rather than run on the target under the source's names.

- a target that gathers several source tables (shards into one table, a template, pairs of
  other tables writing the same table, merge_part): an ALTER of one of them that drops or
  renames a column, modifies or changes one in a way that may rewrite the values it holds
  (a type that rounds them, judged by the column's old type where known as for an ALTER not
  replayed; any in a session that cuts what the new type cannot hold), converts its
  character set, or adds or drops a primary or unique key would change the other tables'
  rows too (their column dropped, their values rounded) while their own rows still come in
  the old layout. Adding a column is replayed: the others' ADD of it then finds it there
  (taken as applied when alike); so is a MODIFY that widens a column (in a strict session a
  narrowing that does not fit the others' values fails on the target, loudly).
- a clause naming a column the pair renames (``column_pairs``, either name; a rename in case
  only is none, MySQL's column names ignore case), leaves out (``columns: exclude``, or not
  in ``columns: include``; but a key column, the pair's ``key_columns`` or the key read for
  a table without a primary key, always goes through), or fills (``virtual_columns``):
  under the source's name it would act on another column of the target, or on none that
  setl writes (a drop of a renamed column failed as "already applied", its target column
  never written again). Names are compared ignoring case.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from node.ddlclauses import named_columns
from node.ddlparse import TableDdl
from node.ddltypes import OldType
from shared.errors import ConfigError
from shared.identifiers import qualified

# ALTER clauses that change what a gathered target's other tables' rows hold (a MODIFY or
# CHANGE: where it renames the column or may rewrite its values)
_RESHAPES = ("DROP", "RENAME", "CONVERT")


class Paired(Protocol):
    """What these checks need of a compiled pipeline (node.ddl.DdlPipeline has it)."""

    # the key of each table without a primary key, as the source showed it when read
    table_keys: dict[tuple[str, str], tuple[str, ...]]

    def pairs_for(self, schema: str, table: str) -> Sequence[Any]: ...
    def targets_of(self, schema: str, table: str) -> list[tuple[str, str, str]]: ...
    def gathered(self, schema: str, table: str) -> bool: ...
    def stored(self, schema: str, table: str) -> tuple[str, str]: ...


def check(compiled: Paired, ddl: TableDdl, statement: str, session: Any, ran: str,
          past: str) -> None:
    """Pause (ConfigError) where replaying an ALTER TABLE or CREATE INDEX of a replicated
    table would act on the target other than on the source (the module's text)."""
    if ddl.kind not in ("ALTER", "INDEX"):
        return
    carried = dict(session).get("sql_mode")
    before = {column: OldType(kind, digits, fraction)
              for column, kind, digits, fraction in dict(session).get("columns", ())}
    named = named_columns(statement, None if carried is None else int(carried), before)
    if not named:
        return
    for name in ddl.names:
        targets = compiled.targets_of(*name.pair)
        if not targets:
            continue
        stored = compiled.stored(*name.pair)
        entries = compiled.pairs_for(*stored)
        _gathered(compiled, name.pair, targets, entries, named, ran, past)
        for entry in entries:
            keys = {column.lower() for column in
                    (*entry.pair.key_columns, *compiled.table_keys.get(stored, ()))}
            _through_pair(entry, name.pair, named, keys, ran, past)


def _gathered(compiled: Paired, table: tuple[str, str], targets: list[tuple[str, str, str]],
              entries: Sequence[Any], named: list[Any], ran: str, past: str) -> None:
    reshaping = [each.clause for each in named if (each.verb in _RESHAPES and (
        each.verb != "RENAME" or each.renames)) or each.keys or each.rewrites or (
        each.verb == "CHANGE" and each.renames)]
    if not reshaping or not compiled.gathered(*table):
        return
    where = ", ".join(qualified(*target[1:]) for target in targets)
    pairs = ", ".join(f"{entry.pair.source} → {entry.pair.target}" for entry in entries)
    raise ConfigError(
        f"{ran}: {where} also takes rows of other source tables than {qualified(*table)} "
        f"(pair {pairs}), and {reshaping[0]!r} replayed there would change the other tables' "
        "rows too (a column dropped, values rounded or cut, a key they may not fit) while "
        "theirs still come in the old layout; setl does not run it. Move the pipeline past "
        f"this statement: {past} (the same statement on each other source table pauses too); "
        "make the change on the target's table by hand once every source table it gathers "
        "has it")


def _through_pair(entry: Any, table: tuple[str, str], named: list[Any], keys: set[str],
                  ran: str, past: str) -> None:
    """``keys``: the table's key columns (lower-cased), which the pair writes whatever its
    columns list says (:meth:`node.extract.pairs.CompiledPair.map_row`)."""
    renames = {source.lower(): (source, target) for source, target in entry.renames.items()
               if target.lower() != source.lower()}
    renamed_to = {target.lower(): source for source, target in entry.renames.items()
                  if target.lower() != source.lower()}
    exclude = {column.lower() for column in entry.exclude}
    include = {column.lower() for column in entry.include}
    virtual = {filler.name.lower() for filler in getattr(entry, "fillers", ())}
    if not (renames or exclude or include or virtual):
        return
    for each in named:
        for column in each.columns:
            low = column.lower()
            if low in renames:
                why = f"renames it to {renames[low][1]} (column_pairs)"
            elif low in renamed_to:
                why = f"writes source column {renamed_to[low]} under that name (column_pairs)"
            elif low in virtual:
                why = "fills a target column of that name itself (virtual_columns)"
            elif low in keys:
                continue  # a key column goes through whatever the columns list says
            elif low in exclude:
                why = "leaves it out (columns: exclude)"
            elif include and low not in include:
                why = "copies only the columns it includes (columns: include)"
            else:
                continue
            raise ConfigError(
                f"{ran}: its clause {each.clause!r} names column {column} of "
                f"{qualified(*table)}, and pair {entry.pair.source} → {entry.pair.target} "
                f"{why}; replayed on the target under the source's column name it would act "
                "on another column than the one the pair writes, or on one setl never "
                "writes (ddl_sync does not map column names). Make the matching change on "
                "the target by hand (under the target's column name, or none where the "
                "target has no such column; change the pair's columns with setl apply if "
                f"they should follow), then move the pipeline past this statement: {past}")
