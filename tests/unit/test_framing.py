"""node/select/framing.py: events Select cannot read stop the pipeline, naming the event,
its position and what to do; none is stepped over."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from node.select import framing
from shared.errors import SourceError
from shared.model import BinlogPosition


def event(kind: int, body: bytes = b"", next_pos: int = 500) -> bytes:
    """A stream packet: the OK byte, the 19-byte event header, the body."""
    header = (0).to_bytes(4, "little") + bytes([kind]) + (1).to_bytes(4, "little") + \
        (19 + len(body)).to_bytes(4, "little") + next_pos.to_bytes(4, "little") + b"\0\0"
    return b"\0" + header + body


class Packets:
    def __init__(self, *packets: bytes) -> None:
        self.packets = list(packets)

    def next(self) -> bytes:
        return self.packets.pop(0)


def reader() -> SimpleNamespace:
    return SimpleNamespace(_domains={}, start=BinlogPosition("binlog.000001", 4, gtid=""),
                           _tables={}, row_bytes={}, _stop=threading.Event(),
                           source=SimpleNamespace(name="src"),
                           _position=lambda: "binlog.000001:400")


@pytest.mark.parametrize("kind, says", [
    (26, "an INCIDENT event"),  # LOST_EVENTS: a native replica stops with 1590
    (38, "an XA PREPARE event"),
    (165, "a compressed query event"),
])
def test_an_event_select_cannot_read_stops_it_where_it_is(kind: int, says: str) -> None:
    with pytest.raises(SourceError) as raised:
        framing.frame(reader(), Packets(event(kind, b"\x01\x00\x0bLOST_EVENTS")))
    message = str(raised.value)
    assert message.startswith(f"source src wrote {says}")
    assert "at binlog.000001:400" in message and "copy the changed tables again" in message
