"""node/handoff.py: where a local Spark master's jobs leave their bytes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from node import handoff as handoffs
from node.handoff import Handoff


def test_tmpfs_is_taken_only_with_room(tmp_path: Path, monkeypatch) -> None:
    assert handoffs._roomy(tmp_path / "missing") is None
    monkeypatch.setattr(handoffs, "SHM_ROOM", 1)
    assert handoffs._roomy(tmp_path) == str(tmp_path)
    monkeypatch.setattr(handoffs, "SHM_ROOM", 1 << 62)  # more than any disk has free
    assert handoffs._roomy(tmp_path) is None


def test_a_value_goes_through_a_file_once(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(handoffs, "SHM_ROOM", 1)
    handoff = Handoff(tmp_path)
    assert handoff.root.parent == tmp_path
    try:
        job = handoff.job()
        assert job != handoff.job()  # each job its own names
        path = Handoff.put(f"{job}-0", [b"rows", {"a": 1}])
        assert Path(path).exists() and not Path(f"{path}.part").exists()
        assert Handoff.take(path) == [b"rows", {"a": 1}]
        assert not Path(path).exists()
        with pytest.raises(FileNotFoundError):
            Handoff.take(path)
        Handoff.put(f"{job}-1", "left")  # a failed job's files
        Path(f"{job}-2.events").write_bytes(b"x")
        other = Handoff.put(f"{handoff.job()}-0", "another job's")
        handoff.drop(job)
        assert not Path(job).parent.exists() and Path(other).exists()
        assert not [found for found in handoff.root.iterdir() if found.name.endswith(".gone")]
        handoff.drop(job)  # dropped already: nothing to do
    finally:
        handoff.close()
    assert not handoff.root.exists()


def test_a_task_of_a_dropped_job_leaves_no_file(tmp_path: Path, monkeypatch) -> None:
    """Spark does not wait for a failed job's other tasks: one may write its result after
    the node dropped the job's files (the official CI saw a file left in the folder)."""
    monkeypatch.setattr(handoffs, "SHM_ROOM", 1)
    handoff = Handoff(tmp_path)
    try:
        job = handoff.job()
        written = open(f"{job}-0.part", "wb")  # a task begun writing its result
        handoff.drop(job)  # the job failed
        with written:
            written.write(b"late")
        with pytest.raises(OSError):
            os.replace(f"{job}-0.part", f"{job}-0")  # the rest of that task's put
        with pytest.raises(OSError):
            Handoff.put(f"{job}-1", "a task that ended later still")
        assert list(handoff.root.iterdir()) == []
    finally:
        handoff.close()


def test_a_killed_nodes_folder_is_removed_by_the_next(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(handoffs, "SHM_ROOM", 1)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid no process has now (a node killed with -9)
    left = tmp_path / f"{Handoff.PREFIX}{gone.pid}-abc"
    left.mkdir()
    (left / "job7-0.events").write_bytes(b"rows")
    living = tmp_path / f"{Handoff.PREFIX}{os.getpid()}-def"  # a running node's
    living.mkdir()
    other = tmp_path / f"{Handoff.PREFIX}notapid"
    other.mkdir()
    handoff = Handoff(tmp_path)
    try:
        assert handoff.left == [left]
        assert not left.exists() and living.is_dir() and other.is_dir()
        assert handoff.root.name.startswith(f"{Handoff.PREFIX}{os.getpid()}-")
    finally:
        handoff.close()
