"""The sliding window of one pipeline: at most ``size`` batches between Select and the end
of Load. Select takes a slot before it cuts a batch and blocks while the window is full;
Load frees the slot after the batch is committed and its cursor published."""

from __future__ import annotations

import threading


class Window:
    def __init__(self, size: int) -> None:
        self.size = size
        self._free = threading.Semaphore(size)
        self._lock = threading.Lock()
        self._used = 0
        self.peak = 0

    def acquire(self, stop: threading.Event, poll_s: float = 0.1) -> bool:
        """Take a slot; False when ``stop`` is set first."""
        while not stop.is_set():
            if self._free.acquire(timeout=poll_s):
                with self._lock:
                    self._used += 1
                    self.peak = max(self.peak, self._used)
                return True
        return False

    def release(self) -> None:
        with self._lock:
            if self._used == 0:
                raise RuntimeError("window released more often than acquired")
            self._used -= 1
        self._free.release()

    @property
    def used(self) -> int:
        with self._lock:
            return self._used
