"""``setl sandbox``: a local MariaDB + ZooKeeper for the demo and the tests.

    setl sandbox [--dir DIR] [--base-port PORT] up [--second-target] [--owner-pid PID]
    setl sandbox [--dir DIR] [--base-port PORT] down [--purge] | status

It runs on this machine, without a manager (:mod:`shared.sandbox` starts and stops the
servers); ``up`` and ``status`` print each server with its address and state, and the
MariaDB user with its password reference.
"""

from __future__ import annotations

import argparse
from typing import Any

from manager import render
from shared import sandbox


def add_command(commands: Any) -> None:
    """``setl sandbox`` and its actions, among ``commands``."""
    box = commands.add_parser("sandbox", help="local MariaDB + ZooKeeper for demo and tests")
    box.add_argument("--dir", default=".sandbox", help="folder of the sandbox (default .sandbox)")
    box.add_argument("--base-port", type=int, default=sandbox.DEMO_BASE_PORT,
                     help="fixed ports from here (source +6, target +7, target2 +8, "
                     "ZooKeeper +81); 0 for free ports (default %(default)s)")
    box_actions = box.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = box_actions.add_parser("up", help="start (idempotent) and wait until ready")
    up.add_argument("--second-target", action="store_true", help="also a second target MariaDB")
    up.add_argument("--owner-pid", type=int, help="stop the sandbox when this process exits")
    box_actions.add_parser("down", help="stop what 'up' started").add_argument(
        "--purge", action="store_true", help="also delete the data")
    box_actions.add_parser("status", help="connection settings")


def run(args: argparse.Namespace) -> int:
    """``setl sandbox up|down|status``: its servers as a table, and how to log in."""
    box = sandbox.Sandbox(args.dir, base_port=args.base_port or None)
    if args.action == "up":
        servers = box.up(second_target=args.second_target, owner_pid=args.owner_pid)
    elif args.action == "down":
        stopped = box.down(purge=args.purge)
        print(f"stopped: {', '.join(map(str, stopped)) or 'nothing was running'}")
        return 1 if any(server.outcome == "running" for server in stopped) else 0
    else:
        servers = box.servers()
        if not servers:
            print(f"no sandbox running under {box.root}; start it with: setl sandbox up")
            return 1
    rows = [(s.name, s.kind, s.address, s.pid, "up" if sandbox.pid_alive(s.pid) else "down")
            for s in servers.values()]
    print(render.table(["SERVER", "KIND", "ADDRESS", "PID", "STATE"], rows))
    print(f"mariadb user: {sandbox.USER}, password reference: file:{box.secret_file}")
    return 0
