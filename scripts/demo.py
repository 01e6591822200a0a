"""The demo behind `make demo`: sandbox up, manager and node started, the demo channel
applied and started, a mixed insert/update/delete workload written on the source while the
status shows it arriving, and finally source and target compared row by row.
`python scripts/demo.py down` stops everything it started."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SANDBOX = ROOT / ".sandbox"
DAEMONS = SANDBOX / "daemons.json"
MANAGER = "127.0.0.1:7310"

sys.path.insert(0, str(ROOT))
import pymysql  # noqa: E402

from shared.sandbox import Sandbox, pid_alive, stop_pid  # noqa: E402

TABLES = {
    "customers": "id INT PRIMARY KEY, name VARCHAR(100), balance DECIMAL(12,2), "
                 "updated DATETIME(6)",
    "orders": "id BIGINT PRIMARY KEY, customer_id INT NOT NULL, amount DECIMAL(12,2), "
              "note TEXT, created DATETIME(6)",
}


def step(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def setl(*args: str, check: bool = True) -> int:
    print(f"$ setl {' '.join(args)}", flush=True)
    code = subprocess.run([str(BIN / "setl"), "--manager", MANAGER, *args], cwd=ROOT).returncode
    if check and code != 0:
        sys.exit(f"demo: 'setl {' '.join(args)}' failed with exit code {code}")
    return code


def start_daemons() -> dict[str, int]:
    known = json.loads(DAEMONS.read_text()) if DAEMONS.exists() else {}
    logs = SANDBOX / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    commands = {
        "manager": [str(BIN / "setl-manager"), "--config", "conf/manager.yaml"],
        "node-1": [str(BIN / "setl-node"), "--id", "1", "--config", "conf/node.yaml"],
    }
    for name, command in commands.items():
        if name in known and pid_alive(known[name]):
            print(f"{name} already running (pid {known[name]})")
            continue
        process = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL,
                                   stdout=open(logs / f"{name}.log", "ab"),
                                   stderr=subprocess.STDOUT, start_new_session=True)
        known[name] = process.pid
        print(f"started {name} (pid {process.pid}), log: .sandbox/logs/{name}.log")
    DAEMONS.write_text(json.dumps(known))
    return known


def wait_manager() -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done = subprocess.run([str(BIN / "setl"), "--manager", MANAGER, "status"],
                              capture_output=True, cwd=ROOT)
        if done.returncode == 0 and b"1 node(s)" in done.stdout:
            return
        time.sleep(0.5)
    sys.exit("demo: manager or node did not come up; see .sandbox/logs/")


def down() -> None:
    """Stop the daemons, each waited for until it has exited (a second SIGTERM aborts one
    that did not within 20 s), then the sandbox. Says so if anything is still running."""
    known = json.loads(DAEMONS.read_text()) if DAEMONS.exists() else {}
    still = []
    for name, pid in known.items():
        if not pid_alive(pid):
            continue
        outcome = stop_pid(pid, timeout_s=20, then=signal.SIGTERM)
        if outcome == "exited":
            print(f"stopped {name} (pid {pid})")
        elif outcome == "forced":
            print(f"{name} (pid {pid}) did not exit within 20s of SIGTERM; aborted it with a "
                  "second SIGTERM")
        else:
            print(f"{name} (pid {pid}) is STILL RUNNING after two SIGTERMs; kill -9 {pid}")
            still.append(name)
    DAEMONS.unlink(missing_ok=True)
    stopped = Sandbox(SANDBOX).down()
    print(f"sandbox stopped: {', '.join(map(str, stopped)) or 'nothing was running'}")
    if still or any(server.outcome == "running" for server in stopped):
        sys.exit(1)


def connect(server: str) -> pymysql.Connection:
    return pymysql.connect(**Sandbox(SANDBOX).connection(server), autocommit=True,
                           charset="utf8mb4")


def create_tables() -> None:
    """Fresh, empty demo tables on both sides (a rerun starts from scratch)."""
    for server, schema in (("source", "demo"), ("target", "demo_copy")):
        with connect(server) as conn, conn.cursor() as cursor:
            # both sides reset by hand, not a change to replicate: on a rerun the channel
            # runs, and a DROP TABLE of a table it replicates pauses it (ddl_sync is off)
            cursor.execute("SET SESSION sql_log_bin = 0")
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS {schema}")
            for table, columns in TABLES.items():
                cursor.execute(f"DROP TABLE IF EXISTS {schema}.{table}")
                cursor.execute(f"CREATE TABLE {schema}.{table} ({columns})")
    print("empty demo.customers and demo.orders on the source, demo_copy.* on the target")


def status_line() -> str:
    done = subprocess.run([str(BIN / "setl"), "--manager", MANAGER, "status"],
                          capture_output=True, text=True, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("demo.")]
    return lines[0] if lines else done.stdout.strip()


def running(line: str) -> bool:
    """Whether a pipeline's line of ``setl status`` says it runs: its state column is
    exactly ``running`` (``not running`` is not)."""
    return line.split()[2:3] == ["running"]


def wait_running() -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = status_line()
        if running(line):
            print(line)
            return
        print(f"waiting for the pipeline (Spark starts once per node): {line.split()[2:3]}",
              flush=True)
        time.sleep(2)
    sys.exit("demo: the pipeline did not start; see .sandbox/logs/node-1.log")


def workload(seconds: float = 8.0) -> None:
    """Inserts, updates, deletes and key changes in small transactions, with live status."""
    rng = random.Random()
    with connect("source") as conn, conn.cursor() as cursor:
        cursor.execute("SELECT COALESCE(MAX(id), 0) FROM demo.orders")
        next_order = int(cursor.fetchone()[0]) + 1
        started, shown, transactions = time.monotonic(), 0.0, 0
        while time.monotonic() - started < seconds:
            customer = rng.randrange(1, 201)
            cursor.execute("BEGIN")
            cursor.execute(
                "INSERT INTO demo.customers VALUES (%s, %s, %s, NOW(6)) ON DUPLICATE KEY UPDATE "
                "balance = balance + VALUES(balance), updated = NOW(6)",
                (customer, f"customer {customer}", rng.randrange(1, 100)))
            cursor.execute("INSERT INTO demo.orders VALUES (%s, %s, %s, %s, NOW(6))",
                           (next_order, customer, rng.randrange(1, 500),
                            rng.choice(["", None, "gift", "電子"])))
            next_order += 1
            if rng.random() < 0.2:
                cursor.execute("DELETE FROM demo.orders WHERE customer_id = %s ORDER BY id LIMIT 1",
                               (rng.randrange(1, 201),))
            if rng.random() < 0.05:  # a primary key change
                cursor.execute("UPDATE IGNORE demo.customers SET id = id + 1000 WHERE id = %s",
                               (rng.randrange(1, 201),))
            cursor.execute("COMMIT")
            transactions += 1
            if time.monotonic() - shown >= 1.0:
                shown = time.monotonic()
                print(f"{transactions:6d} source transactions | {status_line()}", flush=True)
            time.sleep(0.005)
    print(f"wrote {transactions} transactions")


def show_metrics() -> None:
    """A few of the node's Prometheus metrics for the demo pipeline (conf/node.yaml)."""
    url = "http://127.0.0.1:7321/metrics"
    print(f"$ curl -s {url} | grep -E '^setl_pipeline_(rows_total|batches_total|delay|"
          "window_batches)'")
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
    except OSError as exc:
        print(f"(the node's metrics did not answer: {exc})")
        return
    wanted = ("setl_pipeline_rows_total", "setl_pipeline_batches_total",
              "setl_pipeline_delay_seconds", "setl_pipeline_window_batches")
    print("\n".join(line for line in text.splitlines() if line.startswith(wanted)))


def compare() -> list[str]:
    """One line per table: equal, or the keys that differ."""
    report = []
    with connect("source") as src, connect("target") as dst:
        for table in TABLES:
            rows = []
            for conn, schema in ((src, "demo"), (dst, "demo_copy")):
                with conn.cursor() as cursor:
                    cursor.execute(f"SELECT * FROM {schema}.{table} ORDER BY id")
                    rows.append({row[0]: row for row in cursor.fetchall()})
            differing = sorted(k for k in rows[0].keys() | rows[1].keys()
                               if rows[0].get(k) != rows[1].get(k))
            report.append(f"{table}: {len(differing)} differing keys, e.g. {differing[:10]}"
                          if differing else f"{table}: equal ({len(rows[0])} rows)")
    return report


def wait_equal(timeout_s: float = 60) -> bool:
    """Compare until equal (replication may still be draining) or the time is up."""
    deadline = time.monotonic() + timeout_s
    while True:
        report = compare()
        same = all(": equal" in line for line in report)
        if same or time.monotonic() > deadline:
            print("\n".join(report))
            return same
        time.sleep(0.5)


def main() -> None:
    if sys.argv[1:] == ["down"]:
        down()
        return
    step("1. sandbox: ZooKeeper, source and target MariaDB on 127.0.0.1")
    subprocess.run([str(BIN / "setl"), "sandbox", "up"], cwd=ROOT, check=True)
    step("2. manager and node")
    start_daemons()
    wait_manager()
    step("3. apply the demo channel (twice: the second apply changes nothing)")
    setl("apply", "-f", "conf/channels/demo.yaml")
    setl("apply", "-f", "conf/channels/demo.yaml")
    step("4. what is stored and who runs it")
    setl("channel", "list")
    setl("channel", "show", "demo")
    setl("node", "list")
    step("5. an invalid file is refused with every error and stores nothing (a password file "
         "outside the node's secret_dirs among them)")
    bad = SANDBOX / "bad-demo.yaml"
    bad.write_text("sources:\n  - {name: stolen, host: 127.0.0.1, password: 'file:/etc/shadow'}\n"
                   "channels:\n  - name: Demo\n    pipelines:\n      - name: p\n"
                   "        source: nowhere\n        target: sandbox-target\n"
                   "        parallelism: five\n        pairs: []\n")
    setl("apply", "-f", str(bad.relative_to(ROOT)), check=False)
    step("6. start the channel")
    create_tables()
    setl("channel", "start", "demo")
    wait_running()
    step("7. a mixed workload on the source, arriving on the target")
    workload()
    step("8. source and target compared row by row")
    same = wait_equal()
    setl("status")
    print("\nsource and target are EQUAL" if same else "\nsource and target DIFFER")
    step("9. watching it: Prometheus metrics and the status page")
    show_metrics()
    print("\nThe demo keeps running. Try: .venv/bin/setl status --watch, the status page at "
          "http://127.0.0.1:7311/ (metrics of the manager at /metrics there, of the node at "
          "http://127.0.0.1:7321/metrics)\nStop it with: make demo-down")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
