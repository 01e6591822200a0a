"""A known gap of the two-way conflict rule (docs/architecture.md, two-way channels, "Where
the rule does not hold"): the first side writes a key away and back (ABA) while the second
side's change of it is on its way. The forward pipeline writes the first side's history
over the second side's row (source_wins); the backward pipeline finds the first side's row
equal to its change's before image again, sees no conflict and writes the second side's row
there: the two sides swap rows for good, both pipelines running, no error.

Until that is fixed, the test expects exactly the documented outcome (pytest.xfail); any
other outcome than it or convergence to the first side's rows fails. When a fix lands the
test passes as it is (remove the xfail branch then)."""

from __future__ import annotations

import pytest

from tests.devcluster import Cluster, Database, make_schema, wait_for
from tests.integration.test_twoway import ITEMS, set_and_wait, start, two_way

# what the sides hold today: the first side has the second side's rows, and the other way
DIVERGED_FIRST = [(1, "from second", 20), (2, "untouched", 2), (3, "second insert", 30)]
DIVERGED_SECOND = [(1, "orig", 1), (2, "untouched", 2)]


@pytest.mark.parametrize("halt", ["stop", "kill -9"])
def test_a_first_side_row_written_away_and_back_converges_to_the_first_sides_row(
        cluster: Cluster, source: Database, target: Database, halt: str) -> None:
    schema = make_schema(source, target, ITEMS)
    cluster.apply([two_way("aba", schema)])
    start(cluster, "aba")
    t = f"`{schema}`.items"
    source.execute(f"INSERT INTO {t} VALUES (1, 'orig', 1), (2, 'untouched', 2)")
    wait_for(lambda: len(target.table(schema, "items")) == 2, 60, "the rows on the second side")
    if halt == "kill -9":
        cluster.nodes[1].kill()
    else:
        set_and_wait(cluster, "aba", "STOP", "not running")
    # the first side (the forward pipeline's source: it wins conflicts): key 1 away and
    # back, key 3 inserted and deleted, each a transaction of its own
    source.execute(f"UPDATE {t} SET name = 'away', qty = 5 WHERE id = 1")
    source.execute(f"UPDATE {t} SET name = 'orig', qty = 1 WHERE id = 1")
    source.execute(f"INSERT INTO {t} VALUES (3, 'first temp', 3)")
    source.execute(f"DELETE FROM {t} WHERE id = 3")
    # the second side writes key 1 once and inserts key 3
    target.execute(f"UPDATE {t} SET name = 'from second', qty = 20 WHERE id = 1")
    target.execute(f"INSERT INTO {t} VALUES (3, 'second insert', 30)")
    if halt == "kill -9":
        cluster.start_node(1)
    else:
        start(cluster, "aba")
    # both pipelines past these writes: a row written after them on each side has crossed
    target.execute(f"INSERT INTO {t} VALUES (100, 'after, second side', 0)")
    source.execute(f"INSERT INTO {t} VALUES (101, 'after, first side', 0)")
    wait_for(lambda: source.rows(f"SELECT 1 FROM {t} WHERE id = 100"), 90, "backward caught up")
    wait_for(lambda: target.rows(f"SELECT 1 FROM {t} WHERE id = 101"), 90, "forward caught up")
    after = [(100, "after, second side", 0), (101, "after, first side", 0)]
    first, second = source.table(schema, "items"), target.table(schema, "items")
    if (first, second) == ([*DIVERGED_FIRST, *after], [*DIVERGED_SECOND, *after]):
        pytest.xfail("known gap: the sides swap rows of a key the first side wrote away and "
                     "back (docs/architecture.md, two-way channels)")
    assert first == second == [(1, "orig", 1), (2, "untouched", 2), *after], (first, second)
    set_and_wait(cluster, "aba", "STOP", "not running")
