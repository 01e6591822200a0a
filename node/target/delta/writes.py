"""How a batch's rows are written to a Delta table: appended, or merged by key into a mirror;
and when an append of a mirror's rows does what the MERGE would.
(:class:`node.target.delta.loader.LakeLoader` makes each write one commit with the batch's
position.)
"""

from __future__ import annotations

from typing import Any

from node.target.delta import units
from shared.lakes import writer_properties


def append(table: Any, rows: Any, properties: Any) -> None:
    """The rows appended (None: an empty commit, carrying only its properties)."""
    from deltalake import write_deltalake

    if rows is None:
        import pyarrow as pa

        rows = pa.schema(table.schema().to_arrow()).empty_table()
    write_deltalake(table, rows, mode="append", schema_mode="merge",
                    writer_properties=writer_properties(), commit_properties=properties)


def merge(table: Any, rows: Any, keys: tuple[str, ...], properties: Any) -> None:
    """One MERGE of a batch's rows by key, or an append where the rows are new keys only
    (:func:`new_keys_only`). The rows are in memory already, so delta-rs takes them as they
    are (``streamed_exec=False``) and reads their keys' range first: files whose statistics
    lie outside it are not read (streamed, every file is scanned; a file is only rewritten
    where a key matched, either way). Updates of recent rows: 0.099 → 0.037 CPU-s a MERGE
    into 100k rows; of random keys: 0.266 → 0.234. A row flagged NULL (written after its
    key's delete) matches none and is inserted: its key's delete removes every row of the
    key, a duplicate too."""
    if new_keys_only(table, rows, keys):
        append(table, rows.drop_columns([units.DELETE_FLAG]), properties)
        return
    on = " AND ".join(f"t.{_quoted(key)} = s.{_quoted(key)}" for key in keys)
    flag = f"s.{_quoted(units.DELETE_FLAG)}"
    insert = f"NOT {flag}"
    if rows.column(units.DELETE_FLAG).null_count:  # rows written after their key's delete
        on, insert = f"{on} AND {flag} IS NOT NULL", f"({flag} IS NULL OR NOT {flag})"
    (table.merge(rows, on, source_alias="s", target_alias="t", merge_schema=True,
                 streamed_exec=False, writer_properties=writer_properties(),
                 commit_properties=properties)
     .when_matched_delete(predicate=flag)
     .when_matched_update_all(predicate=f"NOT {flag}", except_cols=[units.DELETE_FLAG])
     .when_not_matched_insert_all(predicate=insert, except_cols=[units.DELETE_FLAG])
     .execute())


def held_schema(table: Any) -> Any:
    """The Arrow schema of the columns a Delta table holds."""
    import pyarrow as pa

    return pa.schema(table.schema().to_arrow())


def null_key(rows: Any, keys: tuple[str, ...]) -> str:
    """The first key column in which one of a mirror's rows is NULL ('' when none is)."""
    return next((key for key in keys if rows.column(key).null_count), "")


def new_keys_only(table: Any, rows: Any, keys: tuple[str, ...]) -> bool:
    """Whether a mirror's rows are inserts of keys the table cannot hold, so that appending
    them is what the MERGE would do: no row deletes, and the table has no file, or the rows'
    values of an integer key column all lie above (or all below) every file's, by the
    statistics in the table's log (a bound on what a file holds; a file without them, or a
    key of another type — delta-rs cuts text and DATETIME(6) statistics short — and it is a
    MERGE). Rows with new auto-increment keys, a table's first copy: a MERGE rewrites every
    file a key's range touches and costs about the table's size; an append, the rows'."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if rows.num_rows == 0 or pc.any(rows.column(units.DELETE_FLAG)).as_py():
        return False
    held = held_schema(table)
    if any(held.field(field.name).type != field.type for field in rows.schema
           if field.name in held.names):  # a MERGE casts a column of another type
        return False
    files = pa.table(table.get_add_actions(flatten=True))
    if files.num_rows == 0:
        return True
    for key in keys:
        column, low, high = rows.column(key), f"min.{key}", f"max.{key}"
        if not pa.types.is_integer(column.type) or low not in files.column_names or \
                high not in files.column_names:
            continue
        lows, highs = files.column(low), files.column(high)
        if lows.null_count or highs.null_count or not pa.types.is_integer(lows.type):
            continue  # a file without statistics of the key: it may hold any
        found = pc.min_max(column)  # (NULLs left out: a NULL key matches no row either)
        if found["min"].as_py() is None:
            continue
        if found["min"].as_py() > pc.max(highs).as_py() or \
                found["max"].as_py() < pc.min(lows).as_py():
            return True
    return False


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
