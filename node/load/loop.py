"""The serial, ordered Load loop: batches taken from Select's handoff in processId order,
each applied to the pipeline's targets with its position once its Extract/Transform is
done (a target whose commits coalesce batches — a lake — takes in one go every batch Select
had handed off when the commit began, each once its E/T is done, and those done since).
What follows a batch's load (the cursor, the window slot, the figures) is the runner's,
told through ``loaded``.

A failure of Select or of a batch's E/T arrives in order, as the item in its place: Load
raises it when it gets there, so nothing after it is applied.
"""

from __future__ import annotations

import collections
import queue
import time
from collections.abc import Callable
from typing import Any

from node.changes import Batch
from node.jobs import Done, Failed
from node.target.base import TargetLoader
from node.window import Window
from shared.errors import SetlError, with_context

# the batches handed off joined in one commit of a coalescing target: a lake mirror's MERGE
# costs about its table's size whatever the rows (Delta rewrites every file a key it touches
# is in), so under a backlog fewer, larger commits are what makes it fast
COALESCE = 64
Loaded = Callable[[Batch, Done, int, float, float], None]


def window(parallelism: int, loader: TargetLoader) -> Window:
    """The window of batches between Select and the end of Load: its parallelism, and for a
    target whose commits coalesce batches room for one more commit's worth (E/T keeps going
    while the target commits, and the next commit takes all it did)."""
    return Window(parallelism, extra=COALESCE if hasattr(loader, "load_many") else 0)


def run(loader: TargetLoader, handoff: queue.Queue[Any], loaded: Loaded) -> None:
    """Load every batch Select hands off until it hands off None (stopping); then
    ``loaded(batch, done, written, wait_s, load_s)`` for each, in order."""
    held: collections.deque[Any] = collections.deque()  # taken from handoff, not loaded
    many = getattr(loader, "load_many", None)  # a target whose commits coalesce batches
    while True:
        item = held.popleft() if held else handoff.get()
        if item is None:
            return  # Select stopped (the pipeline is stopping)
        if isinstance(item, Failed):
            raise item.error
        started = time.monotonic()
        group = [(item[0], extracted(*item))]
        waited = time.monotonic()
        if group[0][1].changes is not None:
            written = loader.load(group[0][0], group[0][1].changes)
        elif many is None:
            written = loader.load_units(group[0][0], group[0][1].results, group[0][1].redo)
        else:  # the batches handed off before it, and those done since, join this commit
            cut = handoff.qsize()
            while not held and len(group) < COALESCE:
                try:
                    following = handoff.get_nowait()
                except queue.Empty:
                    break
                if following is None or isinstance(following, Failed) or \
                        (len(group) > cut and not following[1].done()):
                    held.append(following)
                    break
                # a batch cut before the commit began is a backlog: its E/T is done or on its
                # way, and one commit for both costs the table's size once, not twice (a
                # batch cut since waits for the next one: a stream's commit waits for no
                # batch that is not there yet)
                done = extracted(*following)
                if done.changes is not None:
                    held.append((following[0], _Ready(done)))
                    break
                group.append((following[0], done))
            written = many([(batch, done.results) for batch, done in group])
        finished = time.monotonic()
        for batch, done in group:
            loaded(batch, done, written, (waited - started) / len(group),
                   (finished - waited) / len(group))


def extracted(batch: Batch, future: Any) -> Done:
    """A batch's E/T result, its failure named with the batch."""
    try:
        return future.result()
    except SetlError as exc:  # keeps its class: a definition error pauses at once
        raise with_context(type(exc), f"stage extract/transform, processId "
                           f"{batch.process_id}, position {batch.end}: {exc}") from None


def cancel_pending(handoff: queue.Queue[Any]) -> None:
    """The E/T of every batch still handed off cancelled (the pipeline stops)."""
    while True:
        try:
            item = handoff.get_nowait()
        except queue.Empty:
            return
        if isinstance(item, tuple):
            item[1].cancel()


class _Ready:
    """A finished E/T result put back in front of the queue (a future already done)."""

    def __init__(self, done: Done) -> None:
        self._done = done

    def done(self) -> bool:
        return True

    def result(self) -> Done:
        return self._done
