"""Who may use the manager: the bearer token checked on every RPC (a gRPC server
interceptor) and on every page of its web port, the API's TLS, and the rule that a manager
reachable from other machines must have a token.

The token is configured as a reference (``${SETL_...}`` or ``file:/path``, docs/security.md)
and resolved under the manager's own ``security`` rules; its value is never logged.
"""

from __future__ import annotations

import logging

from manager.client import Access
from shared.errors import ConfigError
from shared.httpserver import is_loopback
from shared.rpcauth import (
    MESSAGES,
    NO_TOKEN,
    WRONG_TOKEN,
    TokenCheck,
    TokenInterceptor,
    server_credentials,
)
from shared.secrets import SecretRef
from shared.settings import ManagerSettings

__all__ = ["MESSAGES", "NO_TOKEN", "SESSION_COOKIE", "WRONG_TOKEN", "TokenCheck",
           "TokenInterceptor", "exposure_problem", "node_access", "resolve_token",
           "server_credentials"]

log = logging.getLogger("setl.manager.auth")
SESSION_COOKIE = "setl_session"


def resolve_token(settings: ManagerSettings) -> TokenCheck | None:
    """The manager's token check, or None without ``api.token``; ConfigError (naming the
    file and field) when the reference cannot be read here."""
    if not settings.api.token:
        return None
    try:
        return TokenCheck(SecretRef(settings.api.token).resolve(rules=settings.security))
    except ConfigError as exc:
        raise ConfigError(f"{settings.file or 'configuration'}: api.token: {exc}") from None


def node_access(settings: ManagerSettings) -> Access:
    """How verify reaches the nodes: their token (``nodes.token``, resolved under the
    manager's rules) and the CA of their certificates (``nodes.ca``); ConfigError naming
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
    return Access(token, ca)


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


