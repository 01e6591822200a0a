"""Read the options of one media pair (columns, groups, processor, virtual columns, shard)."""

from __future__ import annotations

import re
from typing import Any

from shared import confinement, expr
from shared.model import (
    ColumnGroup,
    ColumnMode,
    ColumnPair,
    LookupJoin,
    ShardAlgorithm,
    ShardRule,
    VirtualColumn,
)
from shared.yamlreader import MISSING, Field, Mapping

_COLUMN = re.compile(r"[A-Za-z0-9_$]{1,64}")
_CALLABLE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def column_name(value: str) -> str | None:
    return None if _COLUMN.fullmatch(value) else f"invalid column name {value!r}"


def callable_name(value: str) -> str | None:
    if not _CALLABLE.fullmatch(value):
        return f'expected a Python callable as module:function, got "{value}"'
    rules = confinement.checked_rules()
    return rules.processor_problem(value) if rules is not None else None


def expression(value: str) -> str | None:
    try:
        expr.parse(value)
    except expr.ExpressionError as exc:
        return str(exc)
    return None


def _columns(item: Field) -> Any:
    if not item.is_list():
        return item.expected("a list of column names")
    names = [child.string(column_name) for child in item.items()]
    if MISSING in names:
        return MISSING
    if len(set(names)) != len(names):
        return item.fail("a column is listed twice")
    return tuple(names)


def read_pair_options(entry: Mapping) -> dict[str, Any] | None:
    """The keyword arguments of MediaPair other than source/target; None on error."""
    before = len(entry.issues.items)
    options: dict[str, Any] = {
        "push_weight": entry.get("push_weight", lambda f: f.integer(0), 0),
        "processor": entry.get("processor", lambda f: f.string(callable_name), None),
        "key_columns": entry.get("key_columns", _columns, ()),
        "fan_out": entry.get("fan_out", Field.boolean, False),
        "column_pairs": entry.get("column_pairs", _column_pairs, ()),
        "column_groups": tuple(ColumnGroup(group) for group in
                               entry.get("column_groups", _groups, ())),
        "virtual_columns": entry.get("virtual_columns", _virtual_columns, ()),
        "shard": entry.get("shard", _shard, None),
        "joins": entry.get("joins", _joins, ()),
        "merge_part": entry.get("merge_part", Field.boolean, False),
        # a lake target's table (shared.lakes): how it holds the changes, its partitions
        "mode": entry.get("mode", lambda f: f.choice(["mirror", "changelog"]), ""),
        "partition_by": entry.get("partition_by", _columns, ()),
    }
    columns = entry.field("columns")
    if columns is not None:
        mode_columns = _column_mode(columns)
        if mode_columns is not MISSING:
            options["column_mode"], options["columns"] = mode_columns
            clash = _renamed_onto_included(options["column_pairs"], *mode_columns) or \
                _excluded_key(options["key_columns"], *mode_columns)
            if clash:
                columns.fail(clash)
    return options if len(entry.issues.items) == before else None


def _column_mode(item: Field) -> Any:
    """``columns: {include: [...]}`` or ``columns: {exclude: [...]}``."""
    entry = item.mapping()
    if entry is None:
        return MISSING
    include = entry.get("include", _columns, None)
    exclude = entry.get("exclude", _columns, None)
    entry.close()
    if include is not None and exclude is not None:
        return item.fail("give either include or exclude, not both")
    if exclude is not None:
        return ColumnMode.EXCLUDE, exclude
    return ColumnMode.INCLUDE, include or ()


def _renamed_onto_included(pairs: tuple[ColumnPair, ...], mode: ColumnMode,
                           columns: tuple[str, ...]) -> str | None:
    """A rename onto the name of a column the pair includes as it is: both would be written
    to that target column, one value over the other (whether a column the pair does not
    list collides is known only from the source's table: checked on its table map)."""
    if mode is not ColumnMode.INCLUDE:
        return None
    renamed = {pair.source.lower() for pair in pairs}
    kept = {name.lower(): name for name in columns if name.lower() not in renamed}
    listed = {name.lower() for name in columns}
    for pair in pairs:
        if pair.target.lower() in kept and pair.source.lower() in listed:
            return (f"column {kept[pair.target.lower()]} is included, and column_pairs maps "
                    f"{pair.source} to that name too: one would overwrite the other in every "
                    f"row; map {pair.source} to another name, or map or leave out "
                    f"{kept[pair.target.lower()]}")
    return None


def _excluded_key(key_columns: Any, mode: ColumnMode, columns: tuple[str, ...]) -> str | None:
    """A column the pair excludes that its ``key_columns`` name: a row's key is always
    written (it finds the target's row), so the exclusion would not hold."""
    if mode is not ColumnMode.EXCLUDE or key_columns is MISSING:
        return None
    keys = {name.lower() for name in key_columns}
    excluded = [name for name in columns if name.lower() in keys]
    if not excluded:
        return None
    return (f"column(s) {', '.join(excluded)} are excluded, and key_columns name them: "
            "the columns a row is found by are always written to the target, so they "
            "cannot be left out; take them out of exclude, or key the pair by other columns")


def _column_pairs(item: Field) -> Any:
    pairs = []
    for child in item.items():
        entry = child.mapping()
        if entry is None:
            continue
        source = entry.get("source", lambda f: f.string(column_name), required=True)
        target = entry.get("target", lambda f: f.string(column_name), required=True)
        entry.close()
        if MISSING not in (source, target):
            pairs.append(ColumnPair(source, target))
    sources = [pair.source for pair in pairs]
    if len(set(sources)) != len(sources):
        return item.fail("a source column is mapped twice")
    targets = [pair.target.lower() for pair in pairs]  # MySQL's column names ignore case
    if len(set(targets)) != len(targets):
        return item.fail("two source columns are mapped to one target column (one value "
                         "would overwrite the other in every row)")
    return tuple(pairs)


def _groups(item: Field) -> Any:
    groups = []
    for child in item.items():
        columns = _columns(child)
        if columns is not MISSING and len(columns) < 2:
            child.fail("a column group needs at least two columns")
        elif columns is not MISSING:
            groups.append(columns)
    return groups


def _virtual_columns(item: Field) -> Any:
    columns = []
    for child in item.items():
        entry = child.mapping()
        if entry is None:
            continue
        name = entry.get("name", lambda f: f.string(column_name), required=True)
        value = entry.get("value", Field.string, None)
        expr = entry.get("expression", lambda f: f.string(expression), None)
        processor = entry.get("processor", lambda f: f.string(callable_name), None)
        entry.close()
        # count what is written, not what was read: a bad expression is still one filler
        if sum(entry.has(key) for key in ("value", "expression", "processor")) != 1:
            child.fail("give exactly one of value, expression or processor")
        elif name is not MISSING:
            columns.append(VirtualColumn(name, value, expr, processor))
    names = [column.name.lower() for column in columns]  # MySQL's column names ignore case
    if len(set(names)) != len(names):
        return item.fail("two virtual columns fill one target column (column names ignore "
                         "case): each would give the row that column; give each its own "
                         "name")
    return tuple(columns)


def _table_name(value: str) -> str | None:
    schema, dot, table = value.partition(".")
    if dot and column_name(schema) is None and column_name(table) is None:
        return None
    return f'expected schema.table, got "{value}"'


def _joins(item: Field) -> Any:
    """``joins: [{table: shop.details, by: id, key: customer_id, columns: [...]}]``."""
    if not item.is_list():
        return item.expected("a list of joins")
    joins = []
    for child in item.items():
        entry = child.mapping()
        if entry is None:
            continue
        table = entry.get("table", lambda f: f.string(_table_name), required=True)
        by = entry.get("by", lambda f: f.string(column_name), required=True)
        key = entry.get("key", lambda f: f.string(column_name), required=True)
        # listed: a join without them took every column of the joined row, its key over
        # the row's own, and a column the source table gained later stopped being joined
        columns = entry.get("columns", _columns, required=True)
        missing = entry.get("missing", lambda f: f.choice(["drop", "keep"]), "drop")
        entry.close()
        if MISSING not in (table, by, key, columns, missing):
            joins.append(LookupJoin(table, by, key, columns, missing))
    return tuple(joins)


def _shard(item: Field) -> Any:
    entry = item.mapping()
    if entry is None:
        return MISSING
    column = entry.get("column", lambda f: f.string(column_name), required=True)
    algorithm = entry.get("algorithm", lambda f: f.choice(["modulo", "quotient"]), "modulo")
    balance = entry.get("table_balance_size", lambda f: f.integer(1), 1)
    entry.close()
    if column is MISSING:
        return MISSING
    return ShardRule(column, ShardAlgorithm(algorithm.upper()), balance)
