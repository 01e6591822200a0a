"""node/merge.py for a target table several source tables feed (N:1 without merge_part):
the statements' effect of a sequence of changes is the same whether a batch boundary cuts
it or not (replayed through the real rendering on an in-memory table)."""

from __future__ import annotations

import random
from typing import Any

from node.changes import ChangeType, RowChange
from node.extract.etl import CompiledPipeline, extract_transform_lists
from node.jobs import JobSpec
from node.target.mysql.units import render
from tests.unit import applied
from tests.unit.test_etl import compiled

PAIRS = ("{source: s.a, target: s2.wide, columns: {include: [id, x]}}",
         "{source: s.b, target: s2.wide, columns: {include: [id, y, g1, g2]}, "
         "column_groups: [[g1, g2]]}")


def _gathered(c: CompiledPipeline) -> frozenset[tuple[str, str, str]]:
    """As the planner works it out (node.extract.job.Planner.spec)."""
    return frozenset(target for name in (("s", "a"), ("s", "b")) if c.gathered(*name)
                     for target in c.targets_of(*name))


def _load(c: CompiledPipeline, table: applied.Table,
          batch: list[tuple[int, RowChange]]) -> None:
    applied.loaded(table, extract_transform_lists(c, batch), _gathered(c))


def test_both_tables_feed_a_gathered_target() -> None:
    assert _gathered(compiled(*PAIRS)) == {("dst", "s2", "wide")}


def _change(kind: ChangeType, table: str, before: Any, after: Any) -> RowChange:
    return RowChange("s", table, kind, ("id",), before, after)


def test_a_delete_then_another_tables_update_deletes_the_row_in_one_batch_too() -> None:
    c = compiled(*PAIRS)
    chain = [(1, _change(ChangeType.DELETE, "a", {"id": 7, "x": 1}, None)),
             (2, _change(ChangeType.UPDATE, "b", {"id": 7, "y": 1, "g1": 0, "g2": 0},
                         {"id": 7, "y": 2, "g1": 0, "g2": 0}))]
    one: applied.Table = {(7,): {"id": 7, "x": 1, "y": 1, "g1": 0, "g2": 0}}
    _load(c, one, chain)
    assert one == {(7,): {"id": 7, "y": 2, "g1": 0, "g2": 0}}  # x went with a's row


def test_an_insert_then_its_delete_deletes_the_row_another_table_made() -> None:
    c = compiled(*PAIRS)
    one: applied.Table = {(7,): {"id": 7, "y": 1}}
    _load(c, one, [(1, _change(ChangeType.INSERT, "a", None, {"id": 7, "x": 1})),
                   (2, _change(ChangeType.DELETE, "a", {"id": 7, "x": 1}, None))])
    assert one == {}


def _random_chain(rng: random.Random, length: int) -> list[tuple[int, RowChange]]:
    """Changes of s.a and s.b each valid on its own source table (keys 1-3, moves too)."""
    rows: dict[str, dict[int, dict[str, Any]]] = {"a": {}, "b": {}}
    chain: list[tuple[int, RowChange]] = []
    while len(chain) < length:
        table = rng.choice("ab")
        mine, key = rows[table], rng.randint(1, 3)
        values = {"x": rng.randint(0, 2)} if table == "a" else {
            "y": rng.randint(0, 2), "g1": rng.randint(0, 1), "g2": rng.randint(0, 1)}
        if key not in mine:
            mine[key] = {"id": key, **values}
            chain.append((len(chain) + 1, _change(ChangeType.INSERT, table, None,
                                                  dict(mine[key]))))
        elif rng.random() < 0.3:
            chain.append((len(chain) + 1, _change(ChangeType.DELETE, table,
                                                  mine.pop(key), None)))
        else:
            before = mine.pop(key)
            free = [k for k in (1, 2, 3) if k not in mine and k != key]
            new_key = rng.choice(free) if free and rng.random() < 0.2 else key
            after = {**before, **dict(rng.sample(sorted(values.items()), 1)), "id": new_key}
            mine[new_key] = after
            chain.append((len(chain) + 1, _change(ChangeType.UPDATE, table, before,
                                                  dict(after))))
    return chain


def test_a_batch_boundary_anywhere_writes_the_same_rows() -> None:
    c, rng = compiled(*PAIRS), random.Random(7)
    for _ in range(400):
        chain = _random_chain(rng, rng.randint(2, 8))
        start = {(k,): {"id": k, "x": 9, "y": 9, "g1": 9, "g2": 9}
                 for k in rng.sample([1, 2, 3], rng.randint(0, 3))}
        one = {key: dict(row) for key, row in start.items()}
        _load(c, one, chain)
        cut = rng.randint(1, len(chain) - 1)
        two = {key: dict(row) for key, row in start.items()}
        _load(c, two, chain[:cut])
        _load(c, two, chain[cut:])
        each = {key: dict(row) for key, row in start.items()}
        for change in chain:
            _load(c, each, [change])
        assert one == two == each, (chain, start, cut)


def test_load_renders_a_gathered_targets_delete_and_upsert_of_one_key() -> None:
    c = compiled(*PAIRS)
    changes = extract_transform_lists(c, [
        (1, _change(ChangeType.DELETE, "a", {"id": 7, "x": 1}, None)),
        (2, _change(ChangeType.INSERT, "a", None, {"id": 7, "x": 2}))])
    texts = [sql.text for unit in render(changes, JobSpec(1, False, gathered=_gathered(c)))
             for sql in unit.sqls]
    assert [text.split(" ")[0] for text in texts] == ["DELETE", "INSERT"]


def test_a_table_an_exact_pair_takes_beside_a_catch_all_is_not_gathered() -> None:
    """The catch-all would write dw.orders for shop.orders, but the exact pair takes that
    table: only one source table feeds dw.orders, and it merges as any 1:1 pair does (a
    gathered target's merge writes a delete before each upsert: cascades and target-only
    columns would see it)."""
    c = compiled("{source: shop.orders, target: dw.orders}",
                 "{source: {namespace: shop, table: 're:.*'}, target: {namespace: dw, "
                 "table: '{table}'}}")
    assert c.targets_of("shop", "orders") == [("dst", "dw", "orders")]
    assert not c.gathered("shop", "orders") and not c.gathered("shop", "items")
    both = compiled("{source: shop.a, target: dw.orders}", "{source: shop.b, target: dw.orders}")
    assert both.gathered("shop", "a") and both.gathered("shop", "b")
