"""Streams whose messages pass through as the bytes they already are.

A subscription's batches are serialized where they are made (the Spark workers make their
parts, the node joins them), so the node and the manager relaying them send the bytes on
as they are instead of parsing and serializing every change again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc


class RawResponses:
    """A gRPC server as a generated ``add_*Servicer_to_server`` sees it: the methods named
    in ``raw`` send what their handler yields (bytes) unchanged."""

    def __init__(self, server: grpc.Server, raw: set[str]) -> None:
        self.server, self.raw = server, raw

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass  # made below, from the handlers the generated code registers by name

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        handlers = {name: _raw(handler) if name in self.raw else handler
                    for name, handler in handlers.items()}
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, handlers),))
        self.server.add_registered_method_handlers(service, handlers)


def _raw(handler: Any) -> Any:
    return grpc.stream_stream_rpc_method_handler(
        handler.stream_stream, request_deserializer=handler.request_deserializer,
        response_serializer=None)


def add(add_servicer: Callable[[Any, Any], None], servicer: Any, server: grpc.Server,
        raw: set[str]) -> None:
    """``add_servicer(servicer, server)`` with the methods in ``raw`` sending bytes."""
    add_servicer(servicer, RawResponses(server, raw))


def raw_call(channel: grpc.Channel, method: str, request_serializer: Any) -> Any:
    """A client stream-stream call whose responses come as bytes."""
    return channel.stream_stream(method, request_serializer=request_serializer,
                                 response_deserializer=None)
