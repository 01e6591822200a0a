"""The demo behind `make demo`: sandbox up, manager and node started, the demo channel
applied and shown. `python scripts/demo.py down` stops everything it started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SANDBOX = ROOT / ".sandbox"
DAEMONS = SANDBOX / "daemons.json"
MANAGER = "127.0.0.1:7310"

sys.path.insert(0, str(ROOT))
from shared.sandbox import Sandbox, pid_alive  # noqa: E402


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
    known = json.loads(DAEMONS.read_text()) if DAEMONS.exists() else {}
    for name, pid in known.items():
        if pid_alive(pid):
            os.kill(pid, 15)
            print(f"stopped {name} (pid {pid})")
    DAEMONS.unlink(missing_ok=True)
    stopped = Sandbox(SANDBOX).down()
    print(f"sandbox stopped: {', '.join(stopped) or 'nothing was running'}")


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
    step("5. an invalid file is refused with every error and stores nothing")
    bad = SANDBOX / "bad-demo.yaml"
    bad.write_text("channels:\n  - name: Demo\n    pipelines:\n      - name: p\n"
                   "        source: nowhere\n        target: sandbox-target\n"
                   "        parallelism: five\n        pairs: []\n")
    setl("apply", "-f", str(bad.relative_to(ROOT)), check=False)
    print("\nThe demo keeps running. Try: .venv/bin/setl status --watch"
          "\nStop it with: make demo-down")


if __name__ == "__main__":
    main()
