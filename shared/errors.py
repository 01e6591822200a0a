"""The one error hierarchy of setl.

Every error a user can see derives from :class:`SetlError`. Library errors (PyMySQL, kazoo,
grpc, py4j) are translated into one of these where the library is called. Messages say what
is wrong and what to do about it.
"""

from __future__ import annotations

from dataclasses import dataclass


class SetlError(Exception):
    """Base class of every error setl raises on purpose."""


@dataclass(frozen=True)
class ConfigIssue:
    """One problem found in a definition file: where it is and what is wrong."""

    file: str
    line: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        parts = [part for part in (where, self.path, self.message) if part]
        return ": ".join(parts)


class ConfigError(SetlError):
    """A definition or daemon configuration is invalid; carries every issue found."""

    def __init__(self, issues: list[ConfigIssue] | str) -> None:
        if isinstance(issues, str):
            issues = [ConfigIssue("", 0, "", issues)]
        self.issues = list(issues)
        super().__init__("\n".join(str(issue) for issue in self.issues))


class SecretError(ConfigError):
    """A password reference (``${ENV}`` or ``file:/path``) cannot be resolved."""


class DatabaseHostError(ConfigError):
    """A definition names a database host outside the ``database_hosts`` this machine's
    security settings allow: refused before any connection."""


class CoordinationError(SetlError):
    """ZooKeeper cannot be reached or refused an operation."""


class ZooKeeperUnavailableError(CoordinationError):
    """ZooKeeper did not answer in time or the connection to it is down: the same call may
    work once it is back."""


class OwnershipLostError(CoordinationError):
    """This node no longer holds a pipeline's ``mainstem`` (its ZooKeeper session ended, or
    the pipeline is being stopped): the runner ends without touching source or target."""


class StartRefusedError(SetlError):
    """``setl channel start``: the channel's source or target shows a problem that would stop
    its pipelines (the checks of ``setl check``); the channel is not started."""


class NotFoundError(SetlError):
    """A named channel, pipeline, source or node does not exist."""


class ConflictError(SetlError):
    """A concurrent change won a race (e.g. a definition changed while being written)."""


class NotLeaderError(SetlError):
    """A mutating call reached a manager that does not lead; carries the leader's address."""

    def __init__(self, leader: str | None) -> None:
        self.leader = leader
        hint = f"the leader is at {leader}" if leader else \
            "no manager leads right now; retry shortly"
        super().__init__(f"this manager is a standby: {hint}")


class ManagerUnavailableError(SetlError):
    """The admin CLI cannot reach any manager."""


class AuthenticationError(SetlError):
    """The manager refused a call: no token, or not the token it was configured with."""


class PermissionDeniedError(AuthenticationError):
    """The manager knows the token but it does not allow this call (a subscription reader's
    token outside its channels, or for the admin API)."""


class SourceError(SetlError):
    """The source database is unreachable or misconfigured for replication."""


class PositionLostError(SourceError):
    """The source no longer has the binlog at the pipeline's position (purged, or never
    there): retrying cannot help, so the pipeline pauses at once."""


class PositionConflictError(SourceError):
    """A target's position row for the pipeline does not fit where the pipeline stands (a row
    of an earlier life of it, or a target that lost its row): going on would skip or repeat
    rows silently, so the pipeline pauses at once and says what to do."""


class CursorMovedError(PositionConflictError):
    """A runner's cursor save found a cursor in ZooKeeper it did not read or write (an
    operator set the position meanwhile): nothing is written over it."""


class LoadError(SetlError):
    """Writing a batch into a target database failed."""


class DisplacedError(LoadError):
    """An upsert of a row a window read updated another key's row (met on a unique key the
    look-up cannot compare): the batch is stopped, its transaction not committed."""


class DisplacedStop(DisplacedError):
    """Displaced rows the door will not delete (another pipeline may own them, or a key is
    displaced a second time): a retry meets the same rows (and a fresh memory would let the
    copies go round again), so the pipeline pauses at once."""


class FencedError(LoadError):
    """A newer owner writes this pipeline on a target; this (stale) owner must stop."""

    def __init__(self, message: str, target: str = "", found: int = 0) -> None:
        super().__init__(message)
        self.target, self.found = target, found  # where, and the owner epoch found there


class RowTooLargeError(LoadError):
    """A row whose statement would not fit the target's ``max_allowed_packet`` and cannot be
    written in pieces (a keyless table's): the same row fails again, so the pipeline pauses
    at once, before anything of the batch is sent, and says what to raise."""


class TransformError(SetlError):
    """User code (a processor) or an expression failed on a row: the same row fails again,
    so the pipeline pauses at once instead of retrying."""


class ShardError(SetlError):
    """A row that cannot be routed: its shard value is missing, NULL or not an integer (a
    retry routes it no better: the pipeline pauses at once)."""


# Errors of a definition or of user code: retrying cannot help, the pipeline pauses at once.
DEFINITION_ERRORS = (ConfigError, TransformError, ShardError)
# what a retry cannot mend: the pipeline pauses at once and says why
PAUSE_AT_ONCE = (*DEFINITION_ERRORS, PositionLostError, PositionConflictError,
                 RowTooLargeError, DisplacedStop)


class SparkStartError(SetlError):
    """The node's Spark session did not start (Java, the ``spark`` section of the node
    config). A pipeline streams its small batches in the node meanwhile, but its failures
    count towards ``max_retries`` even when batches loaded: it pauses and says why."""


class SandboxError(SetlError):
    """A sandbox server failed to install, start, answer or stop."""


class VerifyError(SetlError):
    """``setl verify`` could not finish: the pipeline stopped or fell behind, a table could
    not be read, or repair requests were not served in time."""


class SubscriptionMovedError(SetlError):
    """A subscription's pipeline runs on no node just now (starting, retrying, failing
    over): its reader connects again and resumes from what it acknowledged."""


class NodeCallError(SetlError):
    """A node refused or failed a call the manager forwarded to it (``setl verify``);
    carries the node's gRPC status code name, which the manager passes on."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


class FreeDoorRequestError(SetlError):
    """A retl_buffer row setl cannot serve (unknown table, bad PK_DATA, wrong key parts);
    it is logged, counted and skipped, never stops the pipeline."""


def with_context(cls: type[SetlError], message: str) -> SetlError:
    """``cls(message)``, or a plain SetlError for a class that takes other arguments."""
    try:
        return cls(message)
    except TypeError:
        return SetlError(message)


class WebhookError(SetlError):
    """A webhook did not accept a notification (no answer, or a status other than 2xx)."""
