"""``make test``'s run: the unit tests (CPU-bound, about 25 s; twice: with the compiled
modules of ``node.compiled`` and with their pure-Python twins) and the quiet integration
modules (correctness on real servers and the benchmarks' smoke runs, no fault and no timing
in them: about 9 minutes, on a sandbox of their own, on the pure-Python path) beside the rest
of the integration tests (kills, failovers, races, mostly waiting on real servers; on the
compiled path), so the whole run takes about as long as the last alone.
The main integration run prints as it goes; the others' output follows it. The exit status
is the first failure's (0 when all pass)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PURE = "SETL_PURE_PYTHON"  # node.compiled: the modules' pure-Python twins


# integration modules without faults, kills or timing (a new module runs in the main run);
# the benchmarks' smoke runs each start a sandbox of their own
QUIET = ("api_security", "bench_smoke", "check", "chunks", "compiled", "ddl", "ddl_apply",
         "ddl_pauses", "decode", "foundation", "invariants", "keys", "lake_schemas", "lake_verify",
         "lookup", "names", "operating", "randomized", "savepoints", "schemas", "security", "shard",
         "spark_cluster", "spark_jobs", "subscription_types", "tls", "transform", "twoway",
         "twoway_ddl", "twoway_refusals", "types", "verify", "verify_compare", "verify_keyless",
         "verify_writers")


def main() -> int:
    pytest = [sys.executable, "-m", "pytest", "-q", "--durations=40"]
    quiet = [f"tests/integration/test_{name}.py" for name in QUIET]
    compiled = {k: v for k, v in os.environ.items() if k != PURE}
    pure = {**compiled, PURE: "1"}
    both = " ".join(map(shlex.quote, [*pytest, "tests/unit"]))
    with tempfile.TemporaryFile("w+") as unit_out, tempfile.TemporaryFile("w+") as quiet_out:
        beside = {"tests/unit (compiled, then pure Python)": subprocess.Popen(
                      ["/bin/sh", "-c", f"{both}; a=$?; echo '---- tests/unit, pure Python "
                       f"----'; {PURE}=1 {both}; b=$?; exit $((a | b))"],
                      cwd=ROOT, env=compiled, stdout=unit_out, stderr=subprocess.STDOUT,
                      text=True),
                  "quiet integration modules (pure Python)": subprocess.Popen(
                      [*pytest, *quiet], cwd=ROOT, env=pure, stdout=quiet_out,
                      stderr=subprocess.STDOUT, text=True)}
        integration = subprocess.Popen(
            [*pytest, "tests/integration", *(f"--ignore={path}" for path in quiet)],
            cwd=ROOT, env=compiled)
        runs = [integration, *beside.values()]

        def forward(signum: int, _frame: object) -> None:  # the ceiling's SIGABRT, a ^C:
            for run in runs:  # each pytest prints its threads' stacks
                if run.poll() is None:
                    run.send_signal(signum)
        for signum in (signal.SIGABRT, signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, forward)
        for run in runs:
            run.wait()
        for name, out in zip(beside, (unit_out, quiet_out), strict=True):
            out.seek(0)
            print(f"\n---- {name} ----", flush=True)
            sys.stdout.write(out.read())
    return next((run.returncode for run in runs if run.returncode), 0)


if __name__ == "__main__":
    sys.exit(main())
