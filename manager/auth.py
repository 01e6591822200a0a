"""Who may use the manager: the bearer token checked on every RPC (a gRPC server
interceptor) and on every page of its web port, the subscription readers' own tokens (only
Subscribe and GetChannel, only of their channels), the API's TLS, and the rule that a
manager reachable from other machines must have a token.

The token is configured as a reference (``${SETL_...}`` or ``file:/path``, docs/security.md)
and resolved under the manager's own ``security`` rules; its value is never logged.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from manager.client import Access
from shared.errors import ConfigError, PermissionDeniedError
from shared.httpserver import is_loopback
from shared.rpcauth import (
    MESSAGES,
    NO_TOKEN,
    NOT_ALLOWED,
    WRONG_TOKEN,
    TokenCheck,
    TokenInterceptor,
    server_credentials,
)
from shared.secrets import SecretRef
from shared.settings import ManagerSettings

__all__ = ["MESSAGES", "NOT_ALLOWED", "NO_TOKEN", "SESSION_COOKIE", "WRONG_TOKEN",
           "ApiInterceptor", "Reader", "TokenCheck", "TokenInterceptor", "exposure_problem",
           "node_access", "resolve_readers", "resolve_token", "server_credentials"]

log = logging.getLogger("setl.manager.auth")
SESSION_COOKIE = "setl_session"
_SERVICE = "/setl.v1.ManagerService/"
SUBSCRIBE, GET_CHANNEL = _SERVICE + "Subscribe", _SERVICE + "GetChannel"
_MOVES = {_SERVICE + "SetChannelStatus", _SERVICE + "Positions"}


@dataclass(frozen=True)
class Reader:
    """A subscription reader's token (its value) and the channels it may read."""

    token: bytes
    channels: frozenset[str]
    name: str  # where it is configured (api.readers[N]): logs and messages, never the token

    def may_not(self, doing: str) -> str:
        """PERMISSION_DENIED's message: what this token may do, and who may do the rest."""
        return (f"this token is a subscription reader's ({self.name} of the manager's "
                f"configuration): it may only read channel "
                f"{', '.join(sorted(self.channels))} (setl subscribe, Subscriber), not "
                f"{doing}; that needs the manager's admin token (api.token): ask its operator")


def resolve_token(settings: ManagerSettings) -> TokenCheck | None:
    """The manager's token check, or None without ``api.token``; ConfigError (naming the
    file and field) when the reference cannot be read here."""
    if not settings.api.token:
        return None
    try:
        return TokenCheck(SecretRef(settings.api.token).resolve(rules=settings.security))
    except ConfigError as exc:
        raise ConfigError(f"{settings.file or 'configuration'}: api.token: {exc}") from None


def resolve_readers(settings: ManagerSettings, check: TokenCheck | None
                    ) -> tuple[Reader, ...]:
    """The subscription readers' tokens (``api.readers``), resolved under the manager's
    rules; ConfigError naming the file, line and field when one cannot be read, is empty, or
    is the admin token's or another reader's value."""
    found: list[Reader] = []
    for index, reader in enumerate(settings.api.readers):
        where = f"{settings.file or 'configuration'}:{reader.line}: api.readers[{index}].token"
        try:
            value = SecretRef(reader.token).resolve(rules=settings.security)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if not value:
            raise ConfigError(f"{where}: {reader.token} resolved to an empty value; put the "
                              "reader's token in the file or variable it names")
        if check is not None and check.problem(f"Bearer {value}") is None:
            raise ConfigError(f"{where}: {reader.token} holds the admin token (api.token), "
                              "which may do everything: give the reader a token of its own")
        same = [other.name for other in found if hmac.compare_digest(other.token,
                                                                     value.encode())]
        if same:
            raise ConfigError(f"{where}: {reader.token} holds the same token as {same[0]}: "
                              "give each reader a token of its own (one reader may list "
                              "several channels)")
        found.append(Reader(value.encode(), frozenset(reader.channels),
                            f"api.readers[{index}]"))
    return tuple(found)


class ApiInterceptor(TokenInterceptor):
    """The manager API's check: the admin token may call everything; a reader's token only
    Subscribe (its first message naming one of its channels) and GetChannel of its
    channels, anything else PERMISSION_DENIED saying what it may do; any other token (or
    none) UNAUTHENTICATED. Every token is compared in constant time."""

    def __init__(self, check: TokenCheck, readers: tuple[Reader, ...] = (),
                 refused: Callable[[str], None] = lambda r: None) -> None:
        super().__init__(check, refused)
        self.readers = readers

    def intercept_service(self, continuation: Callable[[Any], Any],
                          details: grpc.HandlerCallDetails) -> Any:
        metadata = dict(details.invocation_metadata or ())
        authorization = metadata.get("authorization")
        reason = self.check.problem(authorization)
        if reason is None:
            return continuation(details)
        reader = self._reader(authorization) if reason == WRONG_TOKEN else None
        if reader is None:
            return self.deny(details.method, reason, grpc.StatusCode.UNAUTHENTICATED,
                             self.messages[reason])
        method = details.method
        if method == SUBSCRIBE:
            handler = continuation(details)
            return handler and handler._replace(
                stream_stream=self._subscribe(reader, handler.stream_stream, method))
        if method == GET_CHANNEL:
            handler = continuation(details)
            return handler and handler._replace(
                unary_unary=self._get_channel(reader, handler.unary_unary, method))
        doing = method.rsplit("/", 1)[-1]
        if method in _MOVES:
            doing += " (moving a subscription, --from or Subscriber(start=...), stops its " \
                     "channel and sets its position)"
        return self.deny(method, NOT_ALLOWED, grpc.StatusCode.PERMISSION_DENIED,
                         reader.may_not(doing), reader.name)

    def _reader(self, authorization: str | None) -> Reader | None:
        """The reader whose token ``authorization`` carries: every one compared, in
        constant time."""
        scheme, _, presented = (authorization or "").partition(" ")
        value = presented.strip().encode()
        found = None
        for reader in self.readers:
            if hmac.compare_digest(value, reader.token) and found is None:
                found = reader
        return found if scheme.lower() == "bearer" else None

    def _refused_for(self, reader: Reader, method: str, channel: str,
                     context: grpc.ServicerContext) -> str:
        """Count and log a reader's call refused; its PERMISSION_DENIED message."""
        self.refused(NOT_ALLOWED)
        log.warning("event=rpc_refused method=%s reason=%s caller=%s channel=%s peer=%s",
                    method, NOT_ALLOWED, reader.name, channel, context.peer())
        return reader.may_not(f"channel {channel or '(none named)'}")

    def _refuse(self, reader: Reader, method: str, channel: str,
                context: grpc.ServicerContext) -> None:
        context.abort(grpc.StatusCode.PERMISSION_DENIED,
                      self._refused_for(reader, method, channel, context))

    def _subscribe(self, reader: Reader, behavior: Callable[..., Iterator[Any]],
                   method: str) -> Callable[..., Iterator[Any]]:
        """The stream's first message names its channel: checked when the servicer reads it,
        inside its share of the reading threads (read here, a reader's streams that never
        sent it held the manager's threads outside that share: every call stalled)."""
        def guarded(requests: Iterator[Any], context: grpc.ServicerContext
                    ) -> Iterator[Any]:
            def checked() -> Iterator[Any]:
                first = next(requests, None)
                channel = first.start.channel if first is not None and \
                    first.WhichOneof("kind") == "start" else ""
                if channel not in reader.channels:  # (the servicer says PERMISSION_DENIED)
                    raise PermissionDeniedError(self._refused_for(reader, method, channel,
                                                                  context))
                yield first
                yield from requests
            try:
                yield from behavior(checked(), context)
            except PermissionDeniedError as exc:  # (a servicer that did not translate it)
                context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        return guarded

    def _get_channel(self, reader: Reader, behavior: Callable[..., Any], method: str
                     ) -> Callable[..., Any]:
        def guarded(request: Any, context: grpc.ServicerContext) -> Any:
            if request.name not in reader.channels:
                self._refuse(reader, method, request.name, context)
            return behavior(request, context)
        return guarded


def node_access(settings: ManagerSettings) -> Access:
    """How verify and subscription relays reach the nodes: their token (``nodes.token``,
    resolved under the manager's rules), the CA of their certificates (``nodes.ca``) and
    the manager's ``keepalive`` pings; ConfigError naming
    the field when either cannot be read."""
    token = ""
    if settings.nodes.token:
        try:
            token = SecretRef(settings.nodes.token).resolve(rules=settings.security)
        except ConfigError as exc:
            raise ConfigError(f"{settings.file or 'configuration'}: nodes.token: {exc}") \
                from None
    ca = None
    if settings.nodes.ca is not None:
        try:
            ca = settings.nodes.ca.read_bytes()
        except OSError as exc:
            raise ConfigError(f"{settings.file or 'configuration'}: nodes.ca: cannot read "
                              f"{exc.filename}: {exc.strerror}") from None
    return Access(token, ca, keepalive=settings.keepalive)


def exposure_problem(settings: ManagerSettings) -> str | None:
    """Why the manager must not start as configured: an API or page reachable from other
    machines without a token."""
    if settings.api.token:
        return None
    where = settings.file or "the manager's configuration"
    for name, listen in (("listen", settings.listen), ("web.listen", settings.web.listen)):
        if not is_loopback(listen):
            could = "change definitions" if name == "listen" else "read every pipeline"
            return (f"{name} {listen} is reachable from other machines, but no api.token is "
                    f"set, so anyone reaching it could {could}. Set api.token in {where} (a "
                    "${SETL_...} or file: reference to the token), or listen on 127.0.0.1")
    return None


