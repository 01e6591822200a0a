"""A server asking for the password in clear text gets nothing over plain TCP; a source with
``tls:`` is never reached without TLS; a host outside the allowlist is never reached.

The server here is a small fake speaking the MySQL handshake on 127.0.0.1: it offers no TLS,
then asks for ``mysql_clear_password`` (or ``dialog``) and records every byte it receives."""

from __future__ import annotations

import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from node.select.binlog import BinlogReader
from shared import confinement, lakes
from shared.confinement import Confinement, Credential
from shared.endpoint import connect, connection_settings, missing_right
from shared.errors import ConfigError, DatabaseHostError, LoadError, SourceError
from shared.model import BinlogPosition, DataSource, TlsOptions
from shared.secrets import SecretRef
from tests.devcluster import Certificates, make_certificates

PASSWORD = "pw-that-must-not-travel"
# CLIENT_LONG_PASSWORD | PROTOCOL_41 | TRANSACTIONS | SECURE_CONNECTION | PLUGIN_AUTH
CAPABILITIES = 0x1 | 0x200 | 0x2000 | 0x8000 | 0x80000
CLIENT_SSL = 0x800


def _packet(seq: int, payload: bytes) -> bytes:
    return struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload


def _read_packet(conn: socket.socket) -> bytes:
    header = _exactly(conn, 4)
    if len(header) < 4:
        return b""
    return _exactly(conn, int.from_bytes(header[:3], "little"))


def _exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size and (part := conn.recv(size - len(data))):  # (TLS: no flags)
        data += part
    return data


class FakeServer:
    """One connection: a handshake naming ``first_plugin``, then an auth switch to
    ``switch_to`` (None: no switch, a packet of more data for the first plugin, as a server
    sends that stays with it); whatever the client sends is kept in ``received``."""

    def __init__(self, first_plugin: bytes, switch_to: bytes | None,
                 tls: Certificates | None = None, more: bytes = b"\x01") -> None:
        self.first_plugin, self.switch_to = first_plugin, switch_to
        self.tls, self.more = tls, more  # TLS offered (with this certificate); extra data
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
        capabilities = CAPABILITIES | (CLIENT_SSL if self.tls else 0)
        greeting = (b"\x0a" + b"5.7.99-fake\0" + struct.pack("<I", 7) + salt[:8] + b"\0"
                    + struct.pack("<H", capabilities & 0xFFFF) + b"\x21"
                    + struct.pack("<H", 2) + struct.pack("<H", capabilities >> 16)
                    + bytes([len(salt) + 1]) + b"\0" * 10 + salt[8:] + b"\0"
                    + self.first_plugin + b"\0")
        conn.sendall(_packet(0, greeting))
        answer = _read_packet(conn)
        seq = 2
        if self.tls is not None and len(answer) == 32:  # an SSL request: TLS, then the answer
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.tls.server_cert, self.tls.server_key)
            conn = context.wrap_socket(conn, server_side=True)
            answer, seq = _read_packet(conn), 3
        self.received += answer
        if self.switch_to is None:
            conn.sendall(_packet(seq, self.more))  # more data for the plugin named upfront
        else:
            switch = b"\xfe" + self.switch_to + b"\0" + \
                (b"\x04Password: " if self.switch_to == b"dialog" else salt + b"\0")
            conn.sendall(_packet(seq, switch))
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


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def password_file(tmp_path_factory: pytest.TempPathFactory,
                  certificates: Certificates) -> Iterator[SecretRef]:
    folder = tmp_path_factory.mktemp("secrets")
    (folder / "pw").write_text(PASSWORD)
    before = confinement.current()
    # the certificates' folder is a secret directory too: tls: files are read only there
    confinement.confine(Confinement((folder, certificates.ca.parent)))
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
    assert "tls: {ca: ..., verify_identity: true}" in message


def stream_refused(server: FakeServer, password_file: SecretRef) -> str:
    """The error that ends Select's binlog stream to the fake server, which must have been
    answered and must not have got the password."""
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
    return str(caught.value)


def test_the_binlog_stream_gets_no_password_in_clear_either(password_file: SecretRef) -> None:
    """Select's stream is python-mysql-replication's own pymysql connection: it is made
    with the same settings, so the same server gets nothing from it."""
    server = FakeServer(b"mysql_native_password", b"mysql_clear_password")
    message = stream_refused(server, password_file)
    assert message.startswith("binlog of shady failed at mysql-bin.000001:4: the "
                                        f"server at 127.0.0.1:{server.port} asked for the "
                                        "password in clear text (mysql_clear_password)")


def test_the_fake_server_does_read_a_password_pymysql_would_send(
        password_file: SecretRef) -> None:
    """The control: plain pymysql answers the same server with the password itself."""
    server = FakeServer(b"mysql_native_password", b"mysql_clear_password")
    settings = connection_settings(DataSource("shady", "127.0.0.1", server.port, "setl",
                                              password_file))
    settings["auth_plugin_map"] = {}
    settings.pop("pinned")  # (setl's connection class takes it; PyMySQL's does not)
    try:
        with pytest.raises(pymysql.MySQLError):
            pymysql.connect(**{**settings, "read_timeout": 1})
    finally:
        server.close()
    assert PASSWORD.encode() in server.received


def test_a_tls_source_is_never_reached_without_tls(password_file: SecretRef,
                                                  certificates: Certificates) -> None:
    server = FakeServer(b"mysql_native_password", b"mysql_clear_password")
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


@pytest.mark.parametrize("first, switch, more, tls", [
    # the password in the first answer, over TLS the client did not verify (a scramble goes
    # instead, and the server switches to the plugin it named)
    (b"sha256_password", b"sha256_password", b"", True),
    # asked for after a switch: in clear over TLS, else encrypted with the server's key
    (b"mysql_native_password", b"sha256_password", b"", True),
    (b"mysql_native_password", b"sha256_password", b"", False),
    # caching_sha2_password's full authentication, the fast path's scramble refused
    (b"caching_sha2_password", None, b"\x01\x04", True),
    (b"caching_sha2_password", None, b"\x01\x04", False),
])
def test_no_password_to_a_server_not_verified_whatever_plugin_it_asks_for(
        password_file: SecretRef, certificates: Certificates, first: bytes,
        switch: bytes | None, more: bytes, tls: bool) -> None:
    server = FakeServer(first, switch, certificates if tls else None, more)
    message = refused(server, DataSource("shady", "127.0.0.1", server.port, "setl",
                                         password_file))
    assert server.received, "the fake server got no handshake answer: the test proves nothing"
    assert "which gives it the password itself, over a connection without verified TLS" in \
        message, message


@pytest.mark.parametrize("first, switch, more", [
    (b"sha256_password", None, b"\x01"),
    (b"caching_sha2_password", None, b"\x01\x04"),
])
def test_over_verified_tls_the_server_gets_the_password_it_asks_for(
        password_file: SecretRef, certificates: Certificates, first: bytes,
        switch: bytes | None, more: bytes) -> None:
    """The control: with the source's tls: CA verifying the server, the same server does get
    the password (so the refusals above are the verification's doing)."""
    server = FakeServer(first, switch, certificates, more)
    source = DataSource("trusted", "127.0.0.1", server.port, "setl", password_file,
                        tls=TlsOptions(ca=str(certificates.ca), verify_identity=True))
    try:
        with pytest.raises(SourceError):  # the fake server never says OK
            connect(source, read_timeout=2)
    finally:
        server.close()
    assert PASSWORD.encode() in server.received


@pytest.mark.parametrize("first, switch, more, said", [
    (b"sha256_password", None, b"\x01", "mysql_native_password"),  # a scramble answered
    (b"caching_sha2_password", None, b"\x01\x04", "verify_identity: true"),
])
def test_a_certificate_the_ca_signed_for_any_host_is_not_enough_for_the_password(
        password_file: SecretRef, certificates: Certificates, first: bytes,
        switch: bytes | None, more: bytes, said: str) -> None:
    """Without verify_identity a certificate the CA signed for another host would pass (a
    public CA signs anyone's): the password itself goes only where the name is checked."""
    server = FakeServer(first, switch, certificates, more)
    message = refused(server, DataSource("named-not", "127.0.0.1", server.port, "setl",
                                         password_file, tls=TlsOptions(ca=str(certificates.ca))))
    assert server.received and PASSWORD.encode() not in server.received
    assert said in message, message


def test_the_binlog_stream_sends_no_sha256_password_over_unverified_tls(
        password_file: SecretRef, certificates: Certificates) -> None:
    """Select's stream logs in through setl's connection class too: a server that names
    sha256_password first and offers TLS gets a scramble, not the password."""
    server = FakeServer(b"sha256_password", b"sha256_password", certificates, b"")
    assert "asked for sha256_password, which gives it the password itself" in \
        stream_refused(server, password_file)


def test_tls_files_outside_the_secret_directories_are_not_read(
        password_file: SecretRef, tmp_path: Path) -> None:
    """A CA the definition's author chose would make any server "verified": tls: files are
    read only from the operator's secret directories, and the refusal does not say whether
    the file exists."""
    for path in (tmp_path / "ca.pem", tmp_path / "missing.pem"):
        source = DataSource("chosen", "127.0.0.1", 3306, "setl", password_file,
                            tls=TlsOptions(ca=str(path)))
        with pytest.raises(ConfigError) as refused:
            connection_settings(source)
        assert str(refused.value) == (
            f"source chosen: tls ca {path}: this machine reads TLS files only under "
            f"{', '.join(str(d) for d in confinement.current().secret_dirs)} (its 'security' "
            "settings: secret_dirs), by absolute path; put the file there, or have the "
            "operator add its directory to secret_dirs")
        (tmp_path / "ca.pem").write_text("not read")


def test_a_password_goes_only_to_the_endpoints_it_is_bound_to(password_file: SecretRef,
                                                               tmp_path: Path) -> None:
    """With credentials configured, a reference is sent only to the hosts and ports bound to
    it; any other endpoint (a definition's author's own host, say) is refused before a
    connection is made, as is a reference bound to nothing."""
    before = confinement.current()
    bound = Credential(f"file:{Path(password_file.text[5:]).parent}/*", ("127.0.0.0/8",),
                       (3306,))
    try:
        confinement.confine(Confinement(before.secret_dirs, credentials=(bound,)))
        assert connection_settings(DataSource("ok", "127.0.0.1", 3306, "setl",
                                              password_file))["pinned"] == ("127.0.0.1",)
        for host, port in (("127.0.0.1", 3307), ("10.1.2.3", 3306)):
            with pytest.raises(DatabaseHostError) as caught:
                connection_settings(DataSource("elsewhere", host, port, "setl", password_file))
            assert str(caught.value) == (
                f"source elsewhere: password reference {password_file.text} may be sent only "
                f"to 127.0.0.0/8 port 3306 (its 'security' settings: credentials), not to "
                f"{host}:{port}; use the credentials of that server, or have the operator "
                "bind this one to it")
        other = tmp_path / "other"
        confinement.confine(Confinement((*before.secret_dirs, tmp_path), credentials=(bound,)))
        with pytest.raises(DatabaseHostError) as caught:
            connection_settings(DataSource("x", "127.0.0.1", 3306, "setl",
                                           SecretRef(f"file:{other}")))
        assert f"password reference file:{other} is bound to no database endpoint" in \
            str(caught.value)
    finally:
        confinement.confine(before)


def test_a_lake_credential_goes_only_to_the_store_it_is_bound_to(
        password_file: SecretRef) -> None:
    """An object store's credential is bound as a password is: to the store's endpoint (its
    AWS_ENDPOINT_URL, else AWS), so a definition cannot send the key to a store of its
    choosing; a store this version does not write is refused by name."""
    before = confinement.current()
    bound = Credential(password_file.text, ("127.0.0.0/8",), (9000,))
    secret = f"AWS_SECRET_ACCESS_KEY={password_file.text}"
    try:
        confinement.confine(Confinement(before.secret_dirs, credentials=(bound,)))
        lake = lakes.Lake("s3://b/x", ["AWS_ENDPOINT_URL=http://127.0.0.1:9000", secret])
        assert lake.options["AWS_SECRET_ACCESS_KEY"] == password_file.resolve()
        for storage in (["AWS_ENDPOINT_URL=https://evil.example:9000", secret], [secret]):
            with pytest.raises(DatabaseHostError) as caught:
                lakes.Lake("s3://b/x", storage, "lake")
            assert str(caught.value).startswith(
                f"lake target lake: AWS_SECRET_ACCESS_KEY: password reference "
                f"{password_file.text} may be sent only to 127.0.0.0/8 port 9000")
        with pytest.raises(ConfigError, match="writes lakes in local directories"):
            lakes.Lake("gs://b/x")
    finally:
        confinement.confine(before)


def test_the_address_checked_is_the_address_connected_to(
        password_file: SecretRef, monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS rebinding: a name that answers an allowed address for the check and another for
    the connection. setl resolves once and connects to the address it checked."""
    server = FakeServer(b"mysql_native_password", b"mysql_clear_password")
    answers = iter(["127.0.0.1"] + ["127.0.0.2"] * 10)  # then a loopback nobody listens on
    real = socket.getaddrinfo

    def rebinding(host: str, *args: object, **kwargs: object) -> list:
        if host != "db.rebind.test":
            return real(host, *args, **kwargs)  # type: ignore[arg-type]
        address = next(answers)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    before = confinement.current()
    confinement.confine(Confinement(before.secret_dirs, database_hosts=("127.0.0.1/32",)))
    try:
        message = refused(server, DataSource("rebind", "db.rebind.test", server.port, "setl",
                                             password_file))
    finally:
        confinement.confine(before)
    assert server.received, "the connection went elsewhere than the address checked"
    assert "asked for the password in clear text" in message


@pytest.mark.parametrize("reference", ["${SETL_API_TOKEN}", "${SETL_TOKEN}"])
def test_setls_own_tokens_are_no_definitions_password(reference: str) -> None:
    problem = Confinement(env_prefix="SETL_").secret_problem(reference)
    assert problem is not None and "names one of setl's own secrets" in problem


@pytest.mark.parametrize(("error", "answered"), [
    (pymysql.err.OperationalError(1193, "Unknown system variable 'gtid_binlog_state'"), True),
    (pymysql.err.OperationalError(1227, "Access denied; you need SLAVE MONITOR"), True),
    (pymysql.err.OperationalError(1142, "SELECT command denied to user"), True),
    (pymysql.err.OperationalError(4031, "The client was disconnected by the server"), False),
    (pymysql.err.OperationalError(2013, "Lost connection to server during query"), False),
    (pymysql.err.InternalError("Packet sequence number wrong - got 1 expected 6"), False),
    (pymysql.err.InterfaceError(0, ""), False),
])
def test_a_server_error_is_told_from_a_lost_connection(error, answered) -> None:
    from shared.endpoint import server_answered
    assert server_answered(error) is answered


def test_a_refusal_for_want_of_a_right_is_told_through_the_errors_raised_from_it() -> None:
    denied = pymysql.err.OperationalError(1142, "INSERT command denied to user 'u'@'h'")
    try:
        try:
            raise denied
        except pymysql.MySQLError as exc:
            raise LoadError("stage load, target target: table s.t: INSERT command denied") \
                from exc
    except LoadError as wrapped:
        assert missing_right(wrapped)
    assert not missing_right(pymysql.err.OperationalError(1213, "Deadlock found"))
    assert not missing_right(LoadError("no server error under it"))
