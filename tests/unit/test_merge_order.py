"""node/merge.py and node/jobs.py: the order a batch's tables are loaded in. Runs of ordered
(foreign keys, a second unique key) and keyless tables keep source order whatever their
push_weight; the weight orders only the merged tables, whose place changes nothing."""

from __future__ import annotations

from node.changes import ChangeType, TargetChange
from node.jobs import JobSpec, PartResult, Unit, in_order
from node.merge import merge
from node.target.mysql.facts import TableFacts
from node.target.mysql.units import render
from tests.unit.test_merge import dele, ins, upd


def every_table(name: object, keys: object) -> bool:
    return True


def test_a_parents_delete_stays_after_its_childs_earlier_update_whatever_the_weights() -> None:
    """customers (weight 0) <- orders (weight 1), ON DELETE CASCADE on the target: the
    source moved order 10 to customer 2, then deleted customer 1. The delete first would
    cascade to order 10 and the upsert would make it again without its lines."""
    changes = [upd(1, (10,), {"id": 10, "customer": 2}, table="orders", weight=1),
               dele(2, (1,), table="customers", weight=0)]
    writes = merge(changes, ordered=every_table)
    assert [(w.table, w.steps) for w in writes] == [
        ("orders", [("upsert", {"id": 10, "customer": 2})]), ("customers", [("delete", (1,))])]


def test_the_runs_of_one_target_fed_by_pairs_of_two_weights_keep_source_order() -> None:
    """Each run takes the weight of its first change: by weight, the delete of 5 (weight 0)
    would go before its insert (weight 1) and the target would keep a row the source
    deleted."""
    changes = [ins(1, {"id": 5, "v": "from S2"}, table="T", weight=1),
               ins(2, {"id": 1}, table="X", weight=0),
               dele(3, (5,), table="T", weight=0)]
    writes = merge(changes, ordered=every_table)
    assert [(w.table, w.first_seq, w.steps) for w in writes] == [
        ("T", 1, [("upsert", {"id": 5, "v": "from S2"})]), ("X", 2, [("upsert", {"id": 1})]),
        ("T", 3, [("delete", (5,))])]


def test_keyless_runs_keep_source_order_whatever_the_weights() -> None:
    row = {"v": 1}
    changes = [TargetChange("dst", "s", "k", ChangeType.INSERT, (), None, row, 2, 1),
               TargetChange("dst", "s", "k", ChangeType.DELETE, (), (), None, 0, 3, "", row),
               ins(2, {"id": 1}, table="o", weight=1)]
    writes = merge(changes, ordered=every_table)
    assert [(w.table, w.first_seq) for w in writes] == [("k", 1), ("o", 2), ("k", 3)]


def test_weight_still_orders_the_merged_tables_around_the_runs() -> None:
    changes = [ins(1, {"id": 1}, table="run_a", weight=2),
               ins(2, {"id": 1}, table="heavy", weight=5),
               ins(3, {"id": 1}, table="light", weight=1),
               ins(4, {"id": 1}, table="run_b", weight=0),
               ins(5, {"id": 1}, table="middle", weight=3)]
    writes = merge(changes, ordered=lambda name, keys: name[2].startswith("run_"))
    # the runs in source order; each merged table as early as its weight puts it
    assert [w.table for w in writes] == ["light", "run_a", "run_b", "middle", "heavy"]
    assert [w.ordered for w in writes] == [False, True, True, False, False]


def unit(table: str, weight: int, first: int, ordered: bool = False) -> Unit:
    return Unit("dst", "s", table, weight, first, [], 1, ("id",), ordered=ordered)


def test_in_order_keeps_the_runs_in_source_order_and_weighs_the_merged_units() -> None:
    ordered_part = PartResult([unit("orders", 1, 1, True), unit("customers", 0, 2, True)], [], 2)
    merged_part = PartResult([unit("heavy", 9, 3), unit("light", 0, 4)], [], 2)
    assert [u.table for u in in_order([merged_part, ordered_part])] == [
        "light", "orders", "customers", "heavy"]


def test_rendered_units_of_tables_with_foreign_keys_load_in_source_order() -> None:
    """The whole path: facts say the tables have foreign keys, the units say they are runs,
    and Load's order writes the child's update before the parent's delete."""
    facts = {("dst", "s", name): TableFacts(foreign_keys=True)
             for name in ("customers", "orders")}
    spec = JobSpec(1, False, facts, load_batch_size=100)  # type: ignore[arg-type]
    changes = [upd(1, (10,), {"id": 10, "customer": 2}, table="orders", weight=1),
               dele(2, (1,), table="customers", weight=0)]
    units = render(changes, spec)
    assert all(u.ordered for u in units)
    texts = [sql.text for u in in_order([PartResult(units, [], 2)]) for sql in u.sqls]
    assert [text.split()[0:3] for text in texts] == [
        ["INSERT", "INTO", "`s`.`orders`"], ["DELETE", "FROM", "`s`.`customers`"]]
