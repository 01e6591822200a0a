"""Which tables a changed definition of a running channel has copied (``setl apply``): every
source table written somewhere it was not before — newly paired, or a new target beside its
old one (a fan-out, a split) — and what is not copied is said to the user, with why."""

from __future__ import annotations

from typing import Any

import pytest

from manager import snapshots
from shared.confinement import current
from shared.definitions import load_text
from shared.model import Channel

DELETES = snapshots.COPY_DELETES_NOTHING
KEYS: dict[tuple[str, str], tuple[str, ...] | None] = {
    ("shop", "orders"): ("id",), ("shop", "items"): ("id",), ("shop", "logs"): None}


def channel(*pairs: str, two_way: bool = False) -> Channel:
    lines = ["sources:", "  - {name: s, host: h1}", "  - {name: t, host: h2}", "channels:",
             "  - name: c", "    pipelines:", "      - name: forward", "        source: s",
             "        target: t", "        pairs:", *(f"          - {pair}" for pair in pairs)]
    if two_way:
        lines += ["      - name: back", "        source: t", "        target: s",
                  "        pairs:", "          - {source: shop.other, target: shop.other}"]
    return load_text("\n".join(lines) + "\n", "c.yaml", {}, current()).channels[0]


class _Client:
    def exists(self, path: str) -> bool:
        return True  # every pipeline has run


class _Paths:
    def cursor(self, pipeline_id: str) -> str:
        return f"/cursor/{pipeline_id}"


class _Source:
    type = "mysql"


class _Catalog:
    def source(self, name: str) -> _Source:
        return _Source()


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []

    class Control:
        def __init__(self, client: Any, paths: Any, pipeline_id: str) -> None:
            self.pipeline_id = pipeline_id

        def ask(self, schema: str, table: str, where: str = "", version: int = 0) -> None:
            found.append((self.pipeline_id, schema, table, version))

    monkeypatch.setattr(snapshots, "SnapshotControl", Control)
    monkeypatch.setattr(snapshots.tablekeys, "read_keys", lambda source: KEYS)
    return found


def added(before: Channel, after: Channel) -> list[str]:
    return snapshots.Snapshots(_Client(), _Paths(), _Catalog(), None).copy_added(  # type: ignore[arg-type]
        before, after, 7)


def test_a_new_target_of_a_table_already_replicated_is_copied(asked: list[Any]) -> None:
    before = channel("{source: shop.orders, target: shop.orders, fan_out: true}")
    after = channel("{source: shop.orders, target: shop.orders, fan_out: true}",
                    "{source: shop.orders, target: archive.orders, fan_out: true}",
                    "{source: shop.items, target: shop.items}")
    lines = added(before, after)
    assert asked == [("c.forward", "shop", "items", 7), ("c.forward", "shop", "orders", 7)]
    assert f"pipeline c.forward: shop.items will be copied into t:shop.items; {DELETES}" in lines
    [orders] = [line for line in lines if "shop.orders will" in line]
    assert orders.startswith("pipeline c.forward: shop.orders will be copied into "
                             "t:archive.orders (and again into t:shop.orders, at the copy's "
                             "watermarks")
    assert added(after, after) == [] and len(asked) == 2  # nothing new: nothing asked


def test_a_table_moved_to_another_target_is_copied_and_the_same_targets_are_not(
        asked: list[Any]) -> None:
    every = "{source: {namespace: shop, table: 're:.*'}, target: {namespace: shop, table: " \
        "'{table}'}}"
    before = channel(every)
    assert added(before, channel(every,
                                 "{source: shop.orders, target: shop.orders, push_weight: 3}")
                 ) == []  # another pair, the same target: no copy
    lines = added(before, channel(every,
                                  "{source: shop.orders, target: shop2.orders}"))
    assert asked == [("c.forward", "shop", "orders", 7)]
    assert lines == [f"pipeline c.forward: shop.orders will be copied into t:shop2.orders; "
                     f"{DELETES}"]


def test_what_is_not_copied_is_said_with_why(asked: list[Any],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    before = channel("{source: shop.orders, target: shop.orders}")
    after = channel("{source: shop.orders, target: shop.orders}",
                    "{source: shop.logs, target: shop.logs}")
    [line] = added(before, after)
    assert line.startswith("pipeline c.forward: shop.logs is NOT copied into t:shop.logs: it "
                           "has no primary key")
    [line] = added(channel("{source: shop.orders, target: shop.orders}", two_way=True),
                   channel("{source: shop.orders, target: shop.orders}",
                           "{source: shop.items, target: shop.items}", two_way=True))
    assert line.startswith("pipeline c.forward: shop.items is NOT copied into t:shop.items "
                           "(its changes replicate from now on)")

    def away(source: Any) -> None:
        raise OSError("connection refused")

    monkeypatch.setattr(snapshots.tablekeys, "read_keys", away)
    lines = added(before, after)
    assert asked == [] and len(lines) == 1
    assert lines[0].startswith("pipeline c.forward: tables its changed pairs write to new "
                               "targets are NOT copied")
    assert "cannot read the tables of source s: connection refused" in lines[0]
    assert "setl snapshot c --pipeline forward --table SCHEMA.TABLE" in lines[0]
    assert added(before, before) == []  # the same pairs: the source is not even asked


SHARD = ("{source: shop.orders, target: {namespace: shop, table: 'orders_[0-3]'}, "
         "shard: {column: uid}}")


def moved(before: Channel, after: Channel, ran: bool = True) -> list[str]:
    client = _Client()
    client.exists = lambda path: ran  # type: ignore[method-assign]
    return snapshots.Snapshots(client, _Paths(), _Catalog(), None).moved_shards(  # type: ignore[arg-type]
        before, after)


def test_a_shard_route_that_would_move_written_rows_is_refused() -> None:
    """4 → 8 slots: uid 5 goes from orders_1 to orders_5, and orders_1 kept its copy for
    good (a copy asked only the new slots); a changed algorithm asked nothing at all."""
    before = channel(SHARD)
    for after, what in [
            (SHARD.replace("[0-3]", "[0-7]"), "4 slots → 8"),
            (SHARD.replace("{column: uid}", "{column: uid, algorithm: quotient, "
                           "table_balance_size: 100}"),
             "algorithm modulo → quotient, table_balance_size 1 → 100"),
            (SHARD.replace("column: uid", "column: shop_id"), "column uid → shop_id")]:
        [problem] = moved(before, channel(after))
        assert problem.startswith(f"channel c pipeline forward: the shard route of "
                                  f"shop.orders changes ({what}) and keeps slots it has "
                                  "written (t:shop.orders_0, t:shop.orders_1, "
                                  "t:shop.orders_2, …)"), problem
        assert "Route into new, empty tables" in problem
        assert moved(before, channel(after), ran=False) == []  # never ran: nothing written
    second = "{source: shop.orders, target: {namespace: shop, table: 'more_[0-1]'}, " \
        "shard: {column: uid}}"
    [problem] = moved(before, channel(SHARD, second))  # slots added on another table
    assert "(4 slots → 6)" in problem
    assert moved(before, channel(SHARD)) == []  # the same route
    assert moved(before, channel(SHARD.replace("orders_", "new_orders_"))) == []  # new tables
    assert moved(before, channel("{source: shop.orders, target: shop.orders}")) == []


def test_a_table_whose_pair_now_writes_other_columns_is_copied_again(asked: list[Any]) -> None:
    """The rows already there were written by the old pair: a column the new one adds would
    stay empty in every row never updated again, with nothing said."""
    before = channel("{source: shop.orders, target: shop.orders, columns: {include: [id, total]}}",
                     "{source: shop.items, target: shop.items}",
                     "{source: shop.logs, target: shop.logs}")
    after = channel("{source: shop.orders, target: shop.orders, "
                    "columns: {include: [id, total, note]}}",
                    "{source: shop.items, target: shop.items, push_weight: 4}",
                    "{source: shop.logs, target: shop.logs, columns: {include: [id]}}")
    lines = added(before, after)
    assert asked == [("c.forward", "shop", "orders", 7)]  # an order of writing: no copy
    assert lines == [
        "pipeline c.forward: shop.logs goes to t:shop.logs by a pair changed in columns, and "
        "the rows there were written by the old one; it is NOT copied again: it has no "
        "primary key and no unique key over NOT NULL columns. Its rows keep the old pair's "
        "shape until each changes; rewrite them by hand (empty the target table, then copy "
        "the source's rows)",
        "pipeline c.forward: shop.orders goes to t:shop.orders by a pair changed in columns, "
        "and the rows there were written by the old one: it will be copied again into "
        f"t:shop.orders through the new pair, as setl snapshot does; {DELETES}"]


def test_a_pattern_pair_replaced_by_a_named_one_alike_asks_for_nothing(
        asked: list[Any]) -> None:
    every = "{source: {namespace: shop, table: 're:.*'}, target: {namespace: shop, table: " \
        "'{table}'}, virtual_columns: [{name: origin, value: web}]}"
    named = "{source: shop.orders, target: shop.orders, " \
        "virtual_columns: [{name: origin, value: web}]}"
    assert added(channel(every), channel(every, named)) == [] and asked == []
    lines = added(channel(every), channel(every, "{source: shop.orders, target: shop.orders}"))
    assert asked == [("c.forward", "shop", "orders", 7)]
    assert lines[0].startswith("pipeline c.forward: shop.orders goes to t:shop.orders by a "
                               "pair changed in virtual_columns")
