"""What a pause on a duplicate of a unique key says (a batch the target refused with
1062/1169 at every try): the target holds the value under another key, out of step with
the source there, and how to mend it.

Where the table's copy is unfinished (a snapshot or free-door requests), the stream's
upserts into it remove such a target row and ask it again (:mod:`node.target.mysql.
displaced`), so this pause is for a table no copy mends: a row put there by another writer,
or left from before, which setl does not overwrite on its own."""

from __future__ import annotations

import re

DUPLICATE = frozenset({1062, 1169})  # ER_DUP_ENTRY, ER_DUP_UNIQUE
_TABLE = re.compile(r"\btable (`?[^\s:]+`?\.`?[^\s:]+`?): ")


def explained(pipeline_id: str, text: str) -> str:
    """The target's error (``table s.t: Duplicate entry '5' for key 'slot'``) with what is
    wrong and what to do, naming the channel and the table."""
    channel = pipeline_id.rsplit(".", 1)[0]
    found = _TABLE.search(text)
    table = found.group(1) if found else "SCHEMA.TABLE"
    return (f"{text}. The target table {table} already holds that value of the unique key "
            "under another key: it is out of step with the source there (a row written by "
            "another writer, or left from before), and setl does not overwrite a row of "
            f"another key on its own. Copy the table: setl snapshot {channel} --table "
            f"{table} (while a copy of the table runs, the stream's writes into it remove the "
            "target row in their way and copy it again from the source), or mend the rows: setl "
            f"verify {channel} --table {table} --repair, or delete the target row holding "
            "that value; then resume the channel")
