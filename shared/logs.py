"""Structured logs: one line per event, ``key=value`` pairs after the event name.

Loggers are named ``setl.<part>``; messages start with ``event=<name>`` and name the channel,
pipeline and processId where they concern one.
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

FORMAT = "%(asctime)s.%(msecs)03d %(levelname)s %(name)s %(message)s"


def setup(level: str = "info", stream=sys.stderr) -> None:  # type: ignore[no-untyped-def]
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(FORMAT, "%Y-%m-%dT%H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("kazoo", "py4j", "pymysqlreplication"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


GC_PAUSE_MIN_MS = 20.0


def log_gc_pauses(min_ms: float = GC_PAUSE_MIN_MS) -> Callable[[str, dict[str, Any]], None]:
    """Log (debug) each collection of Python's cycle collector that took ``min_ms`` or more,
    as ``event=gc_pause``: it holds the GIL, so every thread of the process waited (the time
    includes any wait for a CPU meanwhile). Returns the callback, for ``gc.callbacks``."""
    log = logging.getLogger("setl.gc")
    began = [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
            return
        ms = (time.perf_counter() - began[0]) * 1000
        if ms >= min_ms:
            log.debug("event=gc_pause generation=%d ms=%.1f collected=%d", info["generation"],
                      ms, info["collected"])

    gc.callbacks.append(timed)
    return timed
