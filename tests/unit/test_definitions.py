"""The definition loader: every bad file gives exact messages with file:line and dotted path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from shared.definitions import load_file, load_text
from shared.errors import ConfigError
from shared.model import (
    BinlogPosition,
    ColumnGroup,
    ColumnMode,
    ColumnPair,
    Definitions,
    PipelineParams,
    ShardAlgorithm,
    ShardRule,
    StartupMode,
    VirtualColumn,
)
from shared.patterns import PatternKind
from shared.secrets import SecretRef

CONF = Path(__file__).resolve().parents[2] / "conf" / "channels"

# Two sources on lines 2 and 3; the channel cases below start on line 4.
SOURCES = """\
sources:
  - {name: src, host: db1}
  - {name: dst, host: db2}
"""


def load(text: str, **kwargs: object) -> Definitions:
    return load_text(textwrap.dedent(text), "f.yaml", **kwargs)  # type: ignore[arg-type]


def errors(text: str, **kwargs: object) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(text, **kwargs)
    return str(caught.value).splitlines()


def channel(pipeline_lines: str, pairs: str = "          - {source: s.t, target: s2.t}\n") -> str:
    """SOURCES plus one channel with one pipeline src → dst.

    Line numbers: 4 channels, 5 - name: c, 6 pipelines, 7 - name: p, 8 source, 9 target,
    then ``pipeline_lines``, then ``pairs:`` and ``pairs``.
    """
    return (SOURCES + "channels:\n  - name: c\n    pipelines:\n      - name: p\n"
            "        source: src\n        target: dst\n" + pipeline_lines
            + "        pairs:\n" + pairs)


def pairs(text: str) -> str:
    """SOURCES plus a pipeline whose pairs are ``text``; the first pair is on line 11."""
    return channel("", textwrap.indent(textwrap.dedent(text), " " * 10))


P = "channels[0].pipelines[0]"  # the pipeline of ``channel()``

BAD = [
    pytest.param(
        "sources:\n  - name: a\n    host: [db1\n",
        'f.yaml:4: not valid YAML: expected \',\' or \']\', but got \'<stream end>\'',
        id="yaml-syntax-unclosed-bracket"),
    pytest.param(
        "sources:\n  - name: a\n\thost: db1\n",
        "f.yaml:3: not valid YAML: found character '\\t' that cannot start any token",
        id="yaml-syntax-tab"),
    pytest.param(
        "sources:\n  - name: a\n    host: db\x07\n",
        "f.yaml:3: not valid YAML: character #x0007 is not allowed; remove it",
        id="yaml-control-character"),
    pytest.param(
        "", "f.yaml: the file is empty; expected 'sources:' and/or 'channels:'",
        id="empty-file"),
    pytest.param(
        "# only a comment\n\n",
        "f.yaml: the file is empty; expected 'sources:' and/or 'channels:'",
        id="comments-only"),
    pytest.param(
        "- name: a\n  host: db1\n", "f.yaml:1: expected a mapping, got a list",
        id="top-level-list"),
    pytest.param(
        "hello\n", 'f.yaml:1: expected a mapping, got "hello"', id="top-level-scalar"),
    pytest.param(
        "{}\n", "f.yaml:1: nothing defined: expected 'sources:' and/or 'channels:'",
        id="top-level-empty-mapping"),
    pytest.param(
        SOURCES + "chanels: []\n", "f.yaml:4: chanels: unknown key; did you mean 'channels'?",
        id="unknown-top-level-key"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    prot: 3306\n",
        "f.yaml:4: sources[0].prot: unknown key; did you mean 'port'?",
        id="unknown-key-did-you-mean"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    colour: red\n",
        "f.yaml:4: sources[0].colour: unknown key; known keys: charset, host, name, password, "
        "port, type, user",
        id="unknown-key-known-keys"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    host: db2\n",
        "f.yaml:4: sources[0].host: duplicate key", id="duplicate-key"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    port: five\n",
        'f.yaml:4: sources[0].port: expected an integer from 1 to 65535, got "five"',
        id="string-where-int"),
    pytest.param(
        channel("        parallelism: five\n"),
        f'f.yaml:10: {P}.parallelism: expected an integer from 1 to 64, got "five"',
        id="parallelism-five"),
    pytest.param(
        channel("        batch_size: true\n"),
        f'f.yaml:10: {P}.batch_size: expected a positive integer, got "true"',
        id="bool-where-int"),
    pytest.param(
        channel("        ddl_sync: maybe\n"),
        f'f.yaml:10: {P}.ddl_sync: expected true or false, got "maybe"', id="bad-boolean"),
    pytest.param(
        "sources:\n  - [a, db1]\n", "f.yaml:2: sources[0]: expected a mapping, got a list",
        id="list-where-mapping"),
    pytest.param(
        "sources: {name: a, host: db1}\n", "f.yaml:1: sources: expected a list, got a mapping",
        id="mapping-where-list"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    port: 99999\n",
        'f.yaml:4: sources[0].port: expected an integer from 1 to 65535, got "99999"',
        id="port-out-of-range"),
    pytest.param(
        channel("        parallelism: 0\n"),
        f'f.yaml:10: {P}.parallelism: expected an integer from 1 to 64, got "0"',
        id="parallelism-zero"),
    pytest.param(
        channel("        max_retries: -1\n"),
        f'f.yaml:10: {P}.max_retries: expected a non-negative integer, got "-1"',
        id="max-retries-negative"),
    pytest.param(
        channel("        select_nodes: [1, 0]\n"),
        f'f.yaml:10: {P}.select_nodes[1]: expected a positive integer, got "0"',
        id="node-id-zero"),
    pytest.param(
        "sources:\n  - name: a\n    port: 3306\n",
        "f.yaml:2: sources[0].host: required field is missing", id="missing-host"),
    pytest.param(
        "sources:\n  - name: a\n    host:\n",
        "f.yaml:2: sources[0].host: required field is missing", id="null-host-is-missing"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n",
        "f.yaml:5: channels[0].pipelines: required field is missing", id="missing-pipelines"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines:\n      - {name: p, source: src, "
        "target: dst}\n",
        "f.yaml:7: channels[0].pipelines[0].pairs: required field is missing",
        id="missing-pairs"),
    pytest.param(
        channel("", "          []\n"),
        f"f.yaml:11: {P}.pairs: a pipeline needs at least one pair (source table → target table)",
        id="empty-pairs"),
    pytest.param(
        "sources:\n  - {name: Shop, host: db1}\n",
        "f.yaml:2: sources[0].name: invalid name 'Shop': start with a lower-case letter, then "
        "lower-case letters, digits, '_' or '-' (at most 63)",
        id="bad-name"),
    pytest.param(
        "sources:\n  - {name: a, host: db1, type: postgres}\n",
        'f.yaml:2: sources[0].type: expected one of mysql, mariadb, got "postgres"',
        id="bad-source-type"),
    pytest.param(
        "sources:\n  - {name: a, host: db1}\n  - {name: b, host: db2}\n  - {name: a, host: db3}\n",
        "f.yaml:4: sources[2]: duplicate source name 'a'", id="duplicate-source"),
    pytest.param(
        SOURCES + "channels:\n"
        "  - {name: c, pipelines: [{name: p, source: src, target: dst, pairs: [{source: s.t, "
        "target: s2.t}]}]}\n"
        "  - {name: c, pipelines: [{name: p, source: src, target: dst, pairs: [{source: s.t, "
        "target: s2.t}]}]}\n",
        "f.yaml:6: channels[1]: duplicate channel name 'c'", id="duplicate-channel"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines:\n"
        "      - {name: p, source: src, target: dst, pairs: [{source: s.t, target: s2.t}]}\n"
        "      - {name: p, source: dst, target: src, pairs: [{source: s2.t, target: s.t}]}\n",
        "f.yaml:8: channels[0].pipelines[1]: duplicate pipeline name 'p'",
        id="duplicate-pipeline"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines:\n      - name: p\n"
        "        source: nowhere\n        target: dst\n        pairs: [{source: s.t, "
        "target: s2.t}]\n",
        f"f.yaml:8: {P}.source: unknown source 'nowhere' (known: dst, src); "
        "define it under 'sources:'",
        id="dangling-pipeline-source"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines:\n      - name: p\n"
        "        source: src\n        target: nowhere\n        pairs: [{source: s.t, "
        "target: s2.t}]\n",
        f"f.yaml:9: {P}.target: unknown source 'nowhere' (known: dst, src); "
        "define it under 'sources:'",
        id="dangling-pipeline-target"),
    pytest.param(
        "channels:\n  - name: c\n    pipelines:\n      - name: p\n"
        "        source: src\n        target: dst\n        pairs: [{source: s.t, "
        "target: s2.t}]\n",
        ["f.yaml:5: channels[0].pipelines[0].source: unknown source 'src' (known: none "
         "defined); define it under 'sources:'",
         "f.yaml:6: channels[0].pipelines[0].target: unknown source 'dst' (known: none "
         "defined); define it under 'sources:'"],
        id="dangling-no-sources-at-all"),
    pytest.param(
        pairs("""\
            - source: {datasource: elsewhere, namespace: s, table: t}
              target: s2.t
            """),
        f"f.yaml:11: {P}.pairs[0].source.datasource: unknown source 'elsewhere' (known: dst, "
        "src); define it under 'sources:'",
        id="dangling-media-datasource"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    password: hunter2\n",
        "f.yaml:4: sources[0].password: passwords are references, not values: write ${ENV_VAR} "
        "or file:/path/to/file",
        id="plain-text-password"),
    pytest.param(
        "sources:\n  - {name: a, host: db1, password: 'file:'}\n",
        "f.yaml:2: sources[0].password: passwords are references, not values: write ${ENV_VAR} "
        "or file:/path/to/file",
        id="password-file-without-path"),
    pytest.param(
        pairs("- {source: 's.orders_[5-1]', target: s2.orders}\n"),
        f"f.yaml:11: {P}.pairs[0].source: invalid numbered pattern 'orders_[5-1]': "
        "range 5-1 is empty",
        id="multi-empty-range"),
    pytest.param(
        pairs("- {source: {namespace: s, table: 'orders_[a-b]'}, target: s2.orders}\n"),
        f"f.yaml:11: {P}.pairs[0].source.table: invalid numbered pattern 'orders_[a-b]': write "
        "it as prefix[LOW-HIGH]suffix, e.g. orders_[0-15] or orders_[00-15] for zero padding",
        id="multi-letters"),
    pytest.param(
        pairs("- {source: {namespace: s, table: 're:(ab'}, target: s2.t}\n"),
        f"f.yaml:11: {P}.pairs[0].source.table: invalid regular expression '(ab': missing ), "
        "unterminated subpattern at position 0",
        id="bad-regex"),
    pytest.param(
        pairs("- {source: {namespace: s, table: 're:t_\\d+'}, target: s2.t_x}\n"
              "- {source: s.u, target: {namespace: s2, table: 're:u_\\d+'}}\n"),
        f"f.yaml:12: {P}.pairs[1]: a target name cannot be a regular expression; name the table "
        "or a numbered family",
        id="regex-target"),
    pytest.param(
        pairs("- {source: 're:s.t'}\n"),
        [f"f.yaml:11: {P}.pairs[0].source: expected schema.table, got \"re:s.t\" (for a regular "
         "expression write {namespace: ..., table: 're:...'})",
         f"f.yaml:11: {P}.pairs[0].target: required field is missing"],
        id="regex-in-short-form-and-no-target"),
    pytest.param(
        pairs("- {source: orders, target: s2.orders}\n"),
        f"f.yaml:11: {P}.pairs[0].source: expected schema.table, got \"orders\" (for a regular "
        "expression write {namespace: ..., table: 're:...'})",
        id="media-without-schema"),
    pytest.param(
        pairs("- {source: 's.orders_[0-3]', target: 's2.orders_[0-7]'}\n"),
        f"f.yaml:11: {P}.pairs[0]: target table orders_[0-7] has 8 names but source "
        "orders_[0-3] has 4; give a shard rule or matching ranges",
        id="multi-size-mismatch"),
    pytest.param(
        pairs("- {source: 's.orders', target: 's2.orders_[0-7]'}\n"),
        f"f.yaml:11: {P}.pairs[0]: target table orders_[0-7] has 8 names but source "
        "orders has 1; give a shard rule or matching ranges",
        id="single-to-multi-without-shard"),
    pytest.param(
        pairs("""\
            - source: s.orders
              target: s2.orders
              shard: {column: user_id}
            """),
        f"f.yaml:11: {P}.pairs[0]: a shard rule needs a numbered target, e.g. "
        "shop_[0-1].orders_[0-3]",
        id="shard-without-numbered-target"),
    pytest.param(
        pairs("""\
            - source: s.orders
              target: 's2.orders_[0-3]'
              shard: {column: user_id, algorithm: hash}
            """),
        f'f.yaml:13: {P}.pairs[0].shard.algorithm: expected one of modulo, quotient, got "hash"',
        id="shard-bad-algorithm"),
    pytest.param(
        pairs("""\
            - {source: s.t, target: s2.t, fan_out: true}
            - {source: s.t, target: s3.t}
            """),
        f"f.yaml:12: {P}.pairs[1]: pairs[0] already reads src:s.t; mark both 'fan_out: true' "
        "to split one source table into several targets",
        id="same-table-without-fan-out"),
    pytest.param(
        pairs("- {source: s.t, target: {datasource: src, namespace: s, table: t}}\n"),
        f"f.yaml:11: {P}.pairs[0]: the pair would copy src:s.t onto itself",
        id="copy-onto-itself"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              columns: {include: [a], exclude: [b]}
            """),
        f"f.yaml:13: {P}.pairs[0].columns: give either include or exclude, not both",
        id="include-and-exclude"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              columns: [a, b]
            """),
        f"f.yaml:13: {P}.pairs[0].columns: expected a mapping, got a list",
        id="columns-list-instead-of-include"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              key_columns: [id, id]
            """),
        f"f.yaml:13: {P}.pairs[0].key_columns: a column is listed twice",
        id="column-listed-twice"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              column_pairs:
                - {source: a, target: b}
                - {source: a, target: c}
            """),
        f"f.yaml:14: {P}.pairs[0].column_pairs: a source column is mapped twice",
        id="column-mapped-twice"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              column_groups:
                - [street, city]
                - [zip]
            """),
        f"f.yaml:15: {P}.pairs[0].column_groups[1]: a column group needs at least two columns",
        id="column-group-of-one"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              column_groups: [street, city]
            """),
        [f'f.yaml:13: {P}.pairs[0].column_groups[0]: expected a list of column names, '
         'got "street"',
         f'f.yaml:13: {P}.pairs[0].column_groups[1]: expected a list of column names, '
         'got "city"'],
        id="column-group-not-a-list"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              virtual_columns:
                - {name: origin, value: primary, expression: "1 + 1"}
            """),
        f"f.yaml:14: {P}.pairs[0].virtual_columns[0]: give exactly one of value, expression "
        "or processor",
        id="virtual-column-two-fillers"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              virtual_columns:
                - {name: origin}
            """),
        f"f.yaml:14: {P}.pairs[0].virtual_columns[0]: give exactly one of value, expression "
        "or processor",
        id="virtual-column-no-filler"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              processor: not a callable
            """),
        f'f.yaml:13: {P}.pairs[0].processor: expected a Python callable as module:function, '
        'got "not a callable"',
        id="bad-processor"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              virtual_columns:
                - {name: total, expression: "price *"}
            """),
        f"f.yaml:14: {P}.pairs[0].virtual_columns[0].expression: invalid expression "
        "'price *': invalid syntax",
        id="bad-expression"),
    pytest.param(
        pairs("""\
            - source: s.t
              target: s2.t
              virtual_columns:
                - {name: 'bad name', value: x}
            """),
        f"f.yaml:14: {P}.pairs[0].virtual_columns[0].name: invalid column name 'bad name'",
        id="bad-column-name"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines:\n"
        "      - {name: p, source: src, target: dst, pairs: [{source: s.t, target: s2.t}]}\n"
        "      - {name: q, source: src, target: dst, pairs: [{source: s.u, target: s2.u}]}\n",
        "f.yaml:7: channels[0].pipelines: the two pipelines of a two-way channel must run in "
        "opposite directions (got src->dst and src->dst)",
        id="two-way-not-opposite"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines:\n"
        "      - {name: p, source: src, target: dst, pairs: [{source: s.t, target: s2.t}]}\n"
        "      - {name: q, source: dst, target: src, pairs: [{source: s2.t, target: s.t}]}\n"
        "      - {name: r, source: src, target: dst, pairs: [{source: s.u, target: s2.u}]}\n",
        "f.yaml:7: channels[0].pipelines: 3 pipelines given; a channel has one pipeline "
        "(one-way) or two (two-way)",
        id="three-pipelines"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines: []\n",
        "f.yaml:6: channels[0].pipelines: 0 pipelines given; a channel has one pipeline "
        "(one-way) or two (two-way)",
        id="no-pipelines"),
    pytest.param(
        SOURCES + "channels:\n  - name: c\n    pipelines: forward\n",
        'f.yaml:6: channels[0].pipelines: expected a list, got "forward"',
        id="pipelines-scalar"),
    pytest.param(
        channel("        start: {file: binlog.000003, pos: 4, gtid: '0-1-100'}\n"),
        f"f.yaml:10: {P}.start: give either file/pos or gtid, not both",
        id="start-file-and-gtid"),
    pytest.param(
        channel("        start: {gtid: '0-1-100', pos: 4}\n"),
        f"f.yaml:10: {P}.start: give either file/pos or gtid, not both",
        id="start-pos-and-gtid"),
    pytest.param(
        channel("        start: {pos: 120}\n"),
        f"f.yaml:10: {P}.start: expected 'latest', {{file: ..., pos: ...}} or {{gtid: ...}}",
        id="start-pos-without-file"),
    pytest.param(
        channel("        start: {file: binlog.000003, pos: 3}\n"),
        f'f.yaml:10: {P}.start.pos: expected an integer of at least 4, got "3"',
        id="start-pos-below-4"),
    pytest.param(
        channel("        start: earliest\n"),
        f'f.yaml:10: {P}.start: expected one of latest, got "earliest"',
        id="start-unknown-word"),
    pytest.param(
        "sources:\n  - name: a\n    host: db1\n    charset: [utf8]\n",
        "f.yaml:4: sources[0].charset: expected a non-empty string, got a list",
        id="list-where-string"),
    pytest.param(
        "sources:\n  - {name: a, host: ''}\n",
        'f.yaml:2: sources[0].host: expected a non-empty string, got ""',
        id="empty-string"),
]


@pytest.mark.parametrize(("text", "expected"), BAD)
def test_bad_definitions_are_reported_exactly(text: str, expected: str | list[str]) -> None:
    assert errors(text) == ([expected] if isinstance(expected, str) else expected)


def test_the_bad_table_is_large() -> None:
    assert len(BAD) >= 20
    assert len({param.id for param in BAD}) == len(BAD)


def test_every_error_is_reported_at_once_in_line_order() -> None:
    text = """\
        sources:
          - name: src
            host: db1
            port: 99999
          - name: dst
            host: db2
            password: secret
        channels:
          - name: c
            pipelines:
              - name: p
                source: src
                target: nowhere
                parallelism: five
                pairs:
                  - source: s.t
                    target: s2.t
                    fan_out: perhaps
                    speed: fast
        """
    assert errors(text) == [
        'f.yaml:4: sources[0].port: expected an integer from 1 to 65535, got "99999"',
        "f.yaml:7: sources[1].password: passwords are references, not values: write ${ENV_VAR} "
        "or file:/path/to/file",
        f"f.yaml:13: {P}.target: unknown source 'nowhere' (known: dst, src); "
        "define it under 'sources:'",
        f'f.yaml:14: {P}.parallelism: expected an integer from 1 to 64, got "five"',
        f'f.yaml:18: {P}.pairs[0].fan_out: expected true or false, got "perhaps"',
        f"f.yaml:19: {P}.pairs[0].speed: unknown key; known keys: column_groups, column_pairs, "
        "columns, fan_out, key_columns, processor, push_weight, shard, source, target, "
        "virtual_columns",
    ]


def test_error_carries_structured_issues() -> None:
    with pytest.raises(ConfigError) as caught:
        load(channel("        parallelism: five\n"))
    (issue,) = caught.value.issues
    assert (issue.file, issue.line, issue.path) == ("f.yaml", 10, f"{P}.parallelism")
    assert issue.message == 'expected an integer from 1 to 64, got "five"'


def test_a_broken_source_is_not_also_reported_as_unknown() -> None:
    text = "sources:\n  - {name: src}\n  - {name: dst, host: db2}\n" + channel("")[len(SOURCES):]
    assert errors(text) == ["f.yaml:2: sources[0].host: required field is missing"]


def test_a_bad_expression_is_not_also_reported_as_a_missing_filler() -> None:
    text = pairs("""\
        - source: s.t
          target: s2.t
          virtual_columns: [{name: total, expression: "(", value: x}]
        """)
    lines = errors(text)
    assert lines[-1] == (f"f.yaml:13: {P}.pairs[0].virtual_columns[0]: give exactly one of "
                         "value, expression or processor")
    assert len(lines) == 2 and "invalid expression '('" in lines[0]


def test_unknown_yaml_tag_and_impossible_date_are_text() -> None:
    loaded = load("sources:\n  - {name: a, host: !custom db1, charset: 2024-13-45}\n")
    assert loaded.sources[0].host == "db1"
    assert loaded.sources[0].charset == "2024-13-45"


def test_known_sources_make_a_reference_valid() -> None:
    text = channel("")[len(SOURCES):]
    assert errors(text)[0].startswith("f.yaml:5: channels[0].pipelines[0].source: unknown "
                                      "source 'src' (known: none defined)")
    loaded = load(text, known_sources=["src", "dst"])
    assert loaded.sources == ()
    (pipeline,) = loaded.channels[0].pipelines
    assert (pipeline.source, pipeline.target) == ("src", "dst")


def test_known_sources_also_serve_pair_datasources() -> None:
    text = pairs("- {source: {datasource: old, namespace: s, table: t}, target: s2.t}\n")
    loaded = load(text, known_sources=["old"])
    assert loaded.channels[0].pipelines[0].pairs[0].source.datasource == "old"


def test_load_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("sources:\n  - {name: a, host: db1, port: 0}\n")
    with pytest.raises(ConfigError) as caught:
        load_file(path)
    assert str(caught.value) == (f'{path}:2: sources[0].port: expected an integer from 1 to '
                                 '65535, got "0"')


def test_load_file_reports_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError) as caught:
        load_file(path)
    (issue,) = caught.value.issues
    assert issue.message == f"{path}: cannot read: No such file or directory"


def test_load_file_reports_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"sources:\n  - {name: a, host: caf\xe9}\n")
    with pytest.raises(ConfigError) as caught:
        load_file(path)
    (issue,) = caught.value.issues
    assert issue.message == f"{path}: not UTF-8 text (byte 32); save it as UTF-8"


def test_a_plain_config_error_prints_just_its_message(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_file(tmp_path / "absent.yaml")
    assert str(caught.value).startswith(str(tmp_path))


# ---------------------------------------------------------------------------- good files


def test_demo_file_loads() -> None:
    loaded = load_file(CONF / "demo.yaml")
    assert [s.name for s in loaded.sources] == ["sandbox-source", "sandbox-target"]
    source = loaded.sources[0]
    assert (source.host, source.port, source.user) == ("127.0.0.1", 23306, "setl")
    assert source.password == SecretRef("file:.sandbox/secret")
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
    primary, replica = loaded.sources
    assert primary.name == "shop-primary" and primary.type == "mysql"
    assert primary.password == SecretRef("${SHOP_DB_PASSWORD}")
    assert (primary.port, primary.user, primary.charset) == (3306, "root", "utf8mb4")
    assert (replica.port, replica.user) == (3307, "setl")
    assert replica.password == SecretRef("file:/etc/setl/replica.secret")

    (shop,) = loaded.channels
    (forward,) = shop.pipelines
    assert (forward.select_nodes, forward.load_nodes) == ((), ())
    assert forward.params == PipelineParams()
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
        parallelism=5, batch_size=2000, batch_timeout_ms=100, load_batch_size=1000,
        ddl_sync=False, skip_load_exception=False, dry_run=False, max_retries=5,
        startup=StartupMode.LATEST, start_position=None)
    assert (pipeline.select_nodes, pipeline.load_nodes) == ((), ())
    pair = pipeline.pairs[0]
    assert (pair.push_weight, pair.column_mode, pair.shard) == (0, ColumnMode.INCLUDE, None)


def test_pipeline_params_are_read() -> None:
    text = channel("        parallelism: 64\n        batch_size: 10\n        batch_timeout_ms: 7\n"
                   "        load_batch_size: 3\n        ddl_sync: true\n"
                   "        skip_load_exception: yes\n        dry_run: true\n"
                   "        max_retries: 0\n        select_nodes: [1, 2]\n"
                   "        load_nodes: [3]\n")
    (pipeline,) = load(text).channels[0].pipelines
    assert pipeline.params == PipelineParams(64, 10, 7, 3, True, True, True, 0)
    assert (pipeline.select_nodes, pipeline.load_nodes) == ((1, 2), (3,))


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
          - {name: a, host: 127.0.0.1, user: 1234, charset: 10}
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
    assert (a.host, a.user, a.charset) == ("127.0.0.1", "1234", "10")
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
