"""shared/lifecycle.py: a daemon's exit once its orderly stop is done."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

# a process whose pool worker waits on a socket that never answers (as an E/T worker
# reading a silent target's facts did), then leaves as the daemons' main() does
HANGING = textwrap.dedent("""
    import logging, socket, sys
    from concurrent.futures import ThreadPoolExecutor
    from shared.lifecycle import leave
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname())
    pool = ThreadPoolExecutor(1, thread_name_prefix="et-worker")
    pool.submit(client.recv, 1)
    print("waiting", flush=True)
    sys.exit(leave({code}, {wait_s}))
""")


def run(script: str) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                          text=True, timeout=60)


def test_a_thread_hanging_on_a_silent_socket_does_not_hold_the_exit() -> None:
    done = run(HANGING.format(code=3, wait_s=0.5))
    assert done.stdout == "waiting\n"
    assert done.returncode == 3
    assert "event=exit_leaves_threads threads=et-worker_0 waited_s=0.5" in done.stderr


def test_nothing_is_said_when_every_thread_ended() -> None:
    done = run("import sys\nfrom shared.lifecycle import leave\nsys.exit(leave(0, 5))")
    assert (done.returncode, done.stderr) == (0, "")
