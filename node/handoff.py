"""Where a local Spark master's jobs leave their bytes: files on the node's own machine.

With a local master the driver and the workers share one machine, so a part's rows events go
to its task as a file name, and the task's result comes back as one (:class:`Handoff`),
instead of through the JVM — where each byte was copied from the driver into the JVM,
serialised into the task, sent to the worker, and the result the same way back: a third of
the JVM's CPU in a catch-up (``python -m bench.sparkjob``, docs/performance.md). Spark's own
broadcasts travel as files in local mode too, with a copy into the block manager on top.
The folder is tmpfs where ``/dev/shm`` has room, the temporary directory otherwise; it is
the node's alone (mode 0700), named with its pid, so the next node on the machine removes
one that a killed node left.
"""

from __future__ import annotations

import itertools
import os
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Any

SHM = Path("/dev/shm")
SHM_ROOM = 256 << 20  # tmpfs with less free room than this is passed over (a container's
# /dev/shm is often 64 MiB): the temporary directory instead, in the page cache all the same


def _roomy(shm: Path) -> str | None:
    """``shm`` when it is a writable folder with room, else None (the temporary directory)."""
    try:
        found = os.statvfs(shm)
    except OSError:
        return None
    room = found.f_bavail * found.f_frsize
    return str(shm) if room >= SHM_ROOM and os.access(shm, os.W_OK) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class Handoff:
    """One node's folder of job files: a job's names, a value put and taken whole."""

    PREFIX = "setl-handoff-"

    def __init__(self, shm: Path = SHM) -> None:
        base = _roomy(shm)
        self.left = self.sweep(Path(base or tempfile.gettempdir()))
        # the folder's name carries the node's pid: a node killed with its jobs' files in
        # it leaves them to the next one on the machine to remove
        self.root = Path(tempfile.mkdtemp(prefix=f"{self.PREFIX}{os.getpid()}-", dir=base))
        self._jobs = itertools.count(1)

    @classmethod
    def sweep(cls, base: Path) -> list[Path]:
        """Removes the folders of nodes that are gone (killed: no stop removed them); the
        folders removed."""
        removed = []
        for found in base.glob(f"{cls.PREFIX}*"):
            pid = found.name[len(cls.PREFIX):].partition("-")[0]
            if not pid.isdigit() or _alive(int(pid)):
                continue
            shutil.rmtree(found, ignore_errors=True)
            removed.append(found)
        return removed

    def job(self) -> str:
        """A new job's file prefix, in a folder of the job's own (:meth:`drop` takes it)."""
        folder = self.root / f"job{next(self._jobs)}"
        try:
            folder.mkdir()
        except OSError:  # no room: its files cannot be written and go through Spark
            pass
        return str(folder / "part")

    @staticmethod
    def put(path: str, value: Any) -> str:
        """``value`` pickled into ``path`` (whole or not at all), and the path."""
        written = f"{path}.part"
        with open(written, "wb") as file:
            pickle.dump(value, file, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(written, path)
        return path

    @staticmethod
    def take(path: str) -> Any:
        """The value in ``path``; the file is gone after."""
        try:
            with open(path, "rb") as file:
                return pickle.load(file)
        finally:
            os.unlink(path)

    def drop(self, prefix: str) -> None:
        """A job's folder with whatever is in it (a failed job's files, an ended one's
        empty folder). Spark does not wait for the other tasks of a failed job to stop: one
        may still end its part and write its result. The folder is moved aside before it is
        removed, so such a task finds no folder to write into (its result goes nowhere)."""
        folder = Path(prefix).parent
        gone = folder.with_name(f"{folder.name}.gone")
        try:
            folder.rename(gone)
        except OSError:  # never made (no room), or dropped already
            return
        shutil.rmtree(gone, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
