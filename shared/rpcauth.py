"""Bearer tokens and TLS for setl's gRPC servers (the manager's API, the node's RPC): the
token compared in constant time, a server interceptor refusing every call without it, and
the server's certificate. Tokens are configured as references and resolved under the
daemon's own ``security`` rules; their values are never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable
from typing import Any

import grpc

from shared.errors import ConfigError
from shared.settings import TlsSettings

log = logging.getLogger("setl.rpcauth")
NO_TOKEN, WRONG_TOKEN = "no_token", "wrong_token"
NOT_ALLOWED = "not_allowed"  # a token this server knows, for other calls than this one
MESSAGES = {
    NO_TOKEN: "this manager requires a token: pass --token or set SETL_TOKEN (the value, or "
              "file:PATH of a file holding it) to the token its operator configured "
              "(api.token)",
    WRONG_TOKEN: "this manager refused the token given (--token or SETL_TOKEN); ask its "
                 "operator for the one configured in api.token",
}


class TokenCheck:
    """Compares what a caller presents with the configured token in constant time."""

    def __init__(self, token: str) -> None:
        if not token:
            raise ConfigError("api.token resolved to an empty value; put the token in the "
                              "file or variable it names")
        self._token = token.encode()

    def problem(self, authorization: str | None) -> str | None:
        """None if ``authorization`` (an HTTP/gRPC header value) carries the token, else
        NO_TOKEN or WRONG_TOKEN."""
        if not authorization:
            return NO_TOKEN
        scheme, _, presented = authorization.partition(" ")
        if scheme.lower() != "bearer" or \
                not hmac.compare_digest(presented.strip().encode(), self._token):
            return WRONG_TOKEN
        return None

    @property
    def session(self) -> str:
        """The web page's session cookie: derived from the token (changing the token logs
        every browser out), never the token itself."""
        return hmac.new(self._token, b"setl-web-session", hashlib.sha256).hexdigest()

    def session_problem(self, cookie: str) -> str | None:
        return None if hmac.compare_digest(cookie.encode(), self.session.encode()) else \
            WRONG_TOKEN


class TokenInterceptor(grpc.ServerInterceptor):
    """Refuses every RPC without the token (UNAUTHENTICATED, with what to do) before the
    service sees it."""

    def __init__(self, check: TokenCheck, refused: Callable[[str], None] = lambda r: None,
                 messages: dict[str, str] | None = None) -> None:
        self.check, self.refused = check, refused
        self.messages = messages or MESSAGES

    def intercept_service(self, continuation: Callable[[Any], Any],
                          details: grpc.HandlerCallDetails) -> Any:
        metadata = dict(details.invocation_metadata or ())
        reason = self.check.problem(metadata.get("authorization"))
        if reason is None:
            return continuation(details)
        return self.deny(details.method, reason, grpc.StatusCode.UNAUTHENTICATED,
                         self.messages[reason])

    def deny(self, method: str, reason: str, code: grpc.StatusCode, message: str,
             who: str = "") -> Any:
        """A handler refusing the call with ``code`` and ``message`` (counted, logged with
        ``who`` made it: never a token)."""
        self.refused(reason)

        def deny(request: Any, context: grpc.ServicerContext) -> Any:
            log.warning("event=rpc_refused method=%s reason=%s%s peer=%s", method, reason,
                        f" caller={who}" if who else "", context.peer())
            context.abort(code, message)
        return grpc.unary_unary_rpc_method_handler(deny)


def server_credentials(tls: TlsSettings) -> grpc.ServerCredentials:
    """The API's certificate; with ``client_ca`` a client must present one it signed."""
    try:
        pair = (tls.key.read_bytes(), tls.cert.read_bytes())
        client_ca = tls.client_ca.read_bytes() if tls.client_ca else None
    except OSError as exc:
        raise ConfigError(f"api.tls: cannot read {exc.filename}: {exc.strerror}") from None
    return grpc.ssl_server_credentials([pair], root_certificates=client_ca,
                                       require_client_auth=client_ca is not None)
