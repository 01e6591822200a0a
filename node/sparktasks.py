"""What Spark's Python workers run for the node's jobs (:mod:`node.spark` submits them): a
batch's parts of Extract/Transform, independent tasks beside them (verify's chunks), and the
touch that keeps idle workers started. Each applies the node's rules, which travel in the
compiled pipeline, before anything of the pipeline runs.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from node.extract.job import run_part
from node.handoff import Handoff
from node.jobs import JobSpec
from shared import confinement


def touch(_: int) -> int:
    """A task that leaves a worker with setl's Extract/Transform modules loaded."""
    import node.extract.job  # noqa: F401 - the import is the point

    return os.getpid()


def run_partition(broadcast: Any, specs: list[JobSpec], shipped: dict[int, Any], out: str,
                  index: int, parts: Any) -> Any:
    # pyspark's worker runs a full gc.collect() after every task; over the heap a worker holds
    # (pyspark, setl's modules, the compiled pipeline) that was ~40% of the workers' CPU in a
    # catch-up. Whatever lives when a task starts has outlived the previous collect, so it
    # is frozen out of later ones (O(1)); refcounting still frees it.
    gc.freeze()
    compiled = broadcast.value
    confinement.confine(compiled.rules)
    events = shipped.get(index)
    if isinstance(events, str):  # a handoff file (a local master)
        events = Path(events).read_bytes()
    elif events is not None:
        events = events.value
    spec = specs[index]  # its batch's (a job may carry several batches: node.jobqueue)
    results = [run_part(compiled, spec, part if events is None else
                        part._replace(events=events)) for part in parts]
    if not out:
        return results
    try:
        return [Handoff.put(f"{out}-{index}", results)]
    except OSError:  # no room in the handoff folder: the results come back through Spark
        return results


def run_tasks(broadcast: Any, task: Callable[[Any, Any], list[Any]], items: Any) -> Any:
    gc.freeze()  # as run_partition: what lives now is not collected again
    compiled = broadcast.value
    confinement.confine(compiled.rules)
    return [found for item in items for found in task(compiled, item)]
