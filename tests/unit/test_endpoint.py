"""A server asking for the password in clear text gets nothing over plain TCP; a source with
``tls:`` is never reached without TLS; a host outside the allowlist is never reached.

The server here is a small fake speaking the MySQL handshake on 127.0.0.1: it offers no TLS,
then asks for ``mysql_clear_password`` (or ``dialog``) and records every byte it receives."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pymysql
import pytest

from node.select.binlog import BinlogReader
from shared import confinement
from shared.confinement import Confinement
from shared.devcluster import make_certificates
from shared.endpoint import connect, connection_settings
from shared.errors import DatabaseHostError, SourceError
from shared.model import BinlogPosition, DataSource, TlsOptions
from shared.secrets import SecretRef

PASSWORD = "pw-that-must-not-travel"
# CLIENT_LONG_PASSWORD | PROTOCOL_41 | TRANSACTIONS | SECURE_CONNECTION | PLUGIN_AUTH
CAPABILITIES = 0x1 | 0x200 | 0x2000 | 0x8000 | 0x80000


def _packet(seq: int, payload: bytes) -> bytes:
    return struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload


def _read_packet(conn: socket.socket) -> bytes:
    header = conn.recv(4, socket.MSG_WAITALL)
    if len(header) < 4:
        return b""
    size = int.from_bytes(header[:3], "little")
    return conn.recv(size, socket.MSG_WAITALL) if size else b""


class FakeServer:
    """One connection: a handshake naming ``first_plugin``, then an auth switch to
    ``switch_to`` (None: no switch, a packet of more data for the first plugin, as a server
    sends that stays with it); whatever the client sends is kept in ``received``."""

    def __init__(self, first_plugin: bytes, switch_to: bytes | None) -> None:
        self.first_plugin, self.switch_to = first_plugin, switch_to
        self.received = b""
        self.conn: socket.socket | None = None
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(20)
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        self.conn = conn
        with conn:
            try:
                self._converse(conn)
            except OSError:
                pass  # the client hung up

    def _converse(self, conn: socket.socket) -> None:
        conn.settimeout(20)
        salt = b"abcdefghijklmnopqrst"
        greeting = (b"\x0a" + b"5.7.99-fake\0" + struct.pack("<I", 7) + salt[:8] + b"\0"
                    + struct.pack("<H", CAPABILITIES & 0xFFFF) + b"\x21"
                    + struct.pack("<H", 2) + struct.pack("<H", CAPABILITIES >> 16)
                    + bytes([len(salt) + 1]) + b"\0" * 10 + salt[8:] + b"\0"
                    + self.first_plugin + b"\0")
        conn.sendall(_packet(0, greeting))
        self.received += _read_packet(conn)
        if self.switch_to is None:
            conn.sendall(_packet(2, b"\x01"))  # more data for the plugin named upfront
        else:
            switch = b"\xfe" + self.switch_to + b"\0" + \
                (b"\x04Password: " if self.switch_to == b"dialog" else salt + b"\0")
            conn.sendall(_packet(2, switch))
        while data := conn.recv(4096):
            self.received += data

    def close(self) -> None:
        """Ends the conversation (the client may have given up without a word)."""
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes an accept() still waiting
        except OSError:
            pass
        self.listener.close()
        if self.conn is not None:
            try:
                self.conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(20)


@pytest.fixture
def password_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecretRef]:
    folder = tmp_path_factory.mktemp("secrets")
    (folder / "pw").write_text(PASSWORD)
    before = confinement.current()
    confinement.confine(Confinement((folder,)))
    yield SecretRef(f"file:{folder / 'pw'}")
    confinement.confine(before)


def refused(server: FakeServer, source: DataSource) -> str:
    """The error of connecting to the fake server, which must not have got the password."""
    try:
        with pytest.raises(SourceError) as caught:
            connect(source)
    finally:
        server.close()
    assert PASSWORD.encode() not in server.received
    return str(caught.value)


@pytest.mark.parametrize("first, switch", [
    (b"mysql_clear_password", b"mysql_clear_password"),
    (b"mysql_native_password", b"mysql_clear_password"),
    (b"mysql_native_password", b"dialog"),
    (b"mysql_clear_password", None),
])
def test_no_password_in_clear_over_plain_tcp(password_file: SecretRef, first: bytes,
                                            switch: bytes | None) -> None:
    server = FakeServer(first, switch)
    message = refused(server, DataSource("shady", "127.0.0.1", server.port, "setl",
                                         password_file))
    assert server.received, "the fake server got no handshake answer: the test proves nothing"
    assert f"asked for the password in clear text ({(switch or first).decode()}) over a " \
           "connection without verified TLS; setl never sends it so" in message
    assert "tls: {ca: ...}" in message


def test_the_binlog_stream_gets_no_password_in_clear_either(password_file: SecretRef) -> None:
    """Select's stream is python-mysql-replication's own pymysql connection: it is made
    with the same settings, so the same server gets nothing from it."""
    server = FakeServer(b"mysql_native_password", b"mysql_clear_password")
    reader = BinlogReader(DataSource("shady", "127.0.0.1", server.port, "setl", password_file),
                          1_234_567, BinlogPosition("mysql-bin.000001", 4),
                          lambda schema, table: True, lambda schema: True, ddl=False)
    try:
        reader.begin()
        with pytest.raises(SourceError) as caught:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                reader.take(0.5)  # raises the error that ended the reader
    finally:
        reader.stop()
        server.close()
    assert server.received, "the fake server got no handshake answer: the test proves nothing"
    assert PASSWORD.encode() not in server.received
    assert str(caught.value).startswith("binlog of shady failed at mysql-bin.000001:4: the "
                                        f"server at 127.0.0.1:{server.port} asked for the "
                                        "password in clear text (mysql_clear_password)")


def test_the_fake_server_does_read_a_password_pymysql_would_send(
        password_file: SecretRef) -> None:
    """The control: plain pymysql answers the same server with the password itself."""
    server = FakeServer(b"mysql_native_password", b"mysql_clear_password")
    settings = connection_settings(DataSource("shady", "127.0.0.1", server.port, "setl",
                                              password_file))
    settings["auth_plugin_map"] = {}
    try:
        with pytest.raises(pymysql.MySQLError):
            pymysql.connect(**{**settings, "read_timeout": 1})
    finally:
        server.close()
    assert PASSWORD.encode() in server.received


def test_a_tls_source_is_never_reached_without_tls(password_file: SecretRef,
                                                  tmp_path_factory: pytest.TempPathFactory
                                                  ) -> None:
    server = FakeServer(b"mysql_native_password", b"mysql_clear_password")
    certificates = make_certificates(tmp_path_factory.mktemp("tls"))
    source = DataSource("tls-only", "127.0.0.1", server.port, "setl", password_file,
                        tls=TlsOptions(ca=str(certificates.ca)))
    assert refused(server, source) == (
        f"source tls-only has tls: but the server at 127.0.0.1:{server.port} offers no TLS, "
        "so setl did not log in. Enable TLS on the server (ssl_ca, ssl_cert, ssl_key in its "
        "my.cnf), or point the source at a server that has it")
    assert server.received == b"", "the client answered the handshake of a server without TLS"


def test_hosts_outside_the_allowlist_are_refused_before_connecting(
        password_file: SecretRef) -> None:
    listener = socket.create_server(("127.0.0.1", 0))  # would accept, never gets a client
    port = listener.getsockname()[1]
    before = confinement.current()
    try:
        for allowed, ok in ((("10.0.0.0/8",), False), (("db.internal",), False),
                            (("127.0.0.0/8",), True), (("LOCALHOST",), True)):
            confinement.confine(Confinement(before.secret_dirs, database_hosts=allowed))
            host = "localhost" if "LOCALHOST" in allowed else "127.0.0.1"
            source = DataSource("s", host, port, "setl", password_file)
            if ok:
                assert connection_settings(source)["host"] == host
                continue
            with pytest.raises(DatabaseHostError) as caught:
                connection_settings(source)
            assert str(caught.value) == (
                f"source s: host 127.0.0.1 is not among the database hosts this machine may "
                f"connect to ({allowed[0]}; its 'security' settings: database_hosts); use an "
                "allowed host, or have the operator add it")
    finally:
        confinement.confine(before)
        listener.close()
