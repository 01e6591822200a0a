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
import ssl
from typing import Any

import pymysql
import pymysql.cursors
from pymysql.constants import CR
from pymysql.cursors import RE_INSERT_VALUES

from shared import confinement
from shared.errors import DatabaseHostError, SourceError
from shared.identifiers import template
from shared.model import DataSource


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
        context = getattr(conn, "ctx", None)
        if not (conn._secure and context is not None and context.verify_mode == ssl.CERT_REQUIRED):
            raise pymysql.err.OperationalError(
                CR.CR_AUTH_PLUGIN_ERR,
                f"the server at {conn.host}:{conn.port} asked for the password in clear text "
                f"({self.plugin}) over a connection without verified TLS; setl never sends "
                "it so. Give this source 'tls: {ca: ...}', or let its user authenticate with "
                "mysql_native_password, caching_sha2_password or ed25519")
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


AUTH_PLUGINS = {b"mysql_clear_password": _ClearPassword, b"dialog": _Dialog}


def connection_settings(source: DataSource) -> dict[str, Any]:
    """PyMySQL keyword arguments; the password reference is resolved here, and only here."""
    problem = confinement.current().database_problem(source.host)
    if problem is not None:
        raise DatabaseHostError(f"source {source.name}: {problem}")
    settings = {"host": source.host, "port": source.port, "user": source.user,
                "password": source.password.resolve() if source.password else "",
                "charset": source.charset, "connect_timeout": 10,
                "auth_plugin_map": AUTH_PLUGINS}
    if source.tls is not None:  # required, and the server verified
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


class _Connection(pymysql.Connection):
    """PyMySQL's connection, with the TLS context of its "preferred" mode (a source without
    ``tls:``: TLS if the server offers it, unverified) made once, not per connection:
    PyMySQL's own reads the system's CA bundle every time, 20-30 ms of CPU — more than a
    snapshot's chunk read costs."""

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
        return _Connection(**{"cursorclass": Cursor, **connection_settings(source), **extra})
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
