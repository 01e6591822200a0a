"""node/target/mysql/facts.py: a read of a target table's facts that the target never
answers does not hold the pipeline's stop: closing the facts ends it at once.

The target here is a small fake on 127.0.0.1 speaking the MySQL handshake: it lets the
client in, answers what the client sets up, and goes silent on the first query of
``information_schema``."""

from __future__ import annotations

import socket
import struct
import threading

from node.target.mysql.facts import TargetFacts
from shared.errors import LoadError
from shared.model import DataSource
from tests.unit.test_endpoint import CAPABILITIES, _packet, _read_packet

OK = b"\x00\x00\x00\x02\x00\x00\x00"  # no rows, autocommit, no warnings


class SilentTarget:
    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(20)
        self.port = self.listener.getsockname()[1]
        self.asked = threading.Event()  # the facts' query came, and got no answer
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            self._converse()
        except OSError:  # the client went, or the test gave up on it
            pass

    def _converse(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.settimeout(20)
            salt = b"abcdefghijklmnopqrst"
            conn.sendall(_packet(0, b"\x0a10.11.99-fake\0" + struct.pack("<I", 7) + salt[:8]
                                 + b"\0" + struct.pack("<H", CAPABILITIES & 0xFFFF) + b"\x21"
                                 + struct.pack("<H", 2) + struct.pack("<H", CAPABILITIES >> 16)
                                 + bytes([len(salt) + 1]) + b"\0" * 10 + salt[8:] + b"\0"
                                 + b"mysql_native_password\0"))
            _read_packet(conn)
            conn.sendall(_packet(2, OK))
            while packet := _read_packet(conn):
                if b"information_schema" in packet:
                    self.asked.set()
                    conn.settimeout(60)  # (longer than the test waits for the stop)
                    while conn.recv(4096):  # silent, until the client goes
                        pass
                    return
                conn.sendall(_packet(1, OK))  # whatever it sets up

    def close(self) -> None:
        self.listener.close()
        self.thread.join(20)


def test_closing_ends_a_read_the_silent_target_never_answers() -> None:
    target = SilentTarget()
    facts = TargetFacts({"t": DataSource(name="t", host="127.0.0.1", port=target.port,
                                         user="setl")})
    failed: list[BaseException] = []

    def read() -> None:  # an E/T worker's
        try:
            facts.of(("t", "shop", "orders"))
        except BaseException as exc:
            failed.append(exc)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    try:
        assert target.asked.wait(20), "the facts' query never reached the fake target"
        closing = threading.Thread(target=facts.close, daemon=True)  # the pipeline's stop
        closing.start()
        closing.join(10)
        worker.join(10)
        assert not closing.is_alive() and not worker.is_alive(), \
            "the read still waits on the silent target, and the stop on it"
        assert len(failed) == 1 and isinstance(failed[0], LoadError), failed
        assert "cannot read the columns and keys of shop.orders" in str(failed[0])
    finally:
        target.close()
