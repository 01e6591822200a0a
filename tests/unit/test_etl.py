"""node/extract/etl.py: compiling a pipeline, picking pairs, mapping names, columns and keys."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

from node.changes import ChangeType, RowChange, TargetChange
from node.extract.etl import CompiledPipeline, extract_transform, transform
from shared.definitions import load_text
from shared.errors import ConfigError
from shared.model import Pipeline

PIPELINE_ID = "shop.fwd"


def pipeline(*pairs: str, options: str = "") -> Pipeline:
    """A pipeline src → dst with ``pairs`` given as YAML flow mappings."""
    lines = [
        "sources:",
        "  - {name: src, host: h1}",
        "  - {name: dst, host: h2}",
        "  - {name: other, host: h3}",
        "channels:",
        "  - name: shop",
        "    pipelines:",
        "      - name: fwd",
        "        source: src",
        "        target: dst",
        *(f"        {option}" for option in options.splitlines() if option),
        "        pairs:",
        *(f"          - {pair}" for pair in pairs),
    ]
    definitions = load_text("\n".join(lines) + "\n", "f.yaml")
    return definitions.channels[0].pipelines[0]


def compiled(*pairs: str, options: str = "") -> CompiledPipeline:
    return CompiledPipeline.compile(PIPELINE_ID, 3, pipeline(*pairs, options=options))


def insert(schema: str, table: str, row: dict[str, Any],
           keys: tuple[str, ...] = ("id",)) -> RowChange:
    return RowChange(schema, table, ChangeType.INSERT, keys, None, row)


def targets(c: CompiledPipeline, schema: str, table: str) -> list[str]:
    return [f"{p.pair.target.datasource}:{p.pair.target.namespace}.{p.pair.target.table}"
            for p in c.pairs_for(schema, table)]


def one(c: CompiledPipeline, change: RowChange, seq: int = 1) -> TargetChange:
    found = list(transform(c, seq, change))
    assert len(found) == 1, found
    return found[0]


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


# --- columns and keys ---------------------------------------------------------------------

ROW = {"id": 1, "name": "a", "secret": "x", "note": "n"}


def test_empty_include_keeps_every_column() -> None:
    c = compiled("{source: s.t, target: s2.t, columns: {include: []}}")
    assert one(c, insert("s", "t", dict(ROW))).after == ROW


def test_include_keeps_listed_columns_and_the_key() -> None:
    c = compiled("{source: s.t, target: s2.t, columns: {include: [name]}}")
    assert one(c, insert("s", "t", dict(ROW))).after == {"id": 1, "name": "a"}


def test_exclude_drops_listed_columns_but_never_the_key() -> None:
    c = compiled("{source: s.t, target: s2.t, columns: {exclude: [id, secret]}}")
    assert one(c, insert("s", "t", dict(ROW))).after == {"id": 1, "name": "a", "note": "n"}


def test_column_pairs_rename_columns_and_key_names() -> None:
    c = compiled("{source: s.t, target: s2.t, column_pairs: [{source: id, target: order_id}, "
                 "{source: note, target: remark}]}")
    change = one(c, RowChange("s", "t", ChangeType.UPDATE, ("id",), dict(ROW),
                              {**ROW, "note": "m"}))
    assert change.keys == ("order_id",)
    assert change.before_key == (1,)
    assert change.after == {"order_id": 1, "name": "a", "secret": "x", "remark": "m"}


def test_include_names_source_columns_when_renaming() -> None:
    c = compiled("{source: s.t, target: s2.t, columns: {include: [note]}, "
                 "column_pairs: [{source: note, target: remark}]}")
    assert one(c, insert("s", "t", dict(ROW))).after == {"id": 1, "remark": "n"}


def test_insert_has_no_before_key() -> None:
    change = one(compiled("{source: s.t, target: s2.t}"), insert("s", "t", {"id": 5}))
    assert (change.type, change.before_key, change.after) == (ChangeType.INSERT, None, {"id": 5})


def test_delete_carries_before_key_and_no_row() -> None:
    c = compiled("{source: s.t, target: s2.t}")
    change = one(c, RowChange("s", "t", ChangeType.DELETE, ("id",), dict(ROW), None), seq=6)
    assert change == TargetChange("dst", "s2", "t", ChangeType.DELETE, ("id",), (1,), None, 0, 6)


def test_update_carries_the_old_key_when_the_key_changes() -> None:
    c = compiled("{source: s.t, target: s2.t, columns: {include: [name]}}")
    change = one(c, RowChange("s", "t", ChangeType.UPDATE, ("id",), dict(ROW),
                              {**ROW, "id": 2, "name": "b"}))
    assert change.type is ChangeType.UPDATE
    assert change.before_key == (1,)
    assert change.after == {"id": 2, "name": "b"}


def test_composite_key_order_is_kept() -> None:
    c = compiled("{source: s.t, target: s2.t}")
    change = one(c, RowChange("s", "t", ChangeType.DELETE, ("b", "a"), {"a": 1, "b": 2}, None))
    assert (change.keys, change.before_key) == (("b", "a"), (2, 1))


def test_a_keyless_table_keeps_its_whole_before_image_and_no_key() -> None:
    c = compiled("{source: s.t, target: s2.t, columns: {exclude: [w]}}")
    row = {"v": 1, "w": None}
    change = one(c, RowChange("s", "t", ChangeType.UPDATE, (), row, {**row, "v": 2}))
    assert (change.keys, change.before_key, change.before, change.after) == (
        (), (), {"v": 1}, {"v": 2})


def test_a_keyless_table_whose_pair_merges_wide_row_parts_needs_key_columns() -> None:
    c = compiled("{source: s.t, target: s2.t, merge_part: true}")
    with pytest.raises(ConfigError) as caught:
        list(transform(c, 1, insert("s", "t", {"v": 1}, keys=())))
    assert str(caught.value) == (f"pipeline {PIPELINE_ID}: table s.t has no primary key and "
                                 "no unique key over NOT NULL columns, and its pair joins or "
                                 "merges parts of a wide row by key; give 'key_columns' on its "
                                 "pair")


def test_a_unique_key_read_at_start_keys_a_table_without_primary_key() -> None:
    c = dataclasses.replace(compiled("{source: s.t, target: s2.t}"),
                            table_keys={("s", "t"): ("code",)})
    [change] = transform(c, 1, insert("s", "t", {"code": "x", "v": 1}, keys=()))
    assert change.keys == ("code",)


def test_keys_read_again_after_a_ddl_key_the_next_batch_run_in_the_node(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch run in the node maps changes by what it worked out per table and key; after
    an ALTER moved the table's unique key from a to b, the next batch was still merged by
    a (no longer unique: two of its rows taken for one, a delete by it removing both)."""
    from node import start

    c = dataclasses.replace(compiled("{source: s.t, target: s2.t}"),
                            table_keys={("s", "t"): ("a",)})
    update = RowChange("s", "t", ChangeType.UPDATE, (), {"a": 1, "b": 10, "v": 0},
                       {"a": 1, "b": 10, "v": 1})
    def mapped() -> tuple[tuple[str, ...], Any]:
        [change] = extract_transform(c, [(1, update)])  # the node's way: its mappings kept
        return change.keys, change.before_key

    assert mapped() == (("a",), (1,))
    monkeypatch.setattr(start, "with_table_keys", lambda compiled, *args: dataclasses.replace(
        compiled, table_keys={("s", "t"): ("b",)}))
    start.keys_again(c, None, None)  # type: ignore[arg-type]  # (read: patched above)
    assert mapped() == (("b",), (10,))


def test_key_columns_override_the_primary_key() -> None:
    c = compiled("{source: s.t, target: s2.t, key_columns: [code, name], "
                 "columns: {include: [v]}, column_pairs: [{source: code, target: c}]}")
    row = {"id": 1, "code": "X", "name": "a", "v": 2, "w": 3}
    change = one(c, RowChange("s", "t", ChangeType.UPDATE, ("id",), row, {**row, "v": 4}))
    assert change.keys == ("c", "name")
    assert change.before_key == ("X", "a")
    assert change.after == {"c": "X", "name": "a", "v": 4}  # id is no key here: excluded


def test_key_columns_of_a_table_without_primary_key_never_replace_its_whole_row() -> None:
    # they may repeat or hold NULLs: the row is found by its whole before image all the same
    c = compiled("{source: s.t, target: s2.t, key_columns: [code]}")
    change = one(c, RowChange("s", "t", ChangeType.DELETE, (), {"code": "X", "v": 1}, None))
    assert (change.keys, change.before) == ((), {"code": "X", "v": 1})


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


def test_a_worker_error_of_setls_own_kind_keeps_its_class_and_others_say_what_they_were() -> None:
    from node.spark import _translate  # the driver's view of a failed Spark job
    from shared.errors import SetlError, ShardError, TransformError

    job = compiled("{source: s.t, target: s2.t}")
    trace = ("py4j.protocol.Py4JJavaError: An error occurred while calling collect.\n"
             "Traceback (most recent call last):\n  File \"node/extract/etl.py\", line 9, in _map\n"
             "shared.errors.TransformError: pair src:s.t: processor m:f failed on key (1,)\n"
             "\tat org.apache.spark.api.python.BasePythonRunner...\n")
    error = _translate(Exception(trace), job)
    assert type(error) is TransformError
    assert str(error).endswith("extract/transform failed: pair src:s.t: processor m:f failed "
                               "on key (1,)")
    shard = _translate(Exception(trace.replace("TransformError", "ShardError")), job)
    assert type(shard) is ShardError
    bare = _translate(Exception("Traceback\nTypeError: unhashable type: 'set'\n\tat x"), job)
    assert type(bare) is SetlError and str(bare).endswith("TypeError: unhashable type: 'set'")


def test_a_small_batch_runs_in_the_node_with_the_errors_a_spark_job_gives() -> None:
    from node.extract.job import Part
    from node.jobs import JobSpec
    from node.spark import SparkRunner
    from shared.errors import SetlError, TransformError
    from shared.settings import SparkSettings

    runner = SparkRunner(SparkSettings("local[1]", "512m", (), local_max_rows=10))
    job = compiled("{source: s.t, target: s2.t, processor: 'setl_examples:mask_email'}")
    spec = JobSpec(1, False, changes_only=True)

    def run(pipeline: CompiledPipeline, change: RowChange) -> list[TargetChange]:
        assert runner.local(1)
        [result] = runner.run_job(pipeline, spec, [Part.of_changes([change])], local=True)
        return result.changes

    [out] = run(job, insert("s", "t", {"id": 1, "email": "a@b.org"}))
    assert out.table == "t" and out.after["email"].endswith("@b.org")
    with pytest.raises(TransformError, match=r"extract/transform failed: pipeline shop.fwd pair "
                                             r"src:s.t: processor setl_examples:mask_email failed"):
        run(job, insert("s", "t", {"id": 3, "email": 5}))
    broken = compiled("{source: s.t, target: s2.t}")
    object.__setattr__(broken, "pairs", None)  # a Python error inside E/T, not setl's own
    with pytest.raises(SetlError, match="extract/transform failed: TypeError") as raised:
        run(broken, insert("s", "t", {"id": 1}))
    assert type(raised.value) is SetlError
    assert runner._session is None  # no Spark was started for any of it


def test_a_warm_up_asked_for_after_the_stop_starts_no_spark(caplog) -> None:
    from node.spark import SparkRunner
    from shared.errors import SetlError
    from shared.settings import SparkSettings

    runner = SparkRunner(SparkSettings("local[1]", "512m", ()))
    runner.stop()  # the node is shutting down while the supervisor still reconciles
    runner.warm()
    assert runner._warming is not None
    runner._warming.join(10)
    assert runner._session is None
    assert "event=spark_warm_failed" in caplog.text and "shutting down" in caplog.text
    runner.warm()  # once only
    with pytest.raises(SetlError, match="Spark was stopped"):
        runner.context  # noqa: B018


def test_while_spark_starts_at_boot_a_large_batch_runs_in_the_node() -> None:
    """Until Spark has started and run its first job, ``start: boot`` runs every batch in
    the node but one transaction's too large for it; ``on_demand`` (the batch starts Spark)
    and ``local_max_rows: 0`` (every batch on Spark) wait for it, as they say."""
    from node.spark import STARTING_MAX_ROWS, SparkRunner
    from shared.settings import SparkSettings

    def runner(**settings: object) -> SparkRunner:
        return SparkRunner(SparkSettings("local[1]", "512m", (), **settings))  # type: ignore[arg-type]

    assert runner(local_max_rows=10, start="boot").local(STARTING_MAX_ROWS)
    assert not runner(local_max_rows=10, start="boot").local(STARTING_MAX_ROWS + 1)
    assert not runner(local_max_rows=10, start="on_demand").local(11)
    assert runner(local_max_rows=10, start="on_demand").local(10)
    assert not runner(local_max_rows=0, start="boot").local(1)
