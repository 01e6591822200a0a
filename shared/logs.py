"""Structured logs: one line per event, ``key=value`` pairs after the event name.

Loggers are named ``setl.<part>``; messages start with ``event=<name>`` and name the channel,
pipeline and processId where they concern one.
"""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s.%(msecs)03d %(levelname)s %(name)s %(message)s"


def setup(level: str = "info", stream=sys.stderr) -> None:  # type: ignore[no-untyped-def]
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(FORMAT, "%Y-%m-%dT%H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("kazoo", "py4j", "pymysqlreplication"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
