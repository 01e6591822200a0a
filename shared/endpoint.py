"""Connections to MySQL/MariaDB endpoints, for the node and for CLI tools alike.

Every connection setl opens to a definition's database is made here, with the same rules:
the host must be one this machine's configuration allows (``security.database_hosts``); the
password reference is resolved here and only here; a source with ``tls:`` is reached over
TLS with the server's certificate verified (no fallback to plain TCP); and the password is
never sent in clear text — a server that asks for it with the ``mysql_clear_password`` or
``dialog`` plugin gets it only over verified TLS.
"""

from __future__ import annotations

import functools
import re
import socket
import ssl
from typing import Any

import pymysql
import pymysql._auth
import pymysql.cursors
from pymysql.constants import CR
from pymysql.cursors import RE_INSERT_VALUES

from shared import confinement
from shared.errors import ConfigError, DatabaseHostError, SourceError
from shared.identifiers import template
from shared.model import DataSource

# The session setl reads rows in (copies, free door, lookups, verify): TIMESTAMP in UTC and
# CHAR without the spaces that pad it, as the binlog gives both. A server whose sql_mode has
# PAD_CHAR_TO_FULL_LENGTH would pad them: such a key never matched the stream's, and a CHAR
# copied into a VARCHAR kept the spaces.
READING = ("SET time_zone = '+00:00', "
           "sql_mode = REPLACE(@@sql_mode, 'PAD_CHAR_TO_FULL_LENGTH', '')")
# … and in an isolation level of its own, not the server's default: under READ UNCOMMITTED a
# window's read took another transaction's change, which it then rolled back (no binlog
# event to mend it: the target kept a value the source never committed). A window needs
# each read to see committed rows only, read after its low watermark: REPEATABLE READ (the
# one InnoDB's default, and verify's consistent snapshots, are read in) gives a read one
# snapshot of them, taken at its first SELECT. Set as a statement of its own (no server
# variable names it on both MySQL 8 and MariaDB before 11.1) by ``connect(isolation=...)``.
READ_ISOLATION = "REPEATABLE READ"


def _verified(conn: pymysql.Connection) -> bool:
    """Whether the connection runs over TLS that verified the server, its name included (a
    source's ``tls:`` with ``verify_identity: true``): a certificate the CA signed for any
    other host (a public CA's, for one) would otherwise do."""
    return bool(getattr(conn, "_secure", False) and _verifying(conn))


def _verifying(conn: pymysql.Connection) -> bool:
    """Whether the connection's TLS (once it is up) verifies the server and its name."""
    context = getattr(conn, "ctx", None)
    return bool(context is not None and context.verify_mode == ssl.CERT_REQUIRED and
                context.check_hostname)


def _round_trip(conn: pymysql.Connection, data: bytes) -> Any:
    conn.write_packet(data)
    packet = conn._read_packet()
    packet.check_error()
    return packet


def _revealing(conn: pymysql.Connection, what: str) -> pymysql.err.OperationalError:
    return pymysql.err.OperationalError(
        CR.CR_AUTH_PLUGIN_ERR,
        f"the server at {conn.host}:{conn.port} asked for {what}, which gives it the "
        "password itself, over a connection without verified TLS; setl never sends it so "
        "(a server it should not trust, or anyone on the path, would read it). Give this "
        "source 'tls: {ca: ..., verify_identity: true}' (a CA file the operator keeps in a "
        "secret directory, and a certificate naming the host), or let "
        "its user authenticate with mysql_native_password or ed25519, or have the server "
        "cache the caching_sha2_password login (one login over verified TLS does)")


class _Sha256Password:
    """``sha256_password`` sends the password, in clear over TLS or encrypted with a public
    key the server hands out: either way the server reads it. Only over verified TLS."""

    def __init__(self, connection: pymysql.Connection) -> None:
        self.connection = connection

    def authenticate(self, packet: Any) -> Any:
        conn = self.connection
        if not conn.password:
            return _round_trip(conn, b"\0")
        if not _verified(conn):
            raise _revealing(conn, "sha256_password")
        return _round_trip(conn, conn.password + b"\0")


class _CachingSha2Password:
    """``caching_sha2_password``: the scramble of its fast path proves the password without
    sending it; its full authentication sends the password itself (in clear over TLS, or
    encrypted with the server's key): only over verified TLS."""

    def __init__(self, connection: pymysql.Connection) -> None:
        self.connection = connection

    def authenticate(self, packet: Any) -> Any:
        conn = self.connection
        if not conn.password:
            return _round_trip(conn, b"")
        if packet.is_auth_switch_request():  # a new salt: the fast path's scramble for it
            conn.salt = packet.read_all().removesuffix(b"\0")
            packet = _round_trip(conn, pymysql._auth.scramble_caching_sha2(conn.password,
                                                                           conn.salt))
        if not packet.is_extra_auth_data():
            return packet  # OK (or an error already raised)
        packet.advance(1)
        step = packet.read_uint8()
        if step == 3:  # fast authentication succeeded: the OK follows
            answer = conn._read_packet()
            answer.check_error()
            return answer
        if step != 4:
            raise pymysql.err.OperationalError(
                CR.CR_AUTH_PLUGIN_ERR, f"caching_sha2_password: unknown step {step}")
        if not _verified(conn):
            raise _revealing(conn, "caching_sha2_password's full authentication")
        return _round_trip(conn, conn.password + b"\0")


class _PasswordInClear:
    """pymysql's handler for a server asking for the password as it is (the plugins
    ``mysql_clear_password`` and ``dialog``, which PAM and LDAP set-ups use): answered only
    over TLS that verified the server, since otherwise anyone on the path — or a server a
    definition points at — reads it."""

    plugin = ""

    def __init__(self, connection: pymysql.Connection) -> None:
        self.connection = connection

    def authenticate(self, packet: Any) -> Any:
        conn = self.connection
        if not _verified(conn):
            raise pymysql.err.OperationalError(
                CR.CR_AUTH_PLUGIN_ERR,
                f"the server at {conn.host}:{conn.port} asked for the password in clear text "
                f"({self.plugin}) over a connection without verified TLS; setl never sends "
                "it so. Give this source 'tls: {ca: ..., verify_identity: true}', or let its "
                "user authenticate with mysql_native_password, caching_sha2_password or "
                "ed25519")
        if self.plugin == "dialog":
            packet.read_uint8()  # the prompt's flags; the prompt asks for the password
        conn.write_packet(conn.password + b"\0")
        answer = conn._read_packet()
        answer.check_error()
        return answer


class _ClearPassword(_PasswordInClear):
    plugin = "mysql_clear_password"


class _Dialog(_PasswordInClear):
    plugin = "dialog"


AUTH_PLUGINS = {b"mysql_clear_password": _ClearPassword, b"dialog": _Dialog,
                b"sha256_password": _Sha256Password,
                b"caching_sha2_password": _CachingSha2Password}


def connection_settings(source: DataSource) -> dict[str, Any]:
    """PyMySQL keyword arguments; the password reference is resolved here, and only here."""
    rules = confinement.current()
    # resolved once: the address checked is the address connected to (no second lookup a
    # DNS answer with TTL 0 could point elsewhere); TLS still checks the name
    addresses = confinement.resolve(source.host)
    problem = rules.database_problem(source.host, addresses)
    if problem is None and source.password:
        problem = rules.secret_problem(source.password.text) or rules.credential_problem(
            source.password.text, source.host, source.port, addresses)
    if problem is not None:
        raise DatabaseHostError(f"source {source.name}: {problem}")
    settings = {"host": source.host, "port": source.port, "user": source.user,
                "password": source.password.resolve() if source.password else "",
                "charset": source.charset, "connect_timeout": 10,
                "auth_plugin_map": AUTH_PLUGINS,
                "pinned": tuple(map(str, addresses))}
    if source.tls is not None:  # required, and the server verified
        for what in ("ca", "cert", "key"):
            path = getattr(source.tls, what)
            problem = confinement.current().tls_file_problem(what, path) if path else None
            if problem is not None:
                raise ConfigError(f"source {source.name}: {problem}")
        settings["ssl"] = {"ca": source.tls.ca, "check_hostname": source.tls.verify_identity,
                           "verify_mode": True,
                           **({"cert": source.tls.cert, "key": source.tls.key}
                              if source.tls.cert else {})}
    return settings


class _Names:
    """A cursor whose statements with parameters keep their quoted names whole: a ``%`` in
    a name is not taken for a placeholder (:func:`shared.identifiers.template`)."""

    def execute(self, query: str, args: Any = None) -> int:
        return super().execute(template(query) if args is not None else query,  # type: ignore[misc]
                               args)

    def executemany(self, query: str, args: Any) -> int | None:
        # the multi-row INSERT path formats by itself; any other runs execute() per row
        many = RE_INSERT_VALUES.match(query) is not None
        return super().executemany(template(query) if many else query, args)  # type: ignore[misc]


class Cursor(_Names, pymysql.cursors.Cursor):
    """The cursor of every connection setl makes."""


class DictCursor(_Names, pymysql.cursors.DictCursor):
    """Rows as dicts, names kept whole as :class:`Cursor` keeps them."""


# Every session reads every row a SELECT finds: a server's (or the user's) default
# sql_select_limit caps each SELECT that has no LIMIT of its own — a snapshot chunk, verify's
# reads, the columns of a table, the collations — and a copy with a global limit of 50 copied
# 50 rows a chunk and said done. (DEFAULT at session level is the global value: the most.)
ALL_ROWS = "sql_select_limit = 18446744073709551615"
# a SET of assignments (not SET [SESSION] TRANSACTION, SET STATEMENT … FOR, PASSWORD, ROLE)
_JOINS = re.compile(r"SET\s+(?!(?:(?:SESSION|LOCAL|GLOBAL)\s+)?TRANSACTION\b|STATEMENT\b|"
                    r"PASSWORD\b|(?:DEFAULT\s+)?ROLE\b)", re.I)


def all_rows(init_command: str | None) -> tuple[str, bool]:
    """A connection's init_command with :data:`ALL_ROWS` set in it (a ``SET`` of
    assignments), and whether ALL_ROWS must go apart after it instead (another statement)."""
    if init_command is None:
        return "SET " + ALL_ROWS, False
    found = _JOINS.match(init_command.lstrip())
    if found is None:
        return init_command, True
    text = init_command.lstrip()
    return f"SET {ALL_ROWS}, {text[found.end():]}", False


class Connection(pymysql.Connection):
    """PyMySQL's connection, with the TLS context of its "preferred" mode (a source without
    ``tls:``: TLS if the server offers it, unverified) made once, not per connection:
    PyMySQL's own reads the system's CA bundle every time, 20-30 ms of CPU — more than a
    snapshot's chunk read costs."""

    def __init__(self, *args: Any, pinned: tuple[str, ...] = (), isolation: str = "",
                 **kwargs: Any) -> None:
        self.pinned = pinned  # the addresses the name resolved to when it was checked
        self.isolation = isolation  # the session's transaction isolation level ("": the server's)
        kwargs["init_command"], self._all_rows_apart = all_rows(kwargs.get("init_command"))
        super().__init__(*args, **kwargs)

    def connect(self, sock: Any = None) -> None:
        if sock is None and self.pinned and not self.unix_socket:
            sock = self._pinned_socket()
        super().connect(sock)
        if not (self.isolation or self._all_rows_apart):
            return
        try:  # (again on a reconnect: a new session)
            with self.cursor() as cursor:
                if self.isolation:
                    cursor.execute(f"SET SESSION TRANSACTION ISOLATION LEVEL {self.isolation}")
                if self._all_rows_apart:  # an init_command ALL_ROWS cannot join
                    cursor.execute("SET " + ALL_ROWS)
        except BaseException:
            self._force_close()
            raise

    def _pinned_socket(self) -> socket.socket:
        """A connection to the first of the checked addresses that answers (as
        socket.create_connection tries a name's addresses, without resolving it again)."""
        failure: OSError | None = None
        for address in self.pinned:
            try:
                sock = socket.create_connection((address, self.port), self.connect_timeout)
            except OSError as exc:
                failure = exc
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            self.host_info = f"socket {self.host}:{self.port} ({address})"
            return sock
        raise pymysql.err.OperationalError(
            CR.CR_CONN_HOST_ERROR, f"Can't connect to MySQL server on {self.host!r} "
            f"({', '.join(self.pinned)}): {failure}")

    def _request_authentication(self) -> None:
        # a server whose first plugin is sha256_password gets, over TLS, the password in the
        # very first answer: without verified TLS it gets a scramble, and a switch to that
        # plugin meets _Sha256Password
        if self._auth_plugin_name == "sha256_password" and self.password and \
                not _verifying(self):
            self._auth_plugin_name = "mysql_native_password"
        super()._request_authentication()

    def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
        if sslp:  # tls: given: its files, verified
            return super()._create_ssl_ctx(sslp)
        return _preferred()


@functools.cache
def _preferred() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # as PyMySQL's preferred mode: no CA to verify by
    return context


def connect(source: DataSource, **extra: Any) -> pymysql.Connection:
    try:
        return Connection(**{"cursorclass": Cursor, **connection_settings(source), **extra})
    except pymysql.err.OperationalError as exc:
        if source.tls is None or not exc.args or exc.args[0] != CR.CR_SSL_CONNECTION_ERROR:
            raise _refused(source, exc) from None
        raise SourceError(f"source {source.name} has tls: but the server at {source.host}:"
                          f"{source.port} offers no TLS, so setl did not log in. Enable TLS "
                          "on the server (ssl_ca, ssl_cert, ssl_key in its my.cnf), or point "
                          "the source at a server that has it") from None
    except pymysql.MySQLError as exc:
        raise _refused(source, exc) from None
    except (OSError, ssl.SSLError) as exc:
        raise SourceError(f"cannot connect to {source.name} ({source.host}:{source.port}) "
                          f"over TLS: {exc}; check the source's tls: files") from None


def _refused(source: DataSource, exc: pymysql.MySQLError) -> SourceError:
    return SourceError(f"cannot connect to {source.name} ({source.host}:{source.port}) as "
                       f"{source.user}: {exc.args[-1] if exc.args else exc}")


# the server refused for want of a right: on a database, a table, a column, a global right
# (SUPER, REPLICATION MASTER ADMIN, …), a routine
ACCESS_DENIED = frozenset({1044, 1142, 1143, 1227, 1370})
# server errors after which the server closes the connection: shutting down, killed,
# disconnected an idle client (MySQL)
CONNECTION_ENDED = frozenset({1053, 1927, 4031})
# the connection is gone: server gone away, lost during a query, closed by the server for
# inactivity (MySQL 8.0.24+ says so; MariaDB just closes it): its server's ``wait_timeout``,
# a proxy's idle limit, a restart, a KILL. A new connection may do what this one could not.
LOST = frozenset({2006, 2013, 4031})


def lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection is gone (:data:`LOST`), not that a statement
    failed: a read may be asked again on a new connection; a write only where its
    transaction surely did not commit, or where asking again cannot double it."""
    return isinstance(exc, pymysql.MySQLError) and bool(exc.args) and exc.args[0] in LOST


def server_answered(exc: pymysql.MySQLError) -> bool:
    """Whether the server answered a statement with an error (an unknown variable, a missing
    right: the connection stays usable), as against the connection failing (a client error,
    2000-2999: lost, timed out; a protocol error without a code: out of step; the server
    ending it), which no later statement on it survives."""
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
    return not isinstance(exc, pymysql.err.InterfaceError) and code >= 1000 and \
        not 2000 <= code < 3000 and code not in CONNECTION_ENDED


def missing_right(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it was raised from, is a server refusing a statement for
    want of a right (:data:`ACCESS_DENIED`)."""
    seen: BaseException | None = exc
    for _ in range(8):  # (a chain is short; a cycle is not followed for ever)
        if seen is None:
            return False
        if isinstance(seen, pymysql.MySQLError) and seen.args and seen.args[0] in ACCESS_DENIED:
            return True
        seen = seen.__cause__ or seen.__context__
    return False
