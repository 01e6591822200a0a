"""Bad input is refused with a clear error, never by exhausting the manager or a node:
expressions bounded in size, depth and regex time, YAML aliases refused, NUL in references."""

from __future__ import annotations

import time

import pytest

from shared import definitions, expr
from shared.confinement import Confinement
from shared.errors import ConfigError

PAIR = """\
sources:
  - {{name: s, host: 127.0.0.1}}
channels:
  - name: c
    pipelines:
      - name: p
        source: s
        target: s
        pairs:
          - source: a.t
            target: a.u
            virtual_columns:
              - {{name: v, expression: "{expression}"}}
"""


@pytest.mark.parametrize("expression, said", [
    ("'a' * 300000000", "longer than expressions may make"),
    ("-" * 60 + "1", "nested too deeply"),
    ("upper(" * 60 + "x" + ")" * 60, "nested too deeply"),
    ("regex_group(x, '(a)\\\\1')", "invalid escape sequence"),
    ("x" + " + x" * 2000, "longer than 4,096"),
])
def test_an_expression_beyond_the_limits_is_refused(expression: str, said: str) -> None:
    with pytest.raises(expr.ExpressionError) as refused:
        expr.evaluate(expr.parse(expression), {"x": "a"})  # (sizes: when a value is made)
    assert said in str(refused.value), str(refused.value)


def test_apply_names_the_field_of_an_expression_too_deep() -> None:
    with pytest.raises(ConfigError) as refused:
        definitions.load_text(PAIR.format(expression="-" * 60 + "1"), "c.yaml")
    [issue] = refused.value.issues
    assert (issue.line, issue.path) == (13, "channels[0].pipelines[0].pairs[0]."
                                            "virtual_columns[0].expression")
    assert "nested too deeply" in issue.message


def test_a_catastrophic_pattern_runs_in_linear_time() -> None:
    tree = expr.parse("regex_group(x, '(a+)+$', 1)")
    started = time.monotonic()
    assert expr.evaluate(tree, {"x": "a" * 100_000 + "b"}) is None
    assert expr.evaluate(tree, {"x": "aaa"}) == "aaa"
    assert time.monotonic() - started < 5  # Python's re takes longer than the universe here


def test_replace_cannot_multiply_a_value_past_the_limit() -> None:
    tree = expr.parse("replace(x, '', 'xxxxxxxxxx')")
    with pytest.raises(expr.ExpressionError, match="replace would make"):
        expr.evaluate(tree, {"x": "a" * 5_000_000})


def test_yaml_aliases_that_multiply_are_refused_before_they_do() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + k)}: &{chr(98 + k)} [{', '.join([f'*{chr(97 + k)}'] * 9)}]\n"
        for k in range(9))
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"aliases \(\*name\) expand to [0-9,]{13} "
                                          r"values, more than 200,000"):
        definitions.load_text(bomb, "bomb.yaml")
    assert time.monotonic() - started < 5
    # an alias or two, as yaml.dump writes them for a value used twice, are fine
    shared = "pairs: &p [{source: a.t, target: b.t}]"
    definitions.load_text("sources: [{name: s, host: h}]\nchannels:\n- name: c\n  pipelines:\n"
                          "  - {name: p, source: s, target: s, " + shared + "}\n", "ok.yaml")


def test_a_reference_holding_nul_is_said_so() -> None:
    with pytest.raises(ConfigError) as refused:
        definitions.load_text('sources:\n  - {name: a, host: h, password: "file:/x\\0y"}\n',
                              "a.yaml", rules=Confinement())
    assert "holds the character U+0000" in str(refused.value)
