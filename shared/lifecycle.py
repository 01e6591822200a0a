"""Two-step shutdown for the daemons: the first SIGTERM/SIGINT asks the process to finish
its current unit of work and exit; a second one aborts at once."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger("setl.lifecycle")
ABORT_EXIT_CODE = 130


class Shutdown:
    def __init__(self) -> None:
        self.requested = threading.Event()

    def install(self) -> Shutdown:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.requested.is_set():
            log.warning("event=abort signal=%s", signal.Signals(signum).name)
            os._exit(ABORT_EXIT_CODE)
        log.info("event=shutdown_requested signal=%s hint=\"send it again to abort\"",
                 signal.Signals(signum).name)
        self.requested.set()

    def wait(self, timeout_s: float | None = None) -> bool:
        return self.requested.wait(timeout_s)


def run_bounded(func: Callable[[], None], budget_s: float, name: str = "bounded") -> bool:
    """Run ``func`` in a daemon thread and wait at most ``budget_s``; True if it finished.
    For clean-up on the way out that must not hold the exit (ZooKeeper, Spark)."""
    thread = threading.Thread(target=func, name=name, daemon=True)
    thread.start()
    thread.join(budget_s)
    return not thread.is_alive()


def leave(code: int, wait_s: float) -> int:
    """The exit code for the daemon's ``main``, once its orderly stop is done: the threads
    still running (an E/T worker waiting on a target that stopped answering, a client
    library's) get ``wait_s`` in all to end; the interpreter would join them at exit for as
    long as they hang, so past that the process ends at once, saying which it left. What
    they were doing is safe to cut: every position that counts is on a target."""
    here = threading.current_thread()
    deadline = time.monotonic() + wait_s
    for thread in threading.enumerate():
        if thread is not here and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [thread.name for thread in threading.enumerate()
             if thread is not here and not thread.daemon and thread.is_alive()]
    if not stuck:
        return code
    log.warning("event=exit_leaves_threads threads=%s waited_s=%g hint=\"they hang on "
                "something that does not answer; nothing they held is lost\"",
                ",".join(stuck), wait_s)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)
