"""Whether a source table's columns, as a table map gives them, fit the pairs that take it.

Checked once per table map (a new table id: the table's start in the binlog and after each
DDL), never per row; a problem stops the pipeline before a row of that layout is mapped
(:meth:`node.extract.etl.CompiledPipeline.layout_problem`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Protocol

from shared.model import LookupJoin, MediaPair
from shared.patterns import PatternKind


class Pair(Protocol):  # node.extract.pairs.CompiledPair
    @property
    def pair(self) -> MediaPair: ...
    @property
    def renames(self) -> dict[str, str]: ...
    @property
    def include(self) -> frozenset[str]: ...
    @property
    def exclude(self) -> frozenset[str]: ...
    def keeps(self, name: str, keys: Collection[str] = ()) -> bool: ...


def gone_columns(entry: Pair, columns: tuple[str, ...],
                 before: Iterable[str] | None = None) -> list[str]:
    """Columns the pair includes or renames (column_pairs) that the table no longer has: a
    renamed one's target column would stop being written as surely as an included one.
    ``before``: the table's columns as its previous layout had them (None: every column the
    pair names is one the table should have); only those that were there are gone."""
    wanted = entry.include.union(entry.renames)
    if before is not None:
        wanted = wanted.intersection(before)
    return sorted(wanted.difference(columns))


def gone_keys(entry: Pair, columns: tuple[str, ...]) -> list[str]:
    """The pair's ``key_columns`` the table does not have (dropped or renamed by a DDL, or
    never there): a row's key would be read from a column its image lacks."""
    return [name for name in entry.pair.key_columns if name not in columns]


def unknown_excludes(entry: Pair, columns: tuple[str, ...],
                     before: Iterable[str] | None = None) -> list[str]:
    """Names the pair excludes that the table has in no case (MySQL's column names ignore
    it): a misspelt name leaves out nothing, and the column meant copied. ``before`` as
    :func:`gone_columns` takes it: a name gone since, the same as an included one."""
    named: Iterable[str] = entry.exclude
    if before is not None:
        had = {name.lower() for name in before}
        named = [name for name in named if name.lower() in had]
    have = {name.lower() for name in columns}
    return sorted(name for name in named if name.lower() not in have)


def joined_by(join: LookupJoin, columns: tuple[str, ...]) -> str | None:
    """The table's own name of the column a join finds its row by (``by``, matched without
    case as MySQL matches it); None when the table has no such column: every row would
    miss its joined row (an insert dropped, an update taken out of the target)."""
    wanted = join.by.lower()
    return next((name for name in columns if name.lower() == wanted), None)


def unjoinable(entry: Pair, columns: tuple[str, ...]) -> list[LookupJoin]:
    """The pair's joins whose ``by`` column the table does not have (:func:`joined_by`)."""
    return [join for join in entry.pair.joins if joined_by(join, columns) is None]


def patterned(entry: Pair) -> bool:
    """Whether the pair's source names tables by a pattern (``shop.*``, ``orders_[0-3]``):
    the columns it includes or renames need not be in every table it matches."""
    source = entry.pair.source
    return source.namespace.kind is not PatternKind.SINGLE or \
        source.table.kind is not PatternKind.SINGLE


def colliding_columns(entry: Pair, columns: tuple[str, ...], keys: Iterable[str]
                      ) -> dict[str, list[str]]:
    """Target columns that two or more source columns would be written to (a rename onto
    the name of a column the source added or already had; MySQL's names ignore case), with
    those source columns: the row's later value overwrote the earlier one, silently."""
    if not entry.renames:
        return {}
    kept = set(keys)
    by_target: dict[str, list[str]] = {}
    for name in columns:
        if not entry.keeps(name, kept):
            continue
        by_target.setdefault(entry.renames.get(name, name).lower(), []).append(name)
    return {entry.renames.get(names[0], names[0]): names
            for names in by_target.values() if len(names) > 1}


def written_columns(entry: Pair, columns: tuple[str, ...], keys: Iterable[str]
                    ) -> dict[str, str]:
    """The target columns (lower-cased) a pair writes of a table's layout besides the row's
    key, each with the table its value comes from when a join adds it ("" for the row's
    own: the columns the pair keeps, under their target names, and those its virtual
    columns fill)."""
    kept = set(keys)
    pair = entry.pair
    names = {entry.renames.get(name, name).lower(): "" for name in columns
             if name not in kept and entry.keeps(name)}
    names.update((column.name.lower(), "") for column in pair.virtual_columns)
    names.update((name.lower(), join.table.lower()) for join in pair.joins
                 for name in join.columns)
    for name in (*kept, *pair.key_columns):
        names.pop(entry.renames.get(name, name).lower(), None)
    return names


# by target, then by (pair, schema, table): whether the pair is a merge_part, what it
# writes (written_columns), and the key its rows are found by there (target_key)
Written = dict[tuple[str, str, str],
               dict[tuple[str, str, str], tuple[bool, dict[str, str], tuple[str, ...]]]]


def target_key(entry: Pair, keys: tuple[str, ...]) -> tuple[str, ...]:
    """The target columns (lower-cased, in order) a table's rows are found by through the
    pair, as its changes carry them; () for a keyless table, whose rows are written in
    source order and found by their whole image."""
    pair = entry.pair
    if not keys and not (pair.joins or pair.merge_part):
        return ()
    return tuple(entry.renames.get(name, name).lower() for name in pair.key_columns or keys)


def _keyed(key: tuple[str, ...]) -> str:
    return f"keyed by ({', '.join(key)})" if key else "without a key"


def mixed_keys(pipeline_id: str, schema: str, table: str, source: str,
               key: tuple[str, ...], target: tuple[str, str, str],
               parts: Mapping[tuple[str, str, str], tuple[bool, dict[str, str],
                                                      tuple[str, ...]]]) -> str | None:
    """Why a table's rows cannot share a target with the other source tables seen writing
    it (None when they can): the batch merge finds a target's rows by one key, so a keyless
    table beside keyed ones (or tables keyed by other columns) would have its rows taken
    for one another: every keyless row of a batch but the last one lost."""
    for (other, other_schema, other_table), (_, _, theirs) in tuple(parts.items()):
        if theirs == key or (other_schema, other_table) == (schema, table):
            continue
        return (f"pipeline {pipeline_id}: {schema}.{table} (pair {source}) is "
                f"{_keyed(key)} and {other_schema}.{other_table} (pair {other}) "
                f"{_keyed(theirs)}, and both write {'.'.join(target[1:])}: a target several "
                "tables feed is merged in each batch by one key, so rows keyed otherwise "
                "would be taken for one another (a keyless table's rows lost but the last "
                "of each batch). Give the tables one key over the same columns (ALTER TABLE "
                "… ADD PRIMARY KEY), or send the odd table to a target of its own (setl "
                "apply), then resume")
    return None


def overlapping_part(pipeline_id: str, entries: Iterable[Pair], schema: str, table: str,
                     columns: tuple[str, ...], keys: Iterable[str], written: Written,
                     address: Mapping[int, tuple[str, str, str]]) -> str | None:
    """Why a table's layout writes a column of a wide row another source table writes too
    (None when it does not), remembering what each pair writes of each table in
    ``written``. A wide row's parts (a ``merge_part`` pair beside the others into its
    target) must not meet on a column besides the key: each part's change would overwrite
    the other's value, the target holding whichever table wrote last, and a copy or repair
    another. Tables of one pair (shards of one part) may, and so may a join's column and
    the part of the joined table, or two joins of one table (a join reads that table's
    current row); a pair whose
    processor makes its rows is not known. ``address``: each entry's target, by its index
    in ``entries``. A table keyed otherwise than another table writing its target stops
    too (:func:`mixed_keys`)."""
    keys = tuple(keys)
    me = f"{schema}.{table}".lower()
    for index, entry in enumerate(entries):
        target = address.get(index)
        if target is None or entry.pair.processor:
            continue
        mine = written_columns(entry, columns, keys)
        parts = written.setdefault(target, {})
        source = str(entry.pair.source)
        key = target_key(entry, keys)
        mixed = mixed_keys(pipeline_id, schema, table, source, key, target, parts)
        if mixed:
            return mixed
        # (a copy: a snapshot's reads check layouts on another thread than the binlog's)
        for (other, other_schema, other_table), (merged, theirs, _) in tuple(parts.items()):
            them = f"{other_schema}.{other_table}".lower()
            met = sorted(name for name in mine.keys() & theirs.keys()
                         if mine[name] != them and theirs[name] != me and
                         not (mine[name] and mine[name] == theirs[name]))
            if other == source or not met or not (merged or entry.pair.merge_part):
                continue
            return (f"pipeline {pipeline_id}: {schema}.{table} (pair {source}) and "
                    f"{other_schema}.{other_table} (pair {other}) both write column(s) "
                    f"{', '.join(met)} of the wide rows of {'.'.join(target[1:])} "
                    "(merge_part): each part's change would overwrite the other's value, "
                    "the target holding whichever table wrote last, and a copy or repair "
                    "another. Leave the column out of one pair (columns: exclude), or write "
                    "it to a column of its own (column_pairs), apply, then resume. A source "
                    "column added by a DDL (ddl_sync) that another part already writes is "
                    "this case too")
        parts[(source, schema, table)] = (entry.pair.merge_part, mine, key)
    return None


def altered(written: Written, schema: str, table: str) -> None:
    """Forget what the pairs wrote of a table a DDL changes: its next layout says (a column
    moved from one part's table to another's, dropped there first, met the old layout)."""
    for parts in written.values():
        for part in [part for part in parts if part[1:] == (schema, table)]:
            del parts[part]


def layout_problem(pipeline_id: str, entries: Iterable[Pair], schema: str, table: str,
                   columns: tuple[str, ...], keys: Iterable[str] = (),
                   before: tuple[str, ...] | None = None, keyed: bool = True) -> str | None:
    """Why a table's columns do not fit its pairs (``keys``: columns always kept;
    ``before``: the table's columns in its previous layout this run, None when not seen;
    ``keyed``: the table has a key of its own, so a pair's ``key_columns`` find its rows).
    A pair of a pattern stops only for a column the table had before: a table it matches
    that never had the column it includes or renames is not one that lost it. Key columns
    the table lacks stop whichever pair names them (its rows could not be keyed)."""
    keys = tuple(keys)
    for entry in entries:
        where = f"pipeline {pipeline_id}: pair {entry.pair.source} → {entry.pair.target}"
        lacked = gone_keys(entry, columns) if keyed or entry.pair.joins or \
            entry.pair.merge_part else []
        if lacked:
            return (f"{where} finds the rows of {schema}.{table} by key_columns "
                    f"{', '.join(entry.pair.key_columns)}, and the table has no column "
                    f"{', '.join(lacked)} (renamed or dropped on the source, or named in "
                    "another case): its rows could not be keyed, nor their updates and "
                    "deletes matched on the target. Name columns the table has in the "
                    "pair's key_columns (with a unique key over them on the target), or "
                    "leave key_columns out (setl apply), then resume")
        had = (before or ()) if patterned(entry) else None
        missing = gone_columns(entry, columns, had)
        if missing:
            how = "includes" if entry.include.issuperset(missing) else \
                "renames (column_pairs)" if not entry.include.intersection(missing) else \
                "includes or renames (column_pairs)"
            return (f"{where} {how} column(s) "
                    f"{', '.join(missing)}, which {schema}.{table} no longer has (renamed or "
                    "dropped on the source, or named in another case): their values would "
                    "stop being copied, their target columns left as they are or at their "
                    "defaults. Name the table's columns in the pair (setl apply), then "
                    "resume")
        unknown = unknown_excludes(entry, columns, had)
        if unknown:
            return (f"{where} excludes column(s) {', '.join(unknown)}, which "
                    f"{schema}.{table} does not have (misspelt, or renamed or dropped on the "
                    "source): the name leaves out nothing, so a column meant to be left out "
                    "under another name is copied to the target. Correct the name in the "
                    "pair's columns: exclude, or take out the one the table no longer has "
                    "(setl apply), then resume")
        lost = unjoinable(entry, columns)
        if lost:
            said = ", ".join(f"{join.table} by {join.by}" for join in lost)
            return (f"{where} joins {said}, a column {schema}.{table} does not have "
                    "(misspelt, or renamed or dropped on the source): no row would find its "
                    "joined row, so every insert would be dropped and every update take the "
                    "row out of the target. Name a column of the table in the join's by "
                    "(setl apply), then resume")
        collisions = colliding_columns(entry, columns, keys)
        if collisions:
            said = "; ".join(f"{' and '.join(names)} → {target}"
                             for target, names in collisions.items())
            return (f"{where} writes two source columns of {schema}.{table} to one target "
                    f"column ({said}): a column_pairs rename meets a column of that name on "
                    "the source (added by a DDL, or there from the start), and one value "
                    "would overwrite the other in every row. Rename the target column in "
                    "column_pairs, or leave one of the two out (columns: exclude), and "
                    "apply, then resume. With ddl_sync, an ADD COLUMN of that name was taken "
                    "on the target as already applied (the renamed column has the name): "
                    "add the new column to the target by hand under its new name")
    return None
