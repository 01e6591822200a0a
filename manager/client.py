"""The admin CLI's connection to the managers: tries each address, follows the leader.

Transport failures move on to the next address; a standby's "not the leader" answer is
followed to the leader it names. What the manager says is re-raised as the matching
SetlError, so the CLI prints one line and exits non-zero, never a traceback. With
:class:`Access` every call carries the API token and goes over TLS; its channels ping the
manager (:mod:`shared.keepalive`), so a stream from a manager whose host vanished fails
UNAVAILABLE instead of waiting for ever.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # no C-core noise on the user's terminal

import grpc

from shared.errors import (
    AuthenticationError,
    ConfigError,
    ConflictError,
    ManagerUnavailableError,
    NotFoundError,
    NotLeaderError,
    PermissionDeniedError,
    SetlError,
)
from shared.keepalive import Keepalive, channel_options
from shared.rpc import manager_pb2, manager_pb2_grpc, model_pb2

LEADER_TRAILER = "setl-leader"
LEADER_WAIT_S = 15.0  # how long a change waits while no manager leads
STANDBY = "this manager is a standby"  # how NotLeaderError's message begins
DEFAULT_ADDRESS = "127.0.0.1:7310"
# a subscription's batch holds whole transactions: no cap on what a message may hold (gRPC's
# default of 4 MiB would stop a subscription at its first large transaction for good)
CHANNEL_OPTIONS = (("grpc.max_receive_message_length", -1),
                   ("grpc.max_send_message_length", -1))
_TRANSPORT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
_ERRORS = {grpc.StatusCode.NOT_FOUND: NotFoundError, grpc.StatusCode.ABORTED: ConflictError,
           grpc.StatusCode.INVALID_ARGUMENT: ConfigError,
           grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
           grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError}
_TLS_WORDS = ("ssl", "tls", "handshake", "certificate")

_READY = 2  # GRPC_CHANNEL_READY of the gRPC C core's grpc_connectivity_state


@dataclass(frozen=True)
class Access:
    """How the CLI reaches a manager that has a token or TLS."""

    token: str = ""  # the token's value
    ca: bytes | None = None  # the CA that signed the manager's certificate: TLS
    cert: bytes | None = None  # a client certificate and its key, when the manager asks
    key: bytes | None = None
    keepalive: Keepalive = field(default_factory=Keepalive)  # pings of the server called

    @property
    def tls(self) -> bool:
        return self.ca is not None or self.cert is not None

    def channel(self, address: str) -> grpc.Channel:
        options = (*CHANNEL_OPTIONS, *channel_options(self.keepalive))
        if not self.tls:
            return grpc.insecure_channel(address, options=options)
        return grpc.secure_channel(address, grpc.ssl_channel_credentials(
            self.ca, self.key, self.cert), options=options)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...] | None:
        return (("authorization", f"Bearer {self.token}"),) if self.token else None


def access_from(token: str | None = None, ca: str | None = None, cert: str | None = None,
                key: str | None = None) -> Access:
    """The CLI's options, else ``SETL_TOKEN``, ``SETL_CA``, ``SETL_CERT``, ``SETL_KEY``. A
    token may be given as ``file:PATH`` (kept out of the process list and shell history)."""
    env = os.environ.get
    token = token or env("SETL_TOKEN") or ""
    if token.startswith("file:"):
        token = _read(token[len("file:"):], "--token").decode("utf-8", "replace").strip()
        if not token:
            raise SetlError("--token file: the file is empty; put the manager's token in it")
    if bool(cert or env("SETL_CERT")) != bool(key or env("SETL_KEY")):
        raise SetlError("--cert and --key go together: give the client certificate and its "
                        "private key")
    files = [(value, option) for value, option in ((ca or env("SETL_CA"), "--ca"),
                                                   (cert or env("SETL_CERT"), "--cert"),
                                                   (key or env("SETL_KEY"), "--key"))]
    ca_pem, cert_pem, key_pem = (_read(value, option) if value else None
                                 for value, option in files)
    return Access(token, ca_pem, cert_pem, key_pem)


def _read(path: str, option: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise SetlError(f"{option} {path}: cannot read: {exc.strerror}") from None


def addresses_from(value: str | None) -> list[str]:
    text = value or os.environ.get("SETL_MANAGER") or DEFAULT_ADDRESS
    return [part.strip() for part in text.split(",") if part.strip()]


class ManagerClient:
    def __init__(self, addresses: list[str], timeout_s: float = 30.0,
                 access: Access | None = None) -> None:
        self.addresses, self.timeout_s = list(addresses), timeout_s
        self.access = access or Access()

    def call(self, method: str, request: Any) -> Any:
        """The answer of the leader (for a change) or the first manager that answers; while
        no manager leads (an election under way), tried again for up to
        ``LEADER_WAIT_S``."""
        deadline = time.monotonic() + LEADER_WAIT_S
        while True:
            tried: list[str] = []
            queue = list(self.addresses)
            transport = ""
            try:
                for address in _in_turn(queue, tried):
                    with self.access.channel(address) as channel:
                        stub = manager_pb2_grpc.ManagerServiceStub(channel)
                        try:
                            return getattr(stub, method)(request, timeout=self.timeout_s,
                                                         metadata=self.access.metadata)
                        except grpc.RpcError as exc:
                            if (exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED  # type: ignore[attr-defined]
                                    and _connected(channel)):
                                raise ManagerUnavailableError(_late(address, method,
                                                                    self.timeout_s)) from None
                            transport = _rerouted(exc, tried, queue) or transport
            except NotLeaderError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)
                continue
            raise ManagerUnavailableError(_unavailable(tried, transport, self.access.tls))

    def stream(self, method: str, request: Any) -> Iterator[Any]:
        """A server-streaming call, without a deadline (it lasts as long as the work): the
        managers are tried and the leader followed as in :meth:`call` until the first
        message; an error after it is raised as the matching SetlError."""
        tried: list[str] = []
        queue = list(self.addresses)
        transport = ""
        for address in _in_turn(queue, tried):
            with self.access.channel(address) as channel:
                stub = manager_pb2_grpc.ManagerServiceStub(channel)
                answers = getattr(stub, method)(request, metadata=self.access.metadata)
                try:
                    first = next(answers, None)
                except grpc.RpcError as exc:
                    transport = _rerouted(exc, tried, queue) or transport
                    continue
                if first is None:
                    return
                yield first
                try:
                    yield from answers
                except grpc.RpcError as exc:
                    code = exc.code()  # type: ignore[attr-defined]
                    raise _ERRORS.get(code, SetlError)(exc.details()) from None  # type: ignore[attr-defined]
                finally:
                    answers.cancel()
                return
        raise ManagerUnavailableError(_unavailable(tried, transport, self.access.tls))


def wait_channel(client: ManagerClient, name: str, action: str, timeout_s: float
                 ) -> manager_pb2.ChannelInfo:
    """The channel once every pipeline runs (start) or no runner is left (pause, stop);
    raises, naming each pipeline that did not and why, at a failure or after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            info = client.call("GetChannel", manager_pb2.GetChannelRequest(name=name))
        except ManagerUnavailableError:  # a manager failing over, or one busy for a moment
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)
            continue
        states = {p.pipeline_id: p for p in info.pipelines}
        if action == "start":  # a pipeline failing for good pauses the channel
            failed = [p for p in states.values() if p.state == "failed"] \
                if info.status == model_pb2.CHANNEL_STATUS_PAUSE else []
            if failed:
                raise SetlError("; ".join(f"pipeline {p.pipeline_id} failed: {p.last_error}"
                                          for p in failed))
            late = [p for p in states.values() if p.state != "running"]
        else:  # a runner publishes "stopped" just before its node gives the pipeline up:
            # none is left once no pipeline has an owner (a failed one keeps it until then)
            late = [p for p in states.values() if p.owner_node and p.state != "failed"]
        if not late:
            return info
        if time.monotonic() >= deadline:
            raise SetlError(f"channel {name}: after {timeout_s:g} s " + "; ".join(
                f"pipeline {p.pipeline_id} is {p.state or 'not running'}"
                + (f" ({p.last_error})" if p.last_error else "")
                + ("" if p.owner_node or action != "start" else
                   " and no node runs it" + ("" if p.candidate_nodes else
                                            ": no live node is a candidate for it"))
                for p in late) + "; see setl status and the nodes' logs")
        time.sleep(0.5)


def _in_turn(queue: list[str], tried: list[str]) -> Iterator[str]:
    """The addresses of ``queue`` not tried yet, in order (``queue`` may grow meanwhile)."""
    while queue:
        address = queue.pop(0)
        if address not in tried:
            tried.append(address)
            yield address


def _rerouted(exc: grpc.RpcError, tried: list[str], queue: list[str]) -> str:
    """After a failed call, what to try next: a manager that could not be reached gives its
    transport error (the next address is tried); one that is not the leader puts the leader
    first in ``queue`` ("") or, with no leader to follow, raises NotLeaderError; any other
    error is raised as the matching SetlError."""
    code = exc.code()  # type: ignore[attr-defined]
    if code in _TRANSPORT:
        return exc.details() or ""  # type: ignore[attr-defined]
    details = exc.details() or ""  # type: ignore[attr-defined]
    if code == grpc.StatusCode.FAILED_PRECONDITION and details.startswith(STANDBY):
        leader = dict(exc.trailing_metadata() or ()).get(LEADER_TRAILER)  # type: ignore[attr-defined]
        if leader and leader not in tried:
            queue.insert(0, leader)
            return ""
        if queue:
            return ""  # another address may lead
        # no leader, or one that names itself (a stale entry) or cannot be reached: the
        # caller waits for the election
        raise NotLeaderError(None) from None
    raise _ERRORS.get(code, SetlError)(details) from None


def _connected(channel: grpc.Channel) -> bool:
    """Whether ``channel`` is connected now (a manager spoke gRPC on it). Asked of grpcio's
    channel itself: ``Channel.subscribe`` would start a polling thread that raises "Channel
    closed!" when the call's channel is closed under it. Unknown (another grpcio) is False:
    the caller then says "no manager answers", as it did before it could tell."""
    try:
        state = channel._channel.check_connectivity_state(False)  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False
    return state == _READY  # type: ignore[no-any-return]


def _late(address: str, method: str, timeout_s: float) -> str:
    """What to say when a manager took the call but did not answer in time: it runs, so
    "no manager answers" would mislead, and a change may have been made."""
    return (f"the manager at {address} took the call ({method}) but did not answer within "
            f"{timeout_s:g} s (busy, or ZooKeeper or a database slow to answer it); a change "
            "may or may not have been made: look (setl channel list, setl status) before "
            "trying again")


def _unavailable(tried: list[str], transport: str, tls: bool) -> str:
    """What to say when no manager could be reached, from the last transport error."""
    where = ", ".join(tried)
    if any(word in transport.lower() for word in _TLS_WORDS):
        found = re.search(r"OPENSSL_internal:(\w+(: [^:]+)?)", transport)
        reason = found.group(1) if found else transport
        return (f"no TLS connection to a manager at {where} ({reason}); "
                + ("check that --ca (or SETL_CA) is the CA that signed the manager's "
                   "certificate" if tls else "it speaks TLS: give --ca (or SETL_CA), the CA "
                   "that signed its certificate"))
    if "socket closed" in transport.lower():  # something listens, and hung up on us
        return (f"the manager at {where} closed the connection during the TLS handshake; "
                "if it asks for a client certificate, give --cert and --key (or SETL_CERT "
                "and SETL_KEY)" if tls else f"the server at {where} closed the connection; "
                "if it is a manager with TLS, give --ca (or SETL_CA), the CA that signed its "
                "certificate")
    return (f"no manager answers at {where}; start one with 'setl-manager' or point --manager "
            "(or SETL_MANAGER) at a running one")
