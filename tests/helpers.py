"""Helpers shared by the integration tests: waiting on conditions, daemon subprocesses."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
_PR_SET_PDEATHSIG = 1


def wait_for(check: Callable[[], T], timeout_s: float = 20.0, what: str = "condition",
             interval_s: float = 0.1) -> T:
    """Poll ``check`` until it returns something truthy; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # keep polling; the last error is reported
            last_error = exc
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}"
                         + (f" (last error: {last_error!r})" if last_error else ""))


def _die_with_parent() -> None:
    """Children of the test run get SIGKILL when pytest dies, so none outlives it."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Daemon:
    """A setl-manager or setl-node subprocess with its log file."""

    def __init__(self, args: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.args, self.log_path = args, log_path
        self.log = open(log_path, "ab")
        self.process = subprocess.Popen(
            args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=ROOT, env={**os.environ, **(env or {})}, preexec_fn=_die_with_parent)

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """kill -9: no clean-up at all."""
        if self.alive():
            self.process.kill()
        self.process.wait(10)

    def terminate(self, timeout_s: float = 20.0) -> int:
        if self.alive():
            self.process.terminate()
        return self.process.wait(timeout_s)

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()
