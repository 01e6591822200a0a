"""The sandbox's state file is replaced whole: a reader of the servers while a server is
started again (the chaos soak's watcher, a test's connection) never finds none."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from shared.sandbox import Sandbox, ServerInfo

SERVERS = {name: ServerInfo(name, "mariadb", 40000 + i, 1000 + i, f"/data/{name}", i)
           for i, name in enumerate(("source", "target", "target2"))}


def _rewrite(root: str, times: int) -> None:
    box = Sandbox(Path(root))
    for _ in range(times):
        box._save(SERVERS)


def test_a_reader_never_finds_the_state_half_written(tmp_path: Path) -> None:
    box = Sandbox(tmp_path)
    box._save(SERVERS)
    writer = multiprocessing.get_context("spawn").Process(target=_rewrite,
                                                          args=(str(tmp_path), 2_000))
    writer.start()
    reads = seen = 0
    try:
        while writer.is_alive() or not reads:
            reads += 1
            seen += box.servers() == SERVERS
    finally:
        writer.join(60)
    assert writer.exitcode == 0
    assert reads > 100 and seen == reads, f"{reads - seen} of {reads} reads found another state"
    assert [path.name for path in tmp_path.iterdir()] == ["state.json"]  # nothing left over
