"""The long-lived heap of a daemon, kept out of the cycle collector's way.

CPython's full collection (generation 2) walks every tracked object, so its pause grows with
the heap: a node holds pyspark, py4j, gRPC, kazoo and setl's modules, and under a steady
stream a full collection came every ~10 s and stopped every thread of the node for
90-350 ms (``event=gc_pause``, 1,000 tx/s on 2 cores) — the worst of the delay's tail.
What lives once a daemon has started (modules, the Spark session, a running pipeline's
fixed objects) lives until it stops: frozen, later collections walk only what came after.
Refcounting still frees frozen objects; a cycle among them is never collected, so a freeze
is done only after a start, never per batch.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect what is garbage now, then take every live object out of later collections."""
    gc.collect()
    gc.freeze()
