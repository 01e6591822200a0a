"""A subscription pausing at a TRUNCATE with batches its reader has not acknowledged, the
workload of :mod:`tests.integration.shapes` (a keyless table with duplicates, a unique-key
swap, transfers under a sum) on the same subscription, racing what the test does to it.

One pipeline carries both, on purpose: what a failover or a restart hands over again then
holds the workload's rows as well as the ids 1-4 of ``t``, and a reader that lost or doubled
one of them ends with other multisets. The pause needs, at the TRUNCATE, batches handed over
and not acknowledged — at most the window's (a caught-up subscription sends about a batch a
transaction: the writer's burst would fill it and the TRUNCATE would never be reached) — and
the move past it needs the TRUNCATE's own end: so the writer holds still around the
statement, one transaction of the workload's kinds (a keyless duplicate pair and a transfer)
goes into the unacknowledged batches with 2 and 3, and the writer writes on through
everything that follows — the wait, the stop or the failover, the pause, the move and the
resume. The reader (:class:`Reader`, holding still while the test wants batches
unacknowledged) applies the stream to multisets of images and notes ``t``'s ids in the order
they first came. What it held, and whatever else came on that stream, it does not apply: the
stream ended while it held (the stop, the failover), so those batches must come again on the
next one — a node that lost one of them on the way leaves the reader without it (a re-sent
transaction is not taken for one applied before the stop).
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.devcluster import Cluster, Database, wait_for
from tests.integration.shapes import Shapes
from tests.integration.test_subscription import COLUMNS, Reader, feed_channel, finish, sources
from tests.integration.test_subscription_pause import _past_and_resume


@dataclass
class Pausing:
    shapes: Shapes
    reader: Reader
    file: str  # the TRUNCATE's end: the move past it
    pos: int


def setup(cluster: Cluster, source: Database, target: Database, channel: str,
          seed: int) -> Pausing:
    """A running subscription of the workload's tables and ``t``, read by a reader that
    acknowledged id 1 and holds a transaction of the workload's tables, 2 and 3
    unacknowledged; then a TRUNCATE of ``t``, the workload writing on."""
    shapes = Shapes(cluster.sandbox, source, target, targets=(), kinds=3, seed=seed)
    source.execute(f"CREATE TABLE `{shapes.schema}`.t (id INT PRIMARY KEY)")
    cluster.apply([feed_channel(channel, f"feed-{channel}", shapes.schema,
                                [*COLUMNS, "t"], parallelism=5)],
                  sources(cluster, f"feed-{channel}"))
    cluster.set_status(channel, "START")
    cluster.wait_running(channel)
    reader = Reader(cluster, channel, shapes.schema, noting="t", give_up_s=600,
                    held_comes_again=True).start()
    shapes.start()
    shapes.wait_transactions(40)
    shapes.pause()
    source.execute(f"INSERT INTO `{shapes.schema}`.t VALUES (1)")
    wait_for(lambda: 1 in reader.ids or reader.violations, 60, "the reader to get id 1")
    reader.hold.set()  # (its batch acknowledged; the next one it holds, unacknowledged)
    _unacknowledged_shapes(source, shapes.schema)
    source.execute(f"INSERT INTO `{shapes.schema}`.t VALUES (2)")
    source.execute(f"INSERT INTO `{shapes.schema}`.t VALUES (3)")
    source.execute(f"TRUNCATE TABLE `{shapes.schema}`.t")
    file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
    shapes.start()
    return Pausing(shapes, reader, str(file), int(pos))


def _unacknowledged_shapes(source: Database, schema: str) -> None:
    """One transaction of the workload's tables (the writer holds still): a keyless pair of
    equal rows and a transfer, to be handed over again, then applied once."""
    t = f"`{schema}`"
    source.execute("BEGIN")
    source.execute(f"INSERT INTO {t}.kl VALUES (3, 'again'), (3, 'again')")
    source.execute(f"UPDATE {t}.accounts SET balance = balance - 7, version = version + 1 "
                   "WHERE id = 1")
    source.execute(f"UPDATE {t}.accounts SET balance = balance + 7, version = version + 1 "
                   "WHERE id = 2")
    source.execute("COMMIT")


def read_through_the_pause(cluster: Cluster, source: Database, channel: str,
                           found: Pausing) -> None:
    """The reader reads again: the pipeline pauses once it has acknowledged what was handed
    over before the TRUNCATE, the operator moves past it; the reader gets 4, the workload
    goes on, and the reader ends equal to the source with ids 1, 2, 3, 4."""
    shapes, reader = found.shapes, found.reader
    reader.hold.clear()
    wait_for(lambda: cluster.channel_status(channel) == "PAUSE" or reader.violations, 120,
             "the pause")
    assert reader.violations == []
    assert reader.dropped, "the reader held nothing unacknowledged across the stop"
    lost = reader.dropped - reader.done  # (received before the stop, never applied)
    assert not lost, f"not acknowledged before the stop, not sent again after it: {lost}"
    assert cluster.pipeline_state(channel).unacked == 0
    _past_and_resume(cluster, channel, found.file, found.pos)
    source.execute(f"INSERT INTO `{shapes.schema}`.t VALUES (4)")
    wait_for(lambda: 4 in reader.ids or reader.violations, 120, "the reader to get id 4")
    shapes.wait_transactions(shapes.transactions + 50)  # (past the resume, racing it)
    finish(shapes, source, reader)
    # it acknowledged what it applied before the hold: nothing comes twice (the Reader would
    # skip a second copy by its id, so a doubled transaction shows only here)
    assert not reader.seen_again, (f"{len(reader.seen_again)} transaction(s) applied and "
                                   f"sent again: {sorted(reader.seen_again)[:5]}")
    assert reader.ids == [1, 2, 3, 4]  # (2 and 3 skipped: [1, 4])
