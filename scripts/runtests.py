"""``make test``'s run: the unit tests (CPU-bound, about 25 s) beside the integration tests
(mostly waiting on real servers), so the whole run takes about as long as the integration
tests alone. The integration run prints as it goes; the unit run's output follows it. The
exit status is the first failure's (0 when both pass)."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    pytest = [sys.executable, "-m", "pytest", "-q"]
    with tempfile.TemporaryFile("w+") as unit_out:
        unit = subprocess.Popen([*pytest, "tests/unit"], cwd=ROOT, stdout=unit_out,
                                stderr=subprocess.STDOUT, text=True)
        integration = subprocess.Popen([*pytest, "tests/integration"], cwd=ROOT)

        def forward(signum: int, _frame: object) -> None:  # the ceiling's SIGABRT, a ^C:
            for run in (unit, integration):  # each pytest prints its threads' stacks
                if run.poll() is None:
                    run.send_signal(signum)
        for signum in (signal.SIGABRT, signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, forward)
        integration.wait()
        unit.wait()
        unit_out.seek(0)
        print("\n---- tests/unit ----", flush=True)
        sys.stdout.write(unit_out.read())
    return integration.returncode or unit.returncode


if __name__ == "__main__":
    sys.exit(main())
