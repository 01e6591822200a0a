"""The definition loader: every bad file gives exact messages with file:line and dotted path."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.definitions import load_file
from shared.errors import ConfigError
from tests.unit.bad_definitions import BAD
from tests.unit.yaml_cases import SOURCES, P, channel, errors, load, pairs


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
        "columns, fan_out, joins, key_columns, merge_part, mode, partition_by, processor, "
        "push_weight, shard, "
        "source, target, virtual_columns",
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
    loaded = load("sources:\n  - {name: a, host: !custom db1, user: 2024-13-45}\n")
    assert loaded.sources[0].host == "db1"
    assert loaded.sources[0].user == "2024-13-45"


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


def test_the_pairs_of_one_shard_route_must_share_their_settings() -> None:
    """Only a route's first pair's columns, virtual columns and keys were used for every
    slot: a column the second pair excludes was copied to its slots without a word."""
    assert errors(pairs("""\
        - {source: s.t, target: 's2.t_[0-1]', shard: {column: uid}}
        - {source: s.t, target: {datasource: src, namespace: s3, table: 't_[0-1]'},
           shard: {column: uid}, columns: {exclude: [secret]}}
        """)) == [f"f.yaml:12: {P}.pairs[1]: pairs[0] also shards src:s.t, with other "
                  "column_mode, columns: the pairs of one shard route share its settings (only "
                  "the first's would be used for every slot); give them the same settings, "
                  "their targets aside"]
    load(pairs("""\
        - {source: s.t, target: 's2.t_[0-1]', shard: {column: uid}}
        - {source: s.t, target: {datasource: src, namespace: s3, table: 't_[0-1]'},
           shard: {column: uid}}
        """))


@pytest.mark.parametrize(("pair", "line"), [
    ("- {source: 'retl.retl_position', target: s2.t}", "source"),
    ("- {source: s.t, target: 'retl.t'}", "target"),
], ids=["from-retl", "into-retl"])
def test_no_pair_copies_setl_s_own_schema(pair: str, line: str) -> None:
    assert errors(pairs(pair + "\n")) == [
        f"f.yaml:11: {P}.pairs[0]: retl is setl's own schema (positions, the free door, loop "
        "marks): no pair copies it or into it; name the databases to copy"]
