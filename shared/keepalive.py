"""HTTP/2 keepalive of setl's gRPC connections: a peer whose host vanished is noticed.

A subscription reader holds a stream open for as long as it reads. When its host vanishes
without closing TCP (a power cut, a partition, a NAT that drops the flow), nothing is ever
sent back, and without keepalive neither end learns it: the server kept the stream, its
reader's slot and the node's outbox attached to a reader that is gone (``setl status``
showed it), and a reader whose manager vanished waited for ever. So both ends ping a
connection that has been quiet for ``idle_s`` and drop it when the ping is not answered
within ``timeout_s``: the server's calls on it are cancelled (the manager's relay cancels
its call to the node, the node detaches the reader) and the client's fail UNAVAILABLE (a
:class:`manager.subscriber.Subscriber` connects again, as for any transport error).

gRPC servers answer a client that pings more often than they allow with GOAWAY
``too_many_pings``, which would cut healthy long-lived streams. A setl server allows a
ping every :data:`MIN_S` seconds, the least ``idle_s`` any setl client may have.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.errors import ConfigError
from shared.yamlreader import Field

MIN_S = 1  # the least idle_s and timeout_s; a server accepts pings this often
MAX_S = 3600


@dataclass(frozen=True)
class Keepalive:
    """Ping a connection quiet for ``idle_s``; drop it ``timeout_s`` after an unanswered
    ping. A peer gone without a word is noticed within about ``idle_s + timeout_s``."""

    idle_s: int = 20
    timeout_s: int = 10

    def __post_init__(self) -> None:
        for name in ("idle_s", "timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or \
                    not MIN_S <= value <= MAX_S:
                raise ConfigError(f"keepalive.{name}: expected whole seconds from {MIN_S} to "
                                  f"{MAX_S}, got {value!r}")


def _pings(keepalive: Keepalive) -> tuple[tuple[str, Any], ...]:
    return (("grpc.keepalive_time_ms", keepalive.idle_s * 1000),
            ("grpc.keepalive_timeout_ms", keepalive.timeout_s * 1000),
            # (grpcio 1.85 waits this long, 60 s by default, for the answer to a ping sent
            # while the connection carries data: keepalive_timeout_ms alone left a reader
            # whose batches still went out attached for a minute)
            ("grpc.http2.ping_timeout_ms", keepalive.timeout_s * 1000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0))  # (gRPC's 2: a quiet stream went unpinged)


def server_options(keepalive: Keepalive) -> tuple[tuple[str, Any], ...]:
    """A server's options: it pings its clients, and lets them ping it every MIN_S (gRPC's
    default of 5 minutes would answer their pings with GOAWAY too_many_pings)."""
    return (*_pings(keepalive),
            ("grpc.http2.min_ping_interval_without_data_ms", MIN_S * 1000))


def channel_options(keepalive: Keepalive) -> tuple[tuple[str, Any], ...]:
    """A client channel's options: it pings the server it calls."""
    return _pings(keepalive)


def read_keepalive(found: Field | None) -> Keepalive:
    """The ``keepalive`` section of a manager or node configuration: ``idle_s``,
    ``timeout_s`` (whole seconds)."""
    defaults = Keepalive()
    entry = found.mapping() if found else None
    if entry is None:
        return defaults
    def seconds(item: Field) -> object:  # (a bad value: the default; loading raises it)
        return item.integer(MIN_S, MAX_S)
    settings = Keepalive(entry.get("idle_s", seconds, defaults.idle_s),
                         entry.get("timeout_s", seconds, defaults.timeout_s))
    entry.close()
    return settings
