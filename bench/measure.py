"""What the benchmarks measure with: a node's process tree (RSS, CPU), delay percentiles,
the per-batch time split from the node's log, and the report every run writes."""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import guard

RESULTS = Path(__file__).resolve().parent / "results"
PROFILE_RATE = 97  # py-spy samples a second (odd, so it does not beat with 10 ms timers)
OTHER = "other Python (GC, outside the stages)"


def process_tree(pid: int) -> Iterator[int]:
    """A process and all its descendants (children of every thread), while they live."""
    stack = [pid]
    while stack:
        current = stack.pop()
        yield current
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                stack += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue


def tree_cpu_by_process(pid: int) -> dict[str, float]:
    """CPU seconds so far of a node's process tree split as the node's own process ("node"),
    Spark's JVM ("jvm") and everything under it, its Python workers ("workers")."""
    found = {"node": 0.0, "jvm": 0.0, "workers": 0.0}
    tick = os.sysconf("SC_CLK_TCK")
    for current in process_tree(pid):
        try:
            stat = Path(f"/proc/{current}/stat").read_text()
            name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat.rsplit(")", 1)[1]
            used = sum(int(value) for value in fields.split()[11:13]) / tick
        except (OSError, IndexError, ValueError):
            continue
        kind = "node" if current == pid else "jvm" if name == "java" else "workers"
        found[kind] += used
    return found


def tree_rss_kb(pid: int) -> int:
    """Resident memory of a process and all its descendants."""
    total = 0
    for current in process_tree(pid):
        try:
            with open(f"/proc/{current}/status") as status:
                total += next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
        except (OSError, StopIteration):
            continue
    return total


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of a process and its descendants so far."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for current in process_tree(pid):
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            continue
    return total


class RssSampler(threading.Thread):
    """The peak RSS of a process tree, sampled every 0.5 s until ``done`` is set."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_kb, self.done = pid, 0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            self.peak_kb = max(self.peak_kb, tree_rss_kb(self.pid))


class Profile:
    """py-spy recording a process tree's Python until :meth:`stop`, in raw form."""

    def __init__(self, pid: int, path: Path) -> None:
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        if not Path(spy).exists():
            raise RuntimeError("--profile needs py-spy: make setup installs it into .venv")
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        # --gil: only the thread holding the GIL, i.e. running Python, is sampled; without
        # it py-spy counted threads waiting on a socket or a queue as busy (its idle
        # detection fails here), and the stages summed to over twice the CPU spent
        self._spy = subprocess.Popen(
            [spy, "record", "--subprocesses", "--gil", "--nonblocking", "-r", str(PROFILE_RATE),
             "-f", "raw", "-o", str(path), "--pid", str(pid)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        self._spy.send_signal(2)
        self._spy.wait(60)

    def stages(self, stages: tuple[tuple[str, str], ...], rows: int) -> dict[str, float]:
        """µs of CPU per row by stage: a sample's stage is the first of ``stages`` whose
        frame text is in its stack."""
        samples: collections.Counter[str] = collections.Counter()
        for line in self.path.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            stage = next((name for name, frame in stages if frame in stack), OTHER)
            samples[stage] += int(count)
        return {stage: round(n / PROFILE_RATE / rows * 1e6, 1)
                for stage, n in samples.most_common()}


def percentile_ms(seconds: list[float], p: int) -> float:
    """The p-th percentile of delays given in seconds, in milliseconds (0 for none)."""
    ordered = sorted(seconds) or [0.0]
    return round(ordered[min(len(ordered) - 1, len(ordered) * p // 100)] * 1000, 1)


def time_split(log_text: str) -> dict[str, float]:
    """Mean per-batch milliseconds of E/T, waiting for E/T and load (the cursor is published
    off the load path), the mean rows of a batch and how many batches had rows."""
    fields: dict[str, list[float]] = {"et_ms": [], "wait_ms": [], "load_ms": [], "rows": []}
    for line in log_text.splitlines():
        if "event=batch_loaded" in line and " rows=0 " not in line:
            for name, values in fields.items():
                found = re.search(rf" {name}=([\d.]+)", line)
                if found:
                    values.append(float(found.group(1)))
    split = {name: round(statistics.mean(v), 1) for name, v in fields.items() if v}
    if fields["rows"]:
        split["batches"] = len(fields["rows"])
    # batches that went to Spark in a job with others (node.jobqueue), and those jobs
    gathered = [found.group(1).count(",") + 1 for found in
                re.finditer(r"event=spark_job_gathered .*?processIds=([\d,]+)", log_text)]
    if gathered:
        split["gathered_batches"], split["gathered_jobs"] = sum(gathered), len(gathered)
    return split


def pt_table_sync_differences(password: str, source_port: int, copy_port: int, schema: str,
                              tables: list[str]) -> list[str]:
    """``pt-table-sync --print`` from the source to a copy: one line per table that differs
    (what it would change, or its error)."""
    bad = []
    dsn = f"h=127.0.0.1,u=setl,p={password}"
    for table in tables:
        done = subprocess.run(
            ["pt-table-sync", "--print", "--no-check-slave",
             f"{dsn},P={source_port},D={schema},t={table}", f"{dsn},P={copy_port}"],
            capture_output=True, text=True, check=False)
        if done.returncode not in (0, 2) or done.stdout.strip():
            bad.append(f"{schema}.{table}: {(done.stdout or done.stderr).strip()[:200]}")
    return bad


def write_json(directory: Path, name: str, smoke: bool, body: dict[str, Any]
               ) -> tuple[dict[str, Any], Path]:
    """``body`` with the machine and the time as ``directory/name-<time>.json`` (or
    ``name-smoke.json``); return what was written and the path."""
    path = directory / f"{name}-{'smoke' if smoke else time.strftime('%Y%m%d-%H%M%S')}.json"
    report = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **body}
    directory.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str))
    return report, path


def write_report(directory: Path, name: str, smoke: bool, args: dict[str, Any],
                 results: list[dict[str, Any]], summary: dict[str, Any]
                 ) -> tuple[dict[str, Any], Path]:
    """Print the results as a table and write them as ``directory/name-<time>.json`` (or
    ``name-smoke.json``); return the report and its path. A real run's scenarios are compared
    with the last run of each (:mod:`bench.guard`): what got worse is printed and kept."""
    compared = {} if smoke else {"against_last": guard.against_last(directory, name, results)}
    report, path = write_json(directory, name, smoke,
                              {"args": args, "results": results, **summary, **compared})
    for result in results:
        print(" | ".join(f"{k}={v}" for k, v in result.items() if k != "differences"))
        for difference in result.get("differences", []):
            print(f"  DIFFERS: {difference}")
    for line in compared.get("against_last", {}).get("worse", []):
        print(f"  WORSE: {line}")
    if "node_peak_rss_mb" in summary:
        print(f"node peak RSS {summary['node_peak_rss_mb']} MB; per batch "
              f"{summary.get('per_batch_ms', '-')}")
    print(f"written to {path}")
    return report, path


def sysbench(port: int, password: str, db: str, *args: str,
             script: str = "oltp_write_only") -> str:
    """``sysbench`` ``script`` against the sandbox server on ``port``; its output."""
    command = ["sysbench", script, "--db-driver=mysql", "--mysql-host=127.0.0.1",
               f"--mysql-port={port}", "--mysql-user=setl", f"--mysql-password={password}",
               f"--mysql-db={db}", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"sysbench {' '.join(args)}: {done.stderr or done.stdout}")
    return done.stdout


def backlog_arguments(prog: str, doc: str | None, work: str, stream_seconds: float,
                      argv: list[str] | None) -> argparse.Namespace:
    """The options of a benchmark of a sysbench backlog then a stream (bench.lake,
    bench.subscribe), parsed; ``--smoke`` sets tiny sizes, for the test suite."""
    parser = argparse.ArgumentParser(prog=prog, description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--table-size", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=30, help="the backlog's OLTP part")
    parser.add_argument("--stream-seconds", type=float, default=stream_seconds)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for the test suite")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--work", type=Path, default=RESULTS.parent / ".work" / work)
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="py-spy each catch-up into DIR/<channel>.raw (slows it)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.tables, args.table_size, args.seconds, args.stream_seconds, args.rate = \
            2, 500, 2, 3, 50
    return args
