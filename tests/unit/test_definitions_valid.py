"""The definition loader: valid files load into the model with their defaults."""

from __future__ import annotations

import pytest

from shared.definitions import load_file
from shared.model import (
    BinlogPosition,
    ColumnGroup,
    ColumnMode,
    ColumnPair,
    PipelineParams,
    ShardAlgorithm,
    ShardRule,
    StartupMode,
    VirtualColumn,
)
from shared.patterns import PatternKind
from shared.secrets import SecretRef
from tests.unit.yaml_cases import CONF, SOURCES, channel, load, pairs


def test_demo_file_loads() -> None:
    loaded = load_file(CONF / "demo.yaml")
    assert [s.name for s in loaded.sources] == ["sandbox-source", "sandbox-target"]
    source = loaded.sources[0]
    assert (source.host, source.port, source.user) == ("127.0.0.1", 23306, "setl")
    assert source.password == SecretRef("file:.sandbox/secrets/password")
    (demo,) = loaded.channels
    assert demo.name == "demo"
    assert demo.description == "demo.* on the source to demo_copy.* on the target"
    (forward,) = demo.pipelines
    assert (forward.name, forward.source, forward.target) == (
        "forward", "sandbox-source", "sandbox-target")
    assert demo.pipeline_id(forward) == "demo.forward"
    assert [str(p.source) for p in forward.pairs] == [
        "sandbox-source:demo.customers", "sandbox-source:demo.orders"]
    assert [str(p.target) for p in forward.pairs] == [
        "sandbox-target:demo_copy.customers", "sandbox-target:demo_copy.orders"]
    assert forward.params == PipelineParams()


def test_example_full_file_loads_every_option() -> None:
    loaded = load_file(CONF / "example-full.yaml")
    primary, cluster, replica = loaded.sources
    assert primary.name == "shop-primary" and primary.type == "mysql"
    assert primary.password == SecretRef("${SETL_SHOP_DB_PASSWORD}")
    assert (primary.port, primary.user, primary.charset) == (3306, "root", "utf8mb4")
    assert (replica.port, replica.user) == (3307, "setl")
    assert replica.password == SecretRef("file:/etc/setl/replica.secret")

    assert cluster.hosts == ("db1.example.com:3306", "db2.example.com:3306")
    assert (cluster.host, cluster.primary, cluster.switch_after_s) == ("db1.example.com",
                                                                       "read_only", 10)
    assert cluster.tls is not None and cluster.tls.ca == "/etc/setl/tls/ca.pem"
    shop, archive, history = loaded.channels
    assert archive.pipelines[0].params.start_position == BinlogPosition(gtid="0-11-100")
    assert history.pipelines[0].params.start_position == BinlogPosition("mysql-bin.000003", 4)
    (forward,) = shop.pipelines
    assert forward.nodes == ()
    assert forward.params == PipelineParams(free_door_source="shop-primary")
    plain, multi, wildcard, sharded = forward.pairs

    assert plain.column_mode is ColumnMode.INCLUDE and plain.columns == ()
    assert plain.column_pairs == (ColumnPair("note", "remark"),)
    assert plain.column_groups == (ColumnGroup(("street", "city", "zip")),)
    assert (plain.processor, plain.key_columns, plain.fan_out) == (None, (), False)

    assert multi.source.table.kind is PatternKind.MULTI
    assert multi.target.table.names()[:2] == ["orders_00", "orders_01"]
    assert multi.target.table.size == 16

    assert wildcard.source.table.kind is PatternKind.WILDCARD
    assert wildcard.source.table.matches("audit_202401")
    assert wildcard.virtual_columns == (
        VirtualColumn("origin", value="primary"),
        VirtualColumn("copied_from", expression="table_name"))

    assert sharded.target.datasource == "shop-replica"
    assert str(sharded.target) == "shop-replica:pay_[0-1].payments_[0-3]"
    assert sharded.shard == ShardRule("user_id", ShardAlgorithm.MODULO, 1)


def test_pipeline_defaults_apply() -> None:
    (pipeline,) = load(channel("")).channels[0].pipelines
    assert pipeline.params == PipelineParams(
        parallelism=5, batch_size=20_000, batch_timeout_ms=50, load_batch_size=1000,
        ddl_sync=False, skip_load_exception=False, dry_run=False, max_retries=5,
        startup=StartupMode.LATEST, start_position=None)
    assert pipeline.nodes == ()
    pair = pipeline.pairs[0]
    assert (pair.push_weight, pair.column_mode, pair.shard) == (0, ColumnMode.INCLUDE, None)


def test_pipeline_params_are_read() -> None:
    text = channel("        parallelism: 64\n        batch_size: 10\n        batch_timeout_ms: 7\n"
                   "        load_batch_size: 3\n        ddl_sync: true\n"
                   "        skip_load_exception: yes\n        dry_run: true\n"
                   "        max_retries: 0\n        nodes: [1, 3]\n")
    (pipeline,) = load(text).channels[0].pipelines
    assert pipeline.params == PipelineParams(64, 10, 7, 3, True, True, True, 0)
    assert pipeline.nodes == (1, 3)
    assert pipeline.is_candidate(3) and not pipeline.is_candidate(2)


@pytest.mark.parametrize(("start", "mode", "position"), [
    ("start: latest", StartupMode.LATEST, None),
    ("start: LATEST", StartupMode.LATEST, None),
    ("start: {file: binlog.000003, pos: 1234}", StartupMode.POSITION,
     BinlogPosition("binlog.000003", 1234)),
    ("start: {file: binlog.000003}", StartupMode.POSITION, BinlogPosition("binlog.000003", 4)),
    ("start: {gtid: '0-11-100'}", StartupMode.GTID, BinlogPosition(gtid="0-11-100")),
])
def test_start_sets_the_startup_mode(start: str, mode: StartupMode,
                                     position: BinlogPosition | None) -> None:
    (pipeline,) = load(channel(f"        {start}\n")).channels[0].pipelines
    assert (pipeline.params.startup, pipeline.params.start_position) == (mode, position)


def test_numbers_and_yaml_words_are_fine_names() -> None:
    text = """\
        sources:
          - {name: a, host: 127.0.0.1, user: 1234, charset: UTF8MB4}
          - {name: b, host: 10.5, user: yes, password: "${PW}"}
          - {name: c, host: 0x1F, type: MariaDB}
        channels:
          - name: c1
            pipelines:
              - name: p
                source: a
                target: b
                pairs:
                  - source: {namespace: 2024, table: 1}
                    target: {namespace: 012, table: "no"}
                    columns: {include: [id, no, on, 7]}
                    virtual_columns: [{name: flag, value: true}]
        """
    loaded = load(text)
    a, b, c = loaded.sources
    assert (a.host, a.user, a.charset) == ("127.0.0.1", "1234", "UTF8MB4")
    assert (b.host, b.user, str(b.password)) == ("10.5", "yes", "${PW}")
    assert (c.host, c.type) == ("0x1F", "mariadb")
    (pair,) = loaded.channels[0].pipelines[0].pairs
    assert (str(pair.source), str(pair.target)) == ("a:2024.1", "b:012.no")
    assert pair.columns == ("id", "no", "on", "7")
    assert pair.virtual_columns == (VirtualColumn("flag", value="true"),)


def test_two_way_channel_loads() -> None:
    text = SOURCES + (
        "channels:\n  - name: c\n    pipelines:\n"
        "      - {name: p, source: src, target: dst, pairs: [{source: s.t, target: s2.t}]}\n"
        "      - {name: q, source: dst, target: src, pairs: [{source: s2.t, target: s.t}]}\n")
    (c,) = load(text).channels
    assert [(p.name, p.source, p.target) for p in c.pipelines] == [
        ("p", "src", "dst"), ("q", "dst", "src")]
    assert c.pipeline("q").source == "dst"


def test_fan_out_on_both_pairs_is_allowed() -> None:
    text = pairs("""\
        - {source: s.t, target: s2.t, fan_out: true}
        - {source: s.t, target: s3.t, fan_out: true}
        """)
    first, second = load(text).channels[0].pipelines[0].pairs
    assert (first.fan_out, second.fan_out) == (True, True)
    assert str(second.target) == "dst:s3.t"


@pytest.mark.parametrize("text", [
    # both fan out: the table goes to both targets
    """\
    - {source: shop.orders, target: dw.orders_v2, fan_out: true}
    - {source: {namespace: shop, table: 're:.*'}, target: {namespace: lake, table: '{table}'},
       fan_out: true}
    """,
    # the fan-out pattern leaves the pair's table out (one that takes some of a family's
    # members is refused: bad_definitions.py)
    """\
    - {source: shop.orders, target: dw.orders_v2}
    - {source: {namespace: shop, table: 're:log_.*'}, target: lake.logs, fan_out: true}
    - {source: other.orders, target: dw.other, fan_out: true}
    """,
    # a pattern beside a fan-out pattern: which tables both meet is not decided here
    """\
    - {source: {namespace: shop, table: 're:o.*'}, target: {namespace: dw, table: '{table}'}}
    - {source: {namespace: shop, table: 're:.*'}, target: {namespace: lake, table: '{table}'},
       fan_out: true}
    """,
])
def test_a_pair_beside_fan_out_pairs_that_leave_its_tables_is_allowed(text: str) -> None:
    assert len(load(pairs(text)).channels[0].pipelines[0].pairs) >= 2


def test_shard_and_matching_ranges_are_allowed() -> None:
    text = pairs("""\
        - source: 's.orders_[0-3]'
          target: 's2.orders_[00-03]'
        - source: s.payments
          target: {namespace: 'pay_[0-1]', table: 'payments_[0-3]'}
          shard: {column: user_id, algorithm: quotient, table_balance_size: 8}
        """)
    ranged, sharded = load(text).channels[0].pipelines[0].pairs
    assert ranged.target.table.names() == ["orders_00", "orders_01", "orders_02", "orders_03"]
    assert sharded.shard == ShardRule("user_id", ShardAlgorithm.QUOTIENT, 8)


def test_columns_exclude_and_column_options() -> None:
    text = pairs("""\
        - source: s.t
          target: s2.t
          push_weight: 3
          columns: {exclude: [secret, token]}
          key_columns: [a, b]
          processor: mypkg.rows:clean
          virtual_columns: [{name: v, processor: mypkg.rows:fill}]
        """)
    (pair,) = load(text).channels[0].pipelines[0].pairs
    assert (pair.column_mode, pair.columns) == (ColumnMode.EXCLUDE, ("secret", "token"))
    assert (pair.push_weight, pair.key_columns, pair.processor) == (
        3, ("a", "b"), "mypkg.rows:clean")
    assert pair.virtual_columns == (VirtualColumn("v", processor="mypkg.rows:fill"),)


def test_sources_only_file_loads() -> None:
    loaded = load("sources:\n  - {name: a, host: db1, password: '${A_PW}'}\n")
    assert loaded.channels == ()
    assert loaded.sources[0].password == SecretRef("${A_PW}")


@pytest.mark.parametrize("name", ["transform-columns", "transform-tables", "transform-shard"])
def test_the_transform_examples_load_and_compile(name: str) -> None:
    from node.extract.etl import CompiledPipeline

    loaded = load_file(CONF / f"{name}.yaml")
    for defined in loaded.channels:
        for pipeline in defined.pipelines:
            compiled = CompiledPipeline.compile(f"{defined.name}.{pipeline.name}", 1, pipeline)
            assert compiled.pairs
