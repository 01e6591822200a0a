"""How a pipeline runner pauses: which failures pause it (at once, or after
``max_retries`` in a row without progress), and, for a subscription, the wait before the
pause for its reader to acknowledge every batch handed to it before the failed one — its
position is then right before that batch, so a move past it, what a pause says to do, skips
that batch alone (docs/subscriptions.md). The pause itself is :mod:`node.pause`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from node import pause
from node.primary import SwitchPending
from node.target.base import TargetLoader
from shared.errors import (
    PAUSE_AT_ONCE,
    FencedError,
    OwnershipLostError,
    SetlError,
    SparkStartError,
)

log = logging.getLogger("setl.node.pipeline")


class RunnerPause:
    """The pause half of :class:`node.pipeline.PipelineRunner` (its attributes are the
    runner's)."""

    ctx: Any
    pipeline_id: str
    state: str
    last_error: str
    metrics: Any
    stop_event: threading.Event
    batches_loaded: int
    unacked_left: int
    _attempt_loader: TargetLoader | None
    _loaded_before: int  # batches loaded when the attempt began
    _failures: int  # failed attempts in a row
    _pause_note: str  # what the pause adds to its text (a subscription's acknowledgements)

    publish: Callable[[], None]  # (RunnerStatus's)

    def _count(self, exc: Exception) -> int:
        """The failures in a row with this one (a Spark that cannot start is no progress,
        whatever ran in the node meanwhile)."""
        loaded = self._progressed(self._loaded_before) and \
            not isinstance(exc, SparkStartError)
        return 1 if loaded else self._failures + 1

    def _pausing(self, exc: Exception) -> bool:
        """Whether this failure of an attempt pauses the pipeline (as :meth:`run` tells)."""
        if isinstance(exc, SwitchPending):
            return False
        if isinstance(exc, PAUSE_AT_ONCE):
            return True
        if isinstance(exc, (FencedError, OwnershipLostError)):
            return False
        return self._count(exc) > self.ctx.pipeline.params.max_retries

    def _before_pause(self, loader: TargetLoader, exc: Exception) -> None:
        """A subscription's pause waits for its reader to acknowledge what was handed to it
        before the failed batch (its position is then right before it, and a move past it,
        what a pause says to do, skips that batch alone); the pause's text says how that
        ended. A stop or a lost ownership meanwhile leaves them unacknowledged: sent again."""
        drain = getattr(loader, "drain", None)
        if drain is None:
            return
        message = str(exc) if isinstance(exc, SetlError) else f"{type(exc).__name__}: {exc}"

        def report(text: str, left: int) -> None:
            if self.state != "stopping":
                self.state = "pausing"
            self.last_error, self.unacked_left = f"{message}\n{text}", left
            log.warning("event=pause_waits_for_acks pipeline=%s unacked=%d", self.pipeline_id,
                        left)
            self._publish_connected()
        self._pause_note, self.unacked_left = drain(self.stop_event, self._may_own,
                                                    self.ctx.channel.name, report)

    def _publish_connected(self) -> None:
        """The wait's state, published at once while ZooKeeper is connected. Disconnected, a
        write waits for the connection (up to the client's call timeout), and the wait with
        it, deaf to a stop meanwhile: the node's refresh publishes the state once ZooKeeper
        is back (the runner's state and text are already set)."""
        if self._disconnected():
            log.info("event=pause_wait_not_published pipeline=%s reason=zk_disconnected",
                     self.pipeline_id)
            return
        self.publish()

    def _disconnected(self) -> bool:
        client = getattr(self.ctx, "client", None)
        return client is not None and not client.connected

    def _may_own(self) -> bool:
        """What a drain asks: whether this node may still hold the pipeline. While ZooKeeper
        is disconnected with the session intact nobody else can take it (its mainstem is the
        session's): the wait goes on; a session lost stops the runner (the supervisor's
        ``_on_state``), and one that came back as another session no longer owns it."""
        return self._disconnected() or bool(self.ctx.owns())

    def _progressed(self, loaded_before: int) -> bool:
        """Whether the failed attempt moved the pipeline on (its failures count from one
        again): a batch loaded; for a loader that holds nothing until its reader acknowledges
        it (a subscription), an acknowledgement, since the next attempt hands every batch
        not acknowledged over again (a slow or absent reader never paused the pipeline)."""
        loader = self._attempt_loader
        if loader is not None and not getattr(loader, "durable", True):
            return getattr(loader, "acks", 0) > 0
        return self.batches_loaded > loaded_before

    def _fail_for_good(self, message: str) -> None:
        cut_short = getattr(self, "unacked_left", 0) > 0  # the wait for the reader was
        # (stopped: a shutdown, a lost session, a redefinition, or the operator's stop or
        # pause, whose status says so already, a pause writing over START only; or this node
        # found it does not own the pipeline, or was fenced: the supervisor may take it back)
        self.state = "failed" if not cut_short or self.stop_event.is_set() else \
            "lost ownership"  # (node.pipeline.LOST_OWNERSHIP)
        self.last_error = message
        self._publish_connected()  # (disconnected: the node's refresh publishes it)
        if cut_short:  # the next owner hands them over again and waits: no pause here
            log.warning("event=pause_left_to_next_owner pipeline=%s unacked=%d state=%s",
                        self.pipeline_id, self.unacked_left, self.state)
            return
        self.metrics.paused()
        log.error("event=pipeline_paused pipeline=%s error=%s", self.pipeline_id,
                  message.replace("\n", " "))
        self._pause()

    def _pause(self) -> None:
        pause.pause_channel(self.ctx, self.pipeline_id, self.stop_event)

