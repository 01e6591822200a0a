"""node/extract/etl.py: compiling a pipeline, picking pairs, mapping names; the batch's
extract/transform and its pickling. Columns and keys: test_etl_columns.py; the batch on
Spark or in the node: test_etl_spark.py. The helpers are tests/unit/etl_helpers.py (tests
that import them from here still find them)."""

from __future__ import annotations

import pickle

import pytest

from node.changes import ChangeType, RowChange, TargetChange
from node.extract.etl import CompiledPipeline, extract_transform, transform
from tests.unit.etl_helpers import PIPELINE_ID, compiled, insert, one, pipeline, targets

# --- compile ------------------------------------------------------------------------------

def test_compile_keeps_id_version_and_pairs() -> None:
    p = pipeline("{source: s.a, target: s2.a}", "{source: s.b, target: s2.b}")
    c = CompiledPipeline.compile(PIPELINE_ID, 7, p)
    assert (c.pipeline_id, c.version) == (PIPELINE_ID, 7)
    assert [entry.pair for entry in c.pairs] == list(p.pairs)


def test_compile_accepts_ddl_sync_false() -> None:
    c = compiled("{source: s.t, target: s2.t}", options="ddl_sync: false")
    assert len(c.pairs) == 1


# --- pairs_for ----------------------------------------------------------------------------

SPECIFICITY = (
    '{source: {namespace: s, table: "re:orders.*"}, target: s2.wild}',
    '{source: {namespace: s, table: "orders_[0-9]"}, target: s2.multi}',
    "{source: s.orders_1, target: s2.single}",
)


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0)])
def test_pairs_for_prefers_single_over_multi_over_wildcard(order: tuple[int, ...]) -> None:
    c = compiled(*(SPECIFICITY[i] for i in order))
    assert targets(c, "s", "orders_1") == ["dst:s2.single"]
    assert targets(c, "s", "orders_2") == ["dst:s2.multi"]
    assert targets(c, "s", "orders_x") == ["dst:s2.wild"]
    assert targets(c, "s", "orders_10") == ["dst:s2.wild"]  # outside the MULTI range
    assert targets(c, "s", "items") == []
    assert targets(c, "other", "orders_1") == []
    assert c.wants("s", "orders_x") is True
    assert c.wants("s", "items") is False


def test_an_expression_of_every_schema_leaves_the_servers_and_setl_s_own_out() -> None:
    c = compiled('{source: {namespace: "re:.*", table: "re:.*"}, '
                 'target: {namespace: "{schema}", table: "{table}"}}')
    assert targets(c, "shop", "orders") == ["dst:{schema}.{table}"]
    for schema, table in (("retl", "retl_position"), ("retl", "retl_owner"),
                          ("mysql", "user"), ("sys", "sys_config")):
        assert targets(c, schema, table) == []
        assert not c.wants_schema(schema)
    assert c.target_databases("retl") == [] and c.target_databases("shop") == [("dst", "shop")]


def test_pairs_for_breaks_table_ties_by_namespace_specificity() -> None:
    c = compiled('{source: {namespace: "db_[0-1]", table: t}, target: a.x}',
                 "{source: db_0.t, target: b.x}")
    assert targets(c, "db_0", "t") == ["dst:b.x"]
    assert targets(c, "db_1", "t") == ["dst:a.x"]


def test_pairs_for_table_specificity_beats_namespace_specificity() -> None:
    c = compiled('{source: {namespace: "re:db.*", table: t}, target: a.x}',
                 '{source: {namespace: db, table: "re:t.*"}, target: b.x}')
    assert targets(c, "db", "t") == ["dst:a.x"]
    assert targets(c, "db", "tt") == ["dst:b.x"]


def test_fan_out_pairs_all_apply() -> None:
    c = compiled("{source: s.t, target: a.t, fan_out: true, push_weight: 2}",
                 "{source: s.t, target: {datasource: other, namespace: b, table: u}, "
                 "fan_out: true, push_weight: 1}",
                 "{source: s.z, target: a.z}")
    assert targets(c, "s", "t") == ["dst:a.t", "other:b.u"]
    found = list(transform(c, 9, insert("s", "t", {"id": 1, "v": "x"})))
    assert found == [
        TargetChange("dst", "a", "t", ChangeType.INSERT, ("id",), None, {"id": 1, "v": "x"}, 2, 9),
        TargetChange("other", "b", "u", ChangeType.INSERT, ("id",), None, {"id": 1, "v": "x"},
                     1, 9),
    ]
    assert targets(c, "s", "z") == ["dst:a.z"]


def test_a_fan_out_pairs_virtual_columns_stay_in_its_own_target() -> None:
    """Pairs that neither rename nor choose columns passed the source's row on as it was,
    and one pair's virtual columns were written into it: the next pair's target got them."""
    c = compiled('{source: s.t, target: a.t, fan_out: true, push_weight: 2, virtual_columns: '
                 '[{name: v, expression: "v * 10"}, {name: extra, value: "1"}]}',
                 "{source: s.t, target: b.t, fan_out: true, push_weight: 1}")
    change = insert("s", "t", {"id": 1, "v": 2})
    found = [t.after for t in transform(c, 9, change)]
    assert found == [{"id": 1, "v": 20, "extra": "1"}, {"id": 1, "v": 2}]
    assert change.after == {"id": 1, "v": 2}


def test_pairs_for_caches_its_answer() -> None:
    c = compiled("{source: s.t, target: s2.t}")
    first = c.pairs_for("s", "t")
    assert c.pairs_for("s", "t") is first
    assert c._cache == {("s", "t"): first}
    assert c.pairs_for("s", "nope") == ()
    assert set(c._cache) == {("s", "t"), ("s", "nope")}


# --- names --------------------------------------------------------------------------------

def test_single_to_single_renames_schema_and_table() -> None:
    c = compiled("{source: s.orders, target: copy.orders_copy}")
    change = one(c, insert("s", "orders", {"id": 1}), seq=4)
    assert change == TargetChange("dst", "copy", "orders_copy", ChangeType.INSERT, ("id",), None,
                                  {"id": 1}, 0, 4)


def test_multi_to_multi_keeps_zero_padding() -> None:
    c = compiled('{source: {namespace: s, table: "orders_[00-03]"}, '
                 'target: {namespace: s2, table: "copy_[00-03]"}}')
    assert one(c, insert("s", "orders_02", {"id": 1})).table == "copy_02"
    assert one(c, insert("s", "orders_00", {"id": 1})).table == "copy_00"
    assert one(c, insert("s", "orders_03", {"id": 1})).table == "copy_03"
    assert list(transform(c, 1, insert("s", "orders_2", {"id": 1}))) == []  # not padded
    assert list(transform(c, 1, insert("s", "orders_04", {"id": 1}))) == []


def test_multi_to_multi_maps_by_offset_from_the_low_bound() -> None:
    c = compiled('{source: {namespace: s, table: "orders_[0-3]"}, '
                 'target: {namespace: s2, table: "o_[10-13]"}}')
    assert one(c, insert("s", "orders_2", {"id": 1})).table == "o_12"
    assert one(c, insert("s", "orders_0", {"id": 1})).table == "o_10"
    assert one(c, insert("s", "orders_3", {"id": 1})).table == "o_13"


def test_multi_to_padded_multi_pads_the_target() -> None:
    c = compiled('{source: {namespace: s, table: "orders_[8-11]"}, '
                 'target: {namespace: s2, table: "o_[000-003]"}}')
    assert one(c, insert("s", "orders_9", {"id": 1})).table == "o_001"
    assert one(c, insert("s", "orders_11", {"id": 1})).table == "o_003"


def test_multi_namespace_maps_like_a_multi_table() -> None:
    c = compiled('{source: {namespace: "db_[1-2]", table: t}, '
                 'target: {namespace: "copy_[01-02]", table: t}}')
    change = one(c, insert("db_2", "t", {"id": 1}))
    assert (change.schema, change.table) == ("copy_02", "t")


def test_single_to_one_name_multi() -> None:
    c = compiled('{source: s.orders, target: {namespace: "c_[5-5]", table: "copy_[07-07]"}}')
    change = one(c, insert("s", "orders", {"id": 1}))
    assert (change.schema, change.table) == ("c_5", "copy_07")


def test_multi_and_wildcard_to_single_collect_into_one_table() -> None:
    c = compiled('{source: {namespace: s, table: "orders_[0-3]"}, target: s2.orders}',
                 '{source: {namespace: s, table: "re:audit_\\\\d+"}, target: s2.audit}')
    assert one(c, insert("s", "orders_3", {"id": 1})).table == "orders"
    assert one(c, insert("s", "audit_202401", {"id": 1})).table == "audit"
    assert list(transform(c, 1, insert("s", "audit_x", {"id": 1}))) == []


# --- extract_transform --------------------------------------------------------------------

def test_extract_transform_filters_ddl_and_unpaired_tables() -> None:
    c = compiled("{source: s.t, target: s2.t, push_weight: 3}")
    numbered = [
        (1, RowChange("s", "t", ChangeType.DDL, ddl="ALTER TABLE t ADD c INT")),
        (2, insert("s", "t", {"id": 1})),
        (3, insert("s", "unpaired", {"id": 1})),
        (4, RowChange("s", "t", ChangeType.DELETE, ("id",), {"id": 1}, None)),
    ]
    assert list(extract_transform(c, numbered)) == [
        TargetChange("dst", "s2", "t", ChangeType.INSERT, ("id",), None, {"id": 1}, 3, 2),
        TargetChange("dst", "s2", "t", ChangeType.DELETE, ("id",), (1,), None, 3, 4),
    ]


def test_extract_transform_of_only_ddl_is_empty() -> None:
    c = compiled("{source: s.t, target: s2.t}")
    # (without ddl_sync; a DROP TABLE pauses: tests/unit/test_ddl_pauses.py)
    ddl = RowChange("s", "t", ChangeType.DDL, ddl="ALTER TABLE t ADD c INT")
    assert list(extract_transform(c, [(1, ddl)])) == []


# --- pickling (Spark broadcasts the compiled pipeline) ------------------------------------

def test_pickle_round_trip_rebuilds_the_cache() -> None:
    c = compiled('{source: {namespace: s, table: "orders_[00-03]"}, '
                 'target: {namespace: s2, table: "copy_[00-03]"}, column_pairs: '
                 "[{source: id, target: oid}]}",
                 "{source: s.t, target: s2.t, columns: {exclude: [secret]}}")
    before = c.pairs_for("s", "orders_01")
    assert c._cache
    copy = pickle.loads(pickle.dumps(c))
    assert copy is not c
    assert copy._cache == {}
    assert (copy.pipeline_id, copy.version) == (PIPELINE_ID, 3)
    assert copy == c
    assert copy.pairs_for("s", "orders_01") == before
    assert set(copy._cache) == {("s", "orders_01")}
    change = insert("s", "orders_01", {"id": 1, "secret": "x"})
    assert list(transform(copy, 1, change)) == list(transform(c, 1, change))
    assert one(copy, change).table == "copy_01"
    assert one(copy, insert("s", "t", {"id": 1, "secret": "x"})).after == {"id": 1}


def test_templates_copy_a_family_of_databases_under_the_same_or_derived_names() -> None:
    c = compiled("{source: {namespace: 're:shop_\\d+', table: 're:.*'}, "
                 "target: {namespace: '{schema}', table: '{table}'}}",
                 "{source: {namespace: crm, table: 're:.*'}, "
                 "target: {namespace: ods, table: 'crm_{table}'}}")
    change = one(c, insert("shop_7", "new-table", {"id": 1}))
    assert (change.schema, change.table) == ("shop_7", "new-table")
    assert c.targets_of("crm", "leads") == [("dst", "ods", "crm_leads")]
