"""One retry policy for MySQL, ZooKeeper and gRPC calls: backoff, jitter, deadline.

``sleep`` and ``clock`` are injected so tests run instantly.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger("setl.retry")


@dataclass(frozen=True)
class RetryPolicy:
    """Retry ``max_tries`` times (0 = until ``deadline_s``), waiting ``delay_s`` × backoff."""

    max_tries: int = 5
    delay_s: float = 0.1
    backoff: float = 2.0
    max_delay_s: float = 5.0
    jitter: float = 0.2
    deadline_s: float | None = None
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)

    def delays(self) -> list[float]:
        """The waits between tries, without jitter (for display and tests)."""
        waits, delay = [], self.delay_s
        for _ in range(max(self.max_tries - 1, 0)):
            waits.append(min(delay, self.max_delay_s))
            delay *= self.backoff
        return waits

    def call(self, func: Callable[[], T], retry_on: tuple[type[BaseException], ...],
             what: str = "call") -> T:
        """Run ``func``; on an exception of ``retry_on`` wait and try again; re-raise the last."""
        start = self.clock()
        delay, attempt = self.delay_s, 0
        while True:
            attempt += 1
            try:
                return func()
            except retry_on as exc:
                out_of_tries = self.max_tries and attempt >= self.max_tries
                wait = min(delay, self.max_delay_s) * (1 + random.uniform(-1, 1) * self.jitter)
                past_deadline = self.deadline_s is not None and \
                    self.clock() - start + wait > self.deadline_s
                if out_of_tries or past_deadline:
                    raise
                log.info("event=retry what=%s attempt=%d wait_s=%.2f error=%s", what, attempt,
                         wait, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                self.sleep(wait)
                delay *= self.backoff
