"""Which key columns a pipeline may find rows by: ``key_columns`` that admit NULL are
refused where rows are found by them (a keyed table, or parts of a wide row), and allowed
where they are not (a keyless table, found by its whole image; a lake changelog)."""

from __future__ import annotations

import pytest

from shared.tablekeys import pipeline_keys
from tests.unit.test_etl import pipeline

KEYS = {("shop", "orders"): ("id",), ("shop", "logs"): None}
LOOSE = frozenset({("shop", "orders", "ref"), ("shop", "logs", "ref")})


def test_nullable_key_columns_of_a_keyed_table_are_refused_naming_them() -> None:
    found = pipeline("{source: shop.orders, target: shop.orders, key_columns: [Ref]}")
    _, problems = pipeline_keys(found, KEYS, LOOSE)
    assert len(problems) == 1
    assert "table shop.orders" in problems[0] and "key_columns Ref that admit NULL" in \
        problems[0]
    assert pipeline_keys(found, KEYS) == ({}, [])  # nothing admits NULL: fine


def test_nullable_key_columns_of_a_keyless_table_are_allowed_unless_parts_meet_by_them(
        ) -> None:
    plain = pipeline("{source: shop.logs, target: shop.logs, key_columns: [ref]}")
    assert pipeline_keys(plain, KEYS, LOOSE) == ({}, [])
    merged = pipeline("{source: shop.logs, target: shop.wide, key_columns: [ref], "
                      "merge_part: true}")
    [problem] = pipeline_keys(merged, KEYS, LOOSE)[1]
    assert "key_columns ref that admit NULL" in problem


ORDERS = {("shop", "orders"): ("id",), ("shop", "logs"): None,
          ("shop", "slots"): ("day", "slot")}


def test_a_lake_merges_by_key_columns_only_when_they_hold_the_tables_own_key() -> None:
    """A Delta table has no unique key to refuse a second row of one key: key_columns that
    leave out the table's key would merge two source rows into one lake row."""
    narrower = pipeline("{source: shop.orders, target: shop.orders, "
                        "key_columns: [customer_id]}")
    assert pipeline_keys(narrower, ORDERS) == ({}, [])  # a database refuses it itself
    [problem] = pipeline_keys(narrower, ORDERS, lake=True)[1]
    assert problem.startswith("pipeline fwd: table shop.orders (pair src:shop.orders) is "
                              "mirrored into a lake by key_columns customer_id, which leave "
                              "out id of its own key (id)")
    assert "Leave key_columns out of the pair" in problem and "mode: changelog" in problem
    wider = pipeline("{source: shop.slots, target: shop.slots, key_columns: [SLOT, day, x]}")
    assert pipeline_keys(wider, ORDERS, lake=True) == ({("shop", "slots"): ("day", "slot")}, [])
    keyless = pipeline("{source: shop.logs, target: shop.logs, key_columns: [ref], "
                       "joins: [{table: shop.refs, by: id, key: ref, columns: [r]}]}")
    [problem] = pipeline_keys(keyless, ORDERS, lake=True)[1]
    assert "has no primary key nor a unique key over NOT NULL columns" in problem
    logged = pipeline("{source: shop.orders, target: shop.orders, key_columns: [customer_id], "
                      "mode: changelog}")
    assert pipeline_keys(logged, ORDERS, lake=True) == ({}, [])  # nothing merged by them


def test_a_lake_table_met_after_the_start_is_refused_the_same() -> None:
    from types import SimpleNamespace

    from node.target.delta.columns import TextColumn
    from node.target.delta.tables import LakeTables
    from shared.errors import ConfigError
    from tests.unit.test_etl import compiled

    layout = SimpleNamespace(schema="shop", table="orders", primary_key=("id",), columns=(
        TextColumn("id", "int", "int(11)", None),
        TextColumn("customer_id", "int", "int(11)", None)))
    narrower = compiled("{source: shop.orders, target: shop.orders, key_columns: [customer_id]}")
    with pytest.raises(ConfigError, match=r"^pipeline shop.fwd pair src:shop.orders: shop.orders "
                                          r"→ shop.orders is mirrored into a lake by "
                                          r"key_columns customer_id, which leave out id"):
        LakeTables(narrower).of(("dst", "shop", "orders"), layout)
    wider = compiled("{source: shop.orders, target: shop.orders, key_columns: [customer_id, id]}")
    assert LakeTables(wider).of(("dst", "shop", "orders"), layout).keys == ("customer_id", "id")


def test_start_snapshot_of_a_keyless_table_is_refused_with_key_columns_too() -> None:
    """The node copies in chunks by the table's own key: key_columns do not make a keyless
    table copyable, so apply refuses it as the node's copy would (not a copy that fails
    unseen after the start)."""
    for pair in ("{source: shop.logs, target: shop.logs}",
                 "{source: shop.logs, target: shop.logs, key_columns: [ref]}"):
        [problem] = pipeline_keys(pipeline(pair, options="start: snapshot"), KEYS)[1]
        assert problem.startswith("pipeline fwd: table shop.logs (pair src:shop.logs) has no "
                                  "primary key"), problem
        assert "'start: snapshot' cannot copy it in chunks by key" in problem
        assert ("key_columns ref do not make it keyed" in problem) == ("ref" in pair)
        assert "'key_columns:'" not in problem  # no advice that leads into the same refusal
    keyed = pipeline("{source: shop.orders, target: shop.orders, key_columns: [id]}",
                     options="start: snapshot")
    assert pipeline_keys(keyed, KEYS)[1] == []


def test_a_keyless_table_on_a_two_way_channel_is_refused_with_key_columns_too() -> None:
    """A two-way channel finds a conflict by key (``WHERE (keys) IN (…)``): a table with
    none made that ``WHERE () IN (())``, a syntax error at the first batch."""
    for pair in ("{source: shop.logs, target: shop.logs}",
                 "{source: shop.logs, target: shop.logs, key_columns: [ref]}"):
        assert pipeline_keys(pipeline(pair), KEYS) == ({}, [])  # one-way: by its image
        [problem] = pipeline_keys(pipeline(pair), KEYS, two_way=True)[1]
        assert problem.startswith("pipeline fwd: table shop.logs (pair src:shop.logs) has no "
                                  "primary key and no unique key over NOT NULL columns, and "
                                  "the channel is two-way"), problem
        assert problem.endswith("give the table a primary key, or replicate it with a "
                                "one-way channel")
    keyed = pipeline("{source: shop.orders, target: shop.orders}")
    assert pipeline_keys(keyed, KEYS, two_way=True)[1] == []


def test_the_pair_checked_is_the_one_that_takes_the_table() -> None:
    """A catch-all pair listed first, then one for the table with key_columns that admit
    NULL: the table's own pair (the most specific) is the one its rows go through."""
    both = pipeline("{source: {namespace: shop, table: 're:.*'}, target: {namespace: copy, "
                    "table: '{table}'}}",
                    "{source: shop.orders, target: copy.orders, key_columns: [ref]}")
    [problem] = pipeline_keys(both, KEYS, LOOSE)[1]
    assert "table shop.orders (pair src:shop.orders)" in problem


def test_key_columns_of_a_database_target_must_hold_a_unique_key_of_the_table() -> None:
    """key_columns [customer_id] of orders keyed by id took two orders of one customer for
    one target row: the second overwrote the first, and deleting either deleted it. Columns
    that hold its key or another unique NOT NULL key of it are fine; a wide row's parts
    (merge_part, joins) meet by their key_columns by design."""
    indexes = {("shop", "orders"): (frozenset({"id"}), frozenset({"code", "region"}))}
    narrow = pipeline("{source: shop.orders, target: shop.orders, key_columns: [customer_id]}")
    [problem] = pipeline_keys(narrow, ORDERS, indexes=indexes)[1]
    assert "table shop.orders (pair src:shop.orders) finds rows by key_columns customer_id, " \
           "which hold no unique key of it (its key is id)" in problem
    assert pipeline_keys(narrow, ORDERS) == ({}, [])  # indexes not read: no pair to check
    for fine in ("[ID]", "[customer_id, id]", "[Region, code]"):
        keyed = pipeline(f"{{source: shop.orders, target: shop.orders, key_columns: {fine}}}")
        assert pipeline_keys(keyed, ORDERS, indexes=indexes)[1] == [], fine
    # part of its own key: a partitioned table's key holds the partition column
    for fine in ("[day]", "[SLOT]"):
        keyed = pipeline(f"{{source: shop.slots, target: shop.slots, key_columns: {fine}}}")
        assert pipeline_keys(keyed, ORDERS, indexes=indexes)[1] == [], fine
    part = pipeline("{source: shop.orders, target: shop.wide, key_columns: [customer_id], "
                    "merge_part: true}")
    assert pipeline_keys(part, ORDERS, indexes=indexes)[1] == []
    keyless = pipeline("{source: shop.logs, target: shop.logs, key_columns: [ref]}")
    assert pipeline_keys(keyless, ORDERS, indexes=indexes)[1] == []


def test_a_virtual_column_writing_the_key_from_more_than_the_key_is_noted() -> None:
    """A free-door or repair ``D`` carries the key alone: a key column's expression reading
    another column cannot be computed for it (the node pauses there, saying so). The stream
    computes it, so the apply notes it rather than refuses; one from the key alone, or
    writing another column, is not noted."""
    from shared.expr import columns_read, parse
    from shared.keyfillers import moved_key_notes
    assert columns_read(parse("concat_ws(' ', first, last) if id > null else id")) == {
        "first", "last", "id"}
    keys = {("shop", "a"): ("id",), ("shop", "b"): ("id",)}
    found = pipeline("{source: shop.a, target: shop.m}",
                     '{source: shop.b, target: shop.m, virtual_columns: ['
                     '{name: ID, expression: "concat(region, id)"}, '
                     '{name: full, expression: "concat(first, last)"}]}')
    [note] = moved_key_notes(found, keys)
    assert "pair src:shop.b" in note and "virtual column ID writes the target's key" in note
    assert "reads region" in note and "key of shop.b (id)" in note
    for fine in ('{name: id, expression: "id + 1000000"}',
                 '{name: full, expression: "concat(first, last)"}'):
        alone = pipeline(f"{{source: shop.b, target: shop.m, virtual_columns: [{fine}]}}")
        assert moved_key_notes(alone, keys) == []
    renamed = pipeline('{source: shop.b, target: shop.m, column_pairs: [{source: id, '
                       'target: bid}], virtual_columns: [{name: bid, expression: "x + id"}]}')
    assert "reads x" in moved_key_notes(renamed, keys)[0]


def test_a_pair_whose_processor_may_compute_the_key_is_noted() -> None:
    """A free-door or repair ``D`` gives a processor the key alone: one computing the key
    from another column pauses the pipeline there (KeyError), or names another row. What
    it reads is its code's: every keyed pair with one is noted, once; a keyless table takes
    no D, and a virtual column's processor is noted only where it writes a key column."""
    from shared.keyfillers import processor_key_notes
    keys = {("shop", "a"): ("id",), ("shop", "b"): ("id",), ("shop", "logs"): None}
    found = pipeline('{source: shop.a, target: shop.m, processor: "m:shift"}',
                     '{source: shop.b, target: shop.m, column_pairs: [{source: id, '
                     'target: bid}], virtual_columns: [{name: BID, processor: "m:k"}, '
                     '{name: other, processor: "m:o"}]}',
                     '{source: shop.logs, target: shop.logs, processor: "m:shift"}')
    first, second = processor_key_notes(found, keys)
    assert first.startswith(f"pipeline {found.name} pair src:shop.a: processor m:shift gets "
                            "a free-door or verify --repair 'D' with the key alone (id of "
                            "shop.a) as its before image")
    assert "the pipeline pauses there (KeyError, on each resume)" in first
    assert "Compute the key from the key columns alone" in first
    assert second.startswith(f"pipeline {found.name} pair src:shop.b: virtual column BID "
                             "(processor m:k) gets")
    assert "m:o" not in second
    plain = pipeline('{source: shop.a, target: shop.m, virtual_columns: [{name: id, '
                     'expression: "id + 1"}]}')
    assert processor_key_notes(plain, keys) == []


def test_a_unique_index_over_an_expression_keys_no_rows() -> None:
    """MySQL 8 lists a functional key part with no column name (NULL): it crashed the read
    of every table's keys (a review); the server's join had dropped that part, taking
    UNIQUE (a, (expr)) for a key over a alone. Such an index keys nothing."""
    from shared.tablekeys import row_keys

    class Cursor:
        def __init__(self) -> None:
            self.answers: list[list[tuple[object, ...]]] = [
                [("s", "f"), ("s", "g")],  # tables
                [("s", "f", "byexpr", "a"), ("s", "f", "byexpr", None),  # unique parts
                 ("s", "g", "PRIMARY", "id")],
                [],  # nullable columns
            ]

        def execute(self, sql: str, args: object = None) -> None:
            self.rows = self.answers.pop(0)

        def fetchall(self) -> list[tuple[object, ...]]:
            return self.rows
    assert row_keys(Cursor()) == {("s", "f"): None, ("s", "g"): ("id",)}
