"""What a pause on a duplicate of a unique key says (a batch the target refused with
1062/1169 at every try): the target holds the value under another key, out of step with
the source there, and how to mend it.

Where the table's copy is unfinished (a snapshot or free-door requests), the stream's
upserts into it remove such a target row and ask it again (:mod:`node.target.mysql.
displaced`), so this pause is for a table no copy mends: a row put there by another writer,
or left from before, which setl does not overwrite on its own. Not so in a two-way
pipeline: its stream looks nothing up and it takes no copy nor repair (its rows read from
one side could not be told from the other side's newer writes), so its pause says to free
the value on the target by a statement there, which crosses to the other side."""

from __future__ import annotations

import re
from collections.abc import Callable

DUPLICATE = frozenset({1062, 1169})  # ER_DUP_ENTRY, ER_DUP_UNIQUE
_TABLE = re.compile(r"\btable (`?[^\s:]+`?\.`?[^\s:]+`?): ")


# the source tables the pipeline's pairs map to a target table (datasource, schema, table)
Sources = Callable[[tuple[str, str, str]], list[tuple[str, str]]]


def explained(pipeline_id: str, text: str, target: str = "",
              sources: Sources | None = None, two_way: bool = False) -> str:
    """The target's error (``table s.t: Duplicate entry '5' for key 'slot'``) with what is
    wrong and what to do, naming the channel and the table (the commands take the source
    table: ``sources`` maps the target table back, where a pair renames it); ``two_way``:
    the pipeline is one of a two-way channel (no copy, no repair)."""
    channel = pipeline_id.rsplit(".", 1)[0]
    found = _TABLE.search(text)
    table = found.group(1) if found else "SCHEMA.TABLE"
    named: list[tuple[str, str]] = []
    if found and sources is not None and "." in table:
        try:
            named = sources((target, *table.split(".", 1)))  # type: ignore[arg-type]
        except Exception:  # (for a message only: the target's name then)
            named = []
    source = ".".join(named[0]) if named else table
    also = (f" (and so for {', '.join('.'.join(one) for one in named[1:])}, which feed it "
            "too)") if len(named) > 1 else ""
    if two_way:
        return (f"{text}. The target table {table} already holds that value of the unique "
                "key under another key (written there by a user, or left from before), and "
                "setl does not overwrite a row of another key on its own. Free the value on "
                "the target: give the target row holding it another value of that key, by a "
                "statement on the target (it crosses to the source side as any write there "
                "does; a delete would remove the row on both sides); then resume the "
                "channel, and the paused batch writes its row. A two-way channel takes no "
                "copy nor repair (setl snapshot and setl verify --repair are refused: rows "
                "read from one side cannot be told from the other side's newer writes); "
                "setl verify "
                f"{channel} --table {source}{also} shows the rows that differ")
    return (f"{text}. The target table {table} already holds that value of the unique key "
            "under another key: it is out of step with the source there (a row written by "
            "another writer, or left from before), and setl does not overwrite a row of "
            f"another key on its own. Copy the table: setl snapshot {channel} --table "
            f"{source}{also} (while a copy of the table runs, the stream's writes into it "
            "remove the target row in their way and copy it again from the source), or mend "
            f"the rows: setl verify {channel} --table {source} --repair, or delete the "
            "target row holding that value; then resume the channel")
