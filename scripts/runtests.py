"""``make test``'s run: the unit tests (CPU-bound, about 1.5 minutes each time; twice: with
the compiled modules of ``node.compiled`` and with their pure-Python twins) and the quiet
integration modules (correctness on real servers and the benchmarks' smoke runs, no fault and
no timing in them, on a sandbox of their own, on the pure-Python path) beside the rest of the
integration tests (kills, failovers, races, mostly waiting on real servers; on the compiled
path), which pytest-xdist spreads over two processes, a module at a time to whichever is free,
each with a sandbox of its own. On 2 cores the three runs take about 18 minutes together, where
the main run alone took 26 in one process: its tests mostly wait.
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
MAIN_PROCESSES = 2  # the main integration run's pytest-xdist workers


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
        integration = subprocess.Popen(  # a module's tests share its cluster: one process
            [*pytest, "--numprocesses", str(MAIN_PROCESSES), "--dist", "loadfile",
             "tests/integration", *(f"--ignore={path}" for path in quiet)],
            cwd=ROOT, env=compiled)
        runs = [integration, *beside.values()]

        def forward(signum: int, _frame: object) -> None:  # the ceiling's SIGABRT, a ^C:
            for run in runs:  # each pytest, xdist's workers too, prints its threads' stacks
                if run.poll() is None:
                    # (the others' children are their sandbox's servers: left to pytest)
                    for pid in _children(run.pid) if run is integration else ():
                        _signal(pid, signum)
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


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, from /proc: of pytest-xdist's controller, its
    workers (each worker's sandbox is its own child)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    sys.exit(main())
