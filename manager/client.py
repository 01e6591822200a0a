"""The admin CLI's connection to the managers: tries each address, follows the leader.

Transport failures move on to the next address; a standby's "not the leader" answer is
followed to the leader it names. What the manager says is re-raised as the matching
SetlError, so the CLI prints one line and exits non-zero, never a traceback.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # no C-core noise on the user's terminal

import grpc

from shared.errors import (
    ConfigError,
    ConflictError,
    ManagerUnavailableError,
    NotFoundError,
    SetlError,
)
from shared.rpc import manager_pb2_grpc

LEADER_TRAILER = "setl-leader"
DEFAULT_ADDRESS = "127.0.0.1:7310"
_TRANSPORT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
_ERRORS = {grpc.StatusCode.NOT_FOUND: NotFoundError, grpc.StatusCode.ABORTED: ConflictError,
           grpc.StatusCode.INVALID_ARGUMENT: ConfigError}


def addresses_from(value: str | None) -> list[str]:
    text = value or os.environ.get("SETL_MANAGER") or DEFAULT_ADDRESS
    return [part.strip() for part in text.split(",") if part.strip()]


class ManagerClient:
    def __init__(self, addresses: list[str], timeout_s: float = 10.0) -> None:
        self.addresses, self.timeout_s = list(addresses), timeout_s

    def call(self, method: str, request: Any) -> Any:
        tried: list[str] = []
        queue = list(self.addresses)
        while queue:
            address = queue.pop(0)
            if address in tried:
                continue
            tried.append(address)
            with grpc.insecure_channel(address) as channel:
                stub = manager_pb2_grpc.ManagerServiceStub(channel)
                try:
                    return getattr(stub, method)(request, timeout=self.timeout_s)
                except grpc.RpcError as exc:
                    code = exc.code()  # type: ignore[attr-defined]
                    if code in _TRANSPORT:
                        continue
                    leader = dict(exc.trailing_metadata() or ()).get(LEADER_TRAILER)  # type: ignore[attr-defined]
                    if leader and leader not in tried:
                        queue.insert(0, leader)
                        continue
                    raise _ERRORS.get(code, SetlError)(exc.details()) from None  # type: ignore[attr-defined]
        raise ManagerUnavailableError(
            f"no manager answers at {', '.join(tried)}; start one with 'setl-manager' or point "
            "--manager (or SETL_MANAGER) at a running one")
