"""Stopping a process waits until it has exited, and says how it ended."""

from __future__ import annotations

import signal
import subprocess
import sys

from shared.sandbox import dying_with_parent, stop_pid


def start(code: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(dying_with_parent([sys.executable, "-c", code]),
                               stdout=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stdout.readline() == b"ready\n"  # its signal handlers are in place
    return process


def test_a_process_that_obeys_sigterm_has_exited_when_stop_returns() -> None:
    process = start("import time; print('ready', flush=True); time.sleep(60)")
    assert stop_pid(process.pid, timeout_s=20) == "exited"
    assert process.wait(1) == -signal.SIGTERM


def test_one_that_ignores_sigterm_gets_the_second_signal_and_it_is_reported() -> None:
    process = start("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                    "print('ready', flush=True); time.sleep(60)")
    assert stop_pid(process.pid, timeout_s=0.5) == "forced"
    assert process.wait(1) == -signal.SIGKILL


def test_one_that_survives_both_is_reported_running() -> None:
    process = start("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                    "print('ready', flush=True); time.sleep(60)")
    try:
        assert stop_pid(process.pid, timeout_s=0.2, then=signal.SIGTERM, grace_s=0.2) == \
            "running"
    finally:
        process.kill()
        process.wait(5)
