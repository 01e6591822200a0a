"""Name patterns: SINGLE, MULTI (numbered, zero padding kept) and WILDCARD (re:...)."""

from __future__ import annotations

import pytest

from shared.errors import ConfigError
from shared.patterns import NamePattern, PatternKind


def parse(text: str) -> NamePattern:
    return NamePattern.parse(text)


@pytest.mark.parametrize(("text", "kind"), [
    ("orders", PatternKind.SINGLE),
    ("Orders$2", PatternKind.SINGLE),
    ("2024", PatternKind.SINGLE),
    ("orders_[0-15]", PatternKind.MULTI),
    ("[1-3]", PatternKind.MULTI),
    ("t_[0-3]_x", PatternKind.MULTI),
    ("re:order_\\d+", PatternKind.WILDCARD),
    ("re:.*", PatternKind.WILDCARD),
])
def test_kind(text: str, kind: PatternKind) -> None:
    pattern = parse(text)
    assert pattern.kind is kind
    assert pattern.text == text == str(pattern)


@pytest.mark.parametrize(("text", "name"), [
    ("my-db", "my-db"), ("topic-name.sanitization-it", "topic-name.sanitization-it"),
    ("my table|x@y", "my table|x@y"), ("naïve", "naïve"), ("表", "表"),
    ("dbz5743中文", "dbz5743中文"), ("back`tick", "back`tick"), ("`back``tick`", "back`tick"),
    ("`t[1]`", "t[1]"), ("`re:x`", "re:x"), ("`select`", "select"), (" lead", " lead")])
def test_any_legal_name_is_a_single_and_backticks_quote_it(text: str, name: str) -> None:
    pattern = parse(text)
    assert (pattern.kind, pattern.literal, pattern.names()) == (PatternKind.SINGLE, name, [name])
    assert pattern.matches(name) and pattern.text == text
    assert parse(text) == pattern  # stored as its text and read back the same


def test_a_numbered_family_may_hold_any_other_character() -> None:
    pattern = parse("order-items.[0-2] x")
    assert pattern.names() == ["order-items.0 x", "order-items.1 x", "order-items.2 x"]


@pytest.mark.parametrize(("text", "name"), [
    ("{table}", "orders"), ("ods_{table}", "ods_orders"), ("{schema}", "shop-1"),
    ("{schema}__{table}", "shop-1__orders"), ("`{table}`", None)])
def test_a_template_makes_a_target_name_from_the_matched_source_name(text: str,
                                                                     name: str | None) -> None:
    pattern = parse(text)
    if name is None:  # in backticks: a literal name holding braces
        assert (pattern.kind, pattern.literal) == (PatternKind.SINGLE, "{table}")
        return
    assert pattern.kind is PatternKind.TEMPLATE and not pattern.matches(name)
    assert pattern.render("shop-1", "orders") == name


def test_a_template_that_makes_an_illegal_name_says_so() -> None:
    with pytest.raises(ConfigError, match="longer than 64 characters"):
        parse("{table}_{table}").render("s", "t" * 40)


def test_multi_parts() -> None:
    pattern = parse("t_[2-5]_x")
    assert (pattern.prefix, pattern.low, pattern.high, pattern.suffix, pattern.width) == (
        "t_", 2, 5, "_x", 0)


def test_zero_padding_is_kept() -> None:
    padded = parse("orders_[00-15]")
    assert padded.width == 2
    assert padded.names() == [f"orders_{i:02d}" for i in range(16)]
    assert padded.names()[0] == "orders_00" and padded.names()[-1] == "orders_15"
    assert padded.index_of("orders_07") == 7
    assert padded.index_of("orders_15") == 15
    assert padded.index_of("orders_7") is None
    assert padded.index_of("orders_007") is None


def test_unpadded_refuses_leading_zeros() -> None:
    plain = parse("orders_[0-15]")
    assert plain.width == 0
    assert plain.names() == [f"orders_{i}" for i in range(16)]
    assert plain.index_of("orders_7") == 7
    assert plain.index_of("orders_0") == 0
    assert plain.index_of("orders_07") is None
    assert plain.index_of("orders_00") is None


def test_a_single_zero_lower_bound_is_not_padding() -> None:
    assert parse("t_[0-9]").width == 0
    assert parse("t_[01-10]").width == 2
    assert parse("t_[01-10]").names() == [f"t_{i:02d}" for i in range(1, 11)]


def test_padded_range_wider_than_its_padding() -> None:
    pattern = parse("t_[00-100]")
    assert pattern.names()[-2:] == ["t_99", "t_100"]
    assert all(pattern.index_of(name) is not None for name in pattern.names())
    assert pattern.index_of("t_100") == 100
    assert pattern.index_of("t_0100") is None


def test_suffix_patterns() -> None:
    pattern = parse("t_[0-3]_x")
    assert pattern.names() == ["t_0_x", "t_1_x", "t_2_x", "t_3_x"]
    assert pattern.index_of("t_2_x") == 2
    assert pattern.index_of("t_2") is None
    assert pattern.index_of("t_2_y") is None
    assert pattern.index_of("t__x") is None
    assert pattern.index_of("t_x") is None
    assert pattern.matches("t_3_x") and not pattern.matches("t_4_x")


@pytest.mark.parametrize("name", ["orders_16", "orders_-1", "orders_", "orders_a", "orders_1a",
                                  "order_1", "xorders_1", "orders_٣", "orders_²", "orders_ 1"])
def test_multi_refuses(name: str) -> None:
    pattern = parse("orders_[0-15]")
    assert pattern.index_of(name) is None
    assert not pattern.matches(name)


def test_index_of_a_range_not_starting_at_zero() -> None:
    pattern = parse("t_[3-5]")
    assert [pattern.index_of(f"t_{i}") for i in range(7)] == [None, None, None, 3, 4, 5, None]
    assert pattern.name_at(4) == "t_4"


def test_single_matches_only_itself() -> None:
    pattern = parse("orders")
    assert pattern.matches("orders")
    assert not pattern.matches("Orders")
    assert not pattern.matches("orders_1")
    assert pattern.index_of("orders") is None
    assert pattern.names() == ["orders"]
    assert pattern.size == 1


def test_wildcard_matches_the_whole_name() -> None:
    pattern = parse("re:audit_\\d{6}")
    assert pattern.matches("audit_202401")
    assert not pattern.matches("audit_2024")
    assert not pattern.matches("audit_2024011")  # fullmatch, not search
    assert not pattern.matches("xaudit_202401")
    assert pattern.index_of("audit_202401") is None
    assert pattern.size is None
    with pytest.raises(ValueError, match="has no finite list of names"):
        pattern.names()


def test_size() -> None:
    assert parse("orders_[0-15]").size == 16
    assert parse("orders_[00-15]").size == 16
    assert parse("t_[7-7]").size == 1
    assert parse("t_[7-7]").names() == ["t_7"]


def test_specificity_order() -> None:
    single, multi, wildcard = parse("orders_1"), parse("orders_[0-3]"), parse("re:orders_.*")
    assert single.specificity > multi.specificity > wildcard.specificity
    ranked = sorted([wildcard, single, multi], key=lambda p: p.specificity, reverse=True)
    assert [p.kind for p in ranked] == [PatternKind.SINGLE, PatternKind.MULTI,
                                        PatternKind.WILDCARD]
    assert all(p.matches("orders_1") for p in ranked)


@pytest.mark.parametrize(("text", "message"), [
    ("orders_[5-1]", "invalid numbered pattern 'orders_[5-1]': range 5-1 is empty"),
    ("orders_[a-b]", "invalid numbered pattern 'orders_[a-b]': write it as "
     "prefix[LOW-HIGH]suffix, e.g. orders_[0-15] or orders_[00-15] for zero padding; a name "
     "that holds [ or ] goes in backticks, e.g. `t[1]`"),
    ("orders_[0-3", "invalid numbered pattern 'orders_[0-3': write it as prefix[LOW-HIGH]suffix, "
     "e.g. orders_[0-15] or orders_[00-15] for zero padding; a name that holds [ or ] goes in "
     "backticks, e.g. `t[1]`"),
    ("t_[0-1]_[0-1]", "invalid numbered pattern 't_[0-1]_[0-1]': write it as "
     "prefix[LOW-HIGH]suffix, e.g. orders_[0-15] or orders_[00-15] for zero padding; a name "
     "that holds [ or ] goes in backticks, e.g. `t[1]`"),
    ("re:(ab", "invalid regular expression '(ab': missing ), unterminated subpattern at "
     "position 0"),
    ("re:", "empty regular expression after 're:'"),
    ("", "expected a table or schema name, got an empty value"),
    ("trail ", "invalid name 'trail ': 'trail ' ends with a space, which no name may do"),
    ("a\x00b", "invalid name 'a\\x00b': 'a\\x00b' holds the character U+0000, which no name "
     "may hold"),
    ("x" * 65, f"invalid name '{'x' * 65}': '{'x' * 65}' is longer than 64 characters"),
    ("😀", "invalid name '😀': '😀' holds a character outside the Unicode BMP, which no name "
     "may hold"),
    ("``", "invalid name '``': a name cannot be empty"),
])
def test_bad_patterns(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(text)
    assert [issue.message for issue in caught.value.issues] == [message]


def test_patterns_are_values() -> None:
    assert parse("orders_[0-3]") == parse("orders_[0-3]")
    assert parse("orders_[0-3]") != parse("orders_[00-03]")
    assert len({parse("a"), parse("a"), parse("b")}) == 2


@pytest.mark.parametrize(("text", "ordinary"), [
    ("re:.*", "shop_1"), ("re:[a-z]+", "shop"), ("shop_[0-3]", "shop_1")])
def test_a_family_or_an_expression_never_takes_a_system_schema(text: str, ordinary: str
                                                                ) -> None:
    pattern = NamePattern.parse(text)
    assert pattern.matches_schema(ordinary)
    for schema in ("mysql", "retl", "sys", "performance_schema", "information_schema"):
        assert not pattern.matches_schema(schema)


def test_a_system_schema_named_is_taken() -> None:
    assert NamePattern.parse("mysql").matches_schema("mysql")
