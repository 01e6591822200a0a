"""The backpressure of one pipeline, in one place.

- The sliding window: at most ``size`` batches between Select and the end of Load. Select
  takes a slot before it cuts a batch and blocks while the window is full; Load frees the
  slot after the batch is committed and its cursor published. A target whose commits join
  several batches (a lake) gets ``extra`` slots more, taken only while the batches held
  carry less than ``extra_bytes`` of rows events (the window's memory stays bounded however
  wide the rows).
- Extract/Transform saturation: while ``saturation`` E/T jobs run at once (with local Spark,
  about the cores), Select keeps a timed batch open and lets it grow (a Spark job costs the
  same for few rows as for many), see :mod:`node.select.selector`.
"""

from __future__ import annotations

import threading

ET_SATURATION = 2  # E/T jobs at once before timed batches wait (local Spark: about the cores)
EXTRA_BYTES = 128 * 1024 * 1024  # rows events held past which the extra slots wait


class Window:
    def __init__(self, size: int, saturation: int = ET_SATURATION, extra: int = 0,
                 extra_bytes: int = EXTRA_BYTES) -> None:
        self.base, self.size, self.saturation = size, size + extra, saturation
        self.extra_bytes = extra_bytes
        self._lock = threading.Lock()
        self._released = threading.Condition(self._lock)
        self._used = 0
        self._bytes = 0  # rows events of the batches held (those Select cut)
        self._extracting = 0
        self.peak = 0

    def acquire(self, stop: threading.Event, poll_s: float = 0.1) -> bool:
        """Take a slot; False when ``stop`` is set first."""
        with self._released:
            while not stop.is_set():
                if self._used < self.base or (self._used < self.size and
                                              self._bytes < self.extra_bytes):
                    self._used += 1
                    self.peak = max(self.peak, self._used)
                    return True
                self._released.wait(poll_s)
        return False

    def hold(self, size: int) -> None:
        """A slot's batch is cut: it holds ``size`` bytes of rows events."""
        with self._lock:
            self._bytes += size

    def release(self, size: int = 0) -> None:
        """A slot is free again; its batch held ``size`` bytes (as :meth:`hold` was told)."""
        with self._lock:
            if self._used == 0:
                raise RuntimeError("window released more often than acquired")
            self._used -= 1
            self._bytes -= size
            self._released.notify_all()

    @property
    def used(self) -> int:
        with self._lock:
            return self._used

    def alone(self) -> bool:
        """Whether at most one batch (the one Select is gathering) holds a slot; read without
        the lock (a hint checked after every transaction: a stale answer only delays a cut
        to the next check)."""
        return self._used <= 1

    def wait_alone(self, timeout_s: float) -> bool:
        """Wait at most ``timeout_s`` until no batch but Select's own holds a slot (the one
        before it is loaded); whether it is so."""
        with self._released:
            return self._released.wait_for(lambda: self._used <= 1, timeout_s)

    def extracting(self) -> None:
        """A batch's Extract/Transform starts."""
        with self._lock:
            self._extracting += 1

    def extracted(self) -> None:
        """A batch's Extract/Transform ended (done or failed)."""
        with self._lock:
            self._extracting -= 1

    def saturated(self) -> bool:
        """Whether Extract/Transform runs as many jobs as it usefully can."""
        return self._extracting >= self.saturation
