"""Virtual columns and processors writing a target's key from more than the source's key
(read at ``setl apply``, beside :func:`shared.tablekeys.keyless_tables`).

A pair gathering tables into one target moves one table's keys with a virtual column
(``id: id + 1000000``); an update or delete finds its row by that column computed from the
before image (:func:`node.extract.mapping._filled_key`). A free-door or ``verify --repair``
``D`` carries the key alone: an expression reading another column (``concat(region, id)``)
cannot be computed for it, and the node pauses the pipeline at that request, saying so. The
stream's full before images compute it, so such a definition is not refused: the apply
notes it. So for a pair's processor (or a virtual column's writing a key column), whose
code apply cannot read: a ``D`` gives it the key alone, and one computing the key from
another column fails there (``KeyError``: the pipeline pauses at that request, on each
resume) or, reading it with a default, names another row — every such pair is noted."""

from __future__ import annotations

from collections.abc import Mapping

from shared import expr
from shared.model import Pipeline, pairs_taking


def moved_key_notes(pipeline: Pipeline,
                    keys: Mapping[tuple[str, str], tuple[str, ...] | None]) -> list[str]:
    """One note per pair whose expression virtual column writes a target key column (the
    table's key, or its ``key_columns``, as the pair renames them) and reads columns that
    are not the key's; ``keys``: the source's tables and their row keys."""
    notes: dict[tuple[int, str], str] = {}
    for (schema, table), columns in sorted(keys.items()):
        for pair in pairs_taking(pipeline.pairs, schema, table, lambda pair: pair):
            key = pair.key_columns or columns or ()
            renames = {column.source.lower(): column.target for column in pair.column_pairs}
            target_keys = {renames.get(name.lower(), name).lower() for name in key}
            own = {name.lower() for name in key}
            for filler in pair.virtual_columns:
                if filler.expression is None or filler.name.lower() not in target_keys or \
                        (id(pair), filler.name) in notes:
                    continue
                try:
                    read = expr.columns_read(expr.parse(filler.expression))
                except expr.ExpressionError:
                    continue  # (refused where the definition is read)
                more = sorted(name for name in read if name.lower() not in own)
                if more:
                    notes[(id(pair), filler.name)] = (
                        f"pipeline {pipeline.name} pair {pair.source}: virtual column "
                        f"{filler.name} writes the target's key and its expression reads "
                        f"{', '.join(more)}, which the key of {schema}.{table} "
                        f"({', '.join(key)}) does not hold: a free-door or verify --repair "
                        "'D' (the key alone) cannot compute it, and the pipeline pauses at "
                        "such a request. Write the expression from the key columns alone "
                        "(e.g. id + 1000000), or delete such rows on the target by hand")
    return list(notes.values())


def processor_key_notes(pipeline: Pipeline,
                        keys: Mapping[tuple[str, str], tuple[str, ...] | None]) -> list[str]:
    """One note per pair whose code may compute the target's key (a pair's ``processor``,
    or a virtual column's writing a key column), on a keyed table: a free-door or verify
    --repair ``D`` gives it the key alone as its before image, so what it reads beside the
    key is not there (the pipeline pauses at that request: ``KeyError``), or, read with a
    default, names another row or none. What the code reads is not known at apply: noted
    for every such pair (a two-way channel, which takes no request, is not asked)."""
    notes: dict[int, str] = {}
    for (schema, table), columns in sorted(keys.items()):
        if columns is None:  # (a keyless table's requests are refused: no D reaches it)
            continue
        for pair in pairs_taking(pipeline.pairs, schema, table, lambda pair: pair):
            if id(pair) in notes:
                continue
            key = pair.key_columns or columns
            renames = {column.source.lower(): column.target for column in pair.column_pairs}
            target_keys = {renames.get(name.lower(), name).lower() for name in key}
            code = [f"processor {pair.processor}"] if pair.processor else []
            code += [f"virtual column {filler.name} (processor {filler.processor})"
                     for filler in pair.virtual_columns
                     if filler.processor and filler.name.lower() in target_keys]
            if code:
                notes[id(pair)] = (
                    f"pipeline {pipeline.name} pair {pair.source}: {' and '.join(code)} "
                    f"{'get' if len(code) > 1 else 'gets'} a free-door or verify --repair "
                    f"'D' with the key alone ({', '.join(key)} of {schema}.{table}) as its "
                    "before image: where it computes the target's key from another column, "
                    "it cannot for such a request, and the pipeline pauses there (KeyError, "
                    "on each resume), or, reading the column with a default, deletes "
                    "another key's row or none. Compute the key from the key columns alone "
                    "(and leave a D of a column it lacks as it is), or delete such rows on "
                    "the target by hand and remove the request from retl.retl_pending and "
                    "retl.retl_buffer")
    return list(notes.values())
