"""Rows of setl's own tables (schema ``retl``) in the stream, as Select passes them on:
free-door requests, this pipeline's watermarks, a two-way channel's loop marks and the
opposite pipeline's DDL intents."""

from __future__ import annotations

from node.changes import ChangeType, RowChange
from node.extract.decode import TableSchema, decode_rows
from node.select.framing import ROWS
from node.select.statements import DropEchoes
from shared.retl import BUFFER_TABLE, INTENT_TABLE, MARK_TABLE, SIGNAL_TABLE


def system_rows(name: tuple[str, str], layout: TableSchema, data: bytes, checksum: bool,
                pipeline_id: str, echoes: DropEchoes) -> list[RowChange]:
    """Rows of retl_buffer (free-door requests: inserts without a CHANNEL_ID; rows with one
    are central requests, served by their pipeline's polling), of retl_signal (this
    pipeline's watermarks) and of retl_mark; retl_ddl's intents, made and deleted, go to
    ``echoes``."""
    kind = ROWS[data[5]]
    images = decode_rows(layout, data, checksum)
    if name == SIGNAL_TABLE:
        if kind is not ChangeType.INSERT:
            return []
        return [RowChange(*SIGNAL_TABLE, kind, ("ID",), None, after) for _, after in images
                if after and after.get("PIPELINE_ID") == pipeline_id]
    if name == BUFFER_TABLE:
        if kind is not ChangeType.INSERT:
            return []
        return [RowChange(*BUFFER_TABLE, kind, ("ID",), None, dict(after))
                for _, after in images if after and not after.get("CHANNEL_ID")]
    if name == INTENT_TABLE:
        for before, after in images:
            if after and kind is ChangeType.INSERT:
                echoes.intent(after)
            elif before and kind is ChangeType.DELETE:
                echoes.done(before)
        return []
    return [RowChange(*MARK_TABLE, kind, (), before, after) for before, after in images]
