"""Names as MySQL/MariaDB allow them: one quoting function, the ``schema.table`` short form
with backticks, and pairs naming any legal table."""

from __future__ import annotations

import pytest

from shared import identifiers
from shared.errors import ConfigError
from shared.patterns import PatternKind
from tests.unit.yaml_cases import load, pairs


@pytest.mark.parametrize(("name", "quoted"), [
    ("orders", "`orders`"), ("back`tick", "`back``tick`"), ("``", "``````"), ("表", "`表`")])
def test_quote_doubles_backticks(name: str, quoted: str) -> None:
    assert identifiers.quote(name) == quoted
    assert identifiers.unquote(quoted) == name


@pytest.mark.parametrize(("text", "parts"), [
    ("shop.orders", ("shop", "orders")),
    ("`my-db`.`t.1`", ("`my-db`", "`t.1`")),
    ("shop.`order items`", ("shop", "`order items`")),
    ("`a``.b`.c", ("`a``.b`", "c")),
    ("my-db.表", ("my-db", "表")),
])
def test_short_form_splits_at_the_one_dot_outside_backticks(text: str,
                                                            parts: tuple[str, str]) -> None:
    assert identifiers.split_qualified(text) == parts


@pytest.mark.parametrize("text", ["orders", "a.b.c", "`a.b", ".t", "s.", "`a`.`b`.`c`"])
def test_a_short_form_without_exactly_one_dot_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match=r"expected schema\.table"):
        identifiers.split_qualified(text)


@pytest.mark.parametrize(("schema", "table"), [
    ("shop", "orders"), ("my-db", "t.1"), ("tick`db", "t[1]"), ("re:x", "表")])
def test_short_form_reads_back_what_it_writes(schema: str, table: str) -> None:
    written = identifiers.short_form(schema, table)
    assert tuple(map(identifiers.unquote, identifiers.split_qualified(written))) == (
        schema, table)


def test_pairs_name_any_legal_table_in_both_forms() -> None:
    loaded = load(pairs("""\
        - {source: '`my-db`.`t.1`', target: '`copy db`.`t.1`'}
        - {source: {namespace: topic-name.sanitization-it, table: 'a|b@c'}, target: x.y}
        - {source: 'dbz5743中文.`t[1]`', target: 'naïve.`re:t`'}
        """))
    (pipeline,) = loaded.channels[0].pipelines
    names = [(p.source.namespace.literal, p.source.table.literal, p.target.namespace.literal,
              p.target.table.literal) for p in pipeline.pairs]
    assert names == [("my-db", "t.1", "copy db", "t.1"),
                     ("topic-name.sanitization-it", "a|b@c", "x", "y"),
                     ("dbz5743中文", "t[1]", "naïve", "re:t")]
    assert all(p.source.table.kind is PatternKind.SINGLE for p in pipeline.pairs)
