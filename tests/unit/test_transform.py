"""Processors, virtual columns and the safe expression language, without Spark."""

from __future__ import annotations

import datetime
import re
from decimal import Decimal

import pytest

from node.changes import ChangeType, RowChange
from node.charsets import Encoded
from node.extract import processors
from node.extract.etl import transform
from shared import expr
from shared.errors import ConfigError, TransformError
from tests.unit import applied
from tests.unit.test_etl import compiled, insert


def row_of(pair: str, change: RowChange) -> list[dict | None]:
    return [t.after for t in transform(compiled(pair), 1, change)]


@pytest.mark.parametrize("text, row, value", [
    ("concat_ws(' ', first_name, last_name)", {"first_name": "Ada", "last_name": "Lovelace"},
     "Ada Lovelace"),
    ("concat_ws(' ', first_name, last_name)", {"first_name": "Ada", "last_name": None}, "Ada"),
    ("trim(split_part(address, ',', 1))", {"address": "Paris, 5 rue X"}, "5 rue X"),
    ("split_part(address, ',', 3)", {"address": "a,b"}, None),
    ("regex_group(code, '([A-Z]+)-(\\\\d+)', 2)", {"code": "AB-42"}, "42"),
    ("price * qty if qty > 0 else 0", {"price": Decimal("2.50"), "qty": 4}, Decimal("10.00")),
    ("price * qty", {"price": None, "qty": 4}, None),
    ("'vip' if country in ('FR', 'DE') and not blocked else 'std'",
     {"country": "FR", "blocked": False}, "vip"),
    ("upper(coalesce(nick, name)) + '!'", {"nick": None, "name": "bo"}, "BO!"),
    ("substr(name, 2, 3)", {"name": "abcdef"}, "bcd"),
    ("-a // 2 + a % 3", {"a": 7}, -3),
    ("null", {}, None),
])
def test_expressions_evaluate_over_the_row(text: str, row: dict, value: object) -> None:
    assert expr.evaluate(expr.parse(text), row) == value


@pytest.mark.parametrize("text, message", [
    ("__import__('os')", "unknown function '__import__'"),
    ("__import__('os').system('x')", "attribute is not allowed"),
    ("name.upper()", "attribute is not allowed"),
    ("row['a']", "subscript is not allowed"),
    ("[x for x in a]", "listcomp is not allowed"),
    ("lambda: 1", "lambda is not allowed"),
    ("a ** 2", "operator Pow is not allowed"),
    ("upper(s=a)", "keyword arguments are not allowed"),
    ("a +", "invalid expression 'a +'"),
])
def test_anything_outside_the_language_is_refused(text: str, message: str) -> None:
    with pytest.raises(expr.ExpressionError, match=re.escape(message)):
        expr.parse(text)


@pytest.mark.parametrize("text", [
    "upper(code)", "lower(code)", "trim(code)", "substr(code, 1, 2)", "concat('x', code)",
    "concat_ws('-', code, 'y')", "replace(code, 'a', 'b')", "split_part(code, ',', 0)",
    "regex_group(code, '(a)')", "str(code)",
])
def test_text_functions_refuse_bytes_rather_than_write_their_python_form(text: str) -> None:
    """A BINARY column's, or sjis text read as its bytes: upper(code) wrote "B'AB'"."""
    with pytest.raises(expr.ExpressionError, match="a text function was given bytes"):
        expr.evaluate(expr.parse(text), {"code": b"ab"})


def test_text_kept_as_bytes_stays_text_of_its_charset_or_is_refused() -> None:
    """sjis read as its bytes (Encoded): a + b gave plain bytes, written as bytes, which a
    latin1 target stored as other characters; code == 'JP' was never true (every row
    filtered out)."""
    row = {"a": Encoded(b"\x93\xfa", "sjis"), "b": Encoded(b"\x96\x7b", "sjis"),
           "g": Encoded(b"\xe1", "greek"), "raw": b"JP"}
    joined = expr.evaluate(expr.parse("a + b"), row)
    assert (type(joined), joined, joined.charset) == (Encoded, b"\x93\xfa\x96\x7b", "sjis")
    twice = expr.evaluate(expr.parse("2 * a"), row)
    assert (type(twice), twice.charset) == (Encoded, "sjis")
    for text in ("a + g", "a + raw"):
        with pytest.raises(expr.ExpressionError, match="text in charset sjis"):
            expr.evaluate(expr.parse(text), row)
    for text in ("raw == 'JP'", "'JP' != raw", "a in ('日', 'y')"):
        with pytest.raises(expr.ExpressionError, match="never equal; compare them with bytes"):
            expr.evaluate(expr.parse(text), row)
    with pytest.raises(expr.ExpressionError):  # a string repeated by text: not a count
        expr.evaluate(expr.parse("'x' * a"), row)
    status = {"status": Encoded(b"active", "greek")}  # an ENUM of a greek table, say
    assert expr.evaluate(expr.parse("status == 'active' and status in ('x', 'active')"),
                         status)
    assert expr.evaluate(expr.parse("raw == b'JP' and a in (b'x', b'\\x93\\xfa')"), row)


@pytest.mark.parametrize("value, text", [
    (datetime.timedelta(hours=26), "26:00:00"), (-datetime.timedelta(hours=1), "-01:00:00"),
    (datetime.timedelta(minutes=-1, microseconds=500), "-00:00:59.999500"),
    (datetime.timedelta(hours=838, minutes=59, seconds=59), "838:59:59"),
    (datetime.timedelta(seconds=5, microseconds=120), "00:00:05.000120"),
    (Decimal("0.0000000000"), "0.0000000000"), (Decimal("-1.50"), "-1.50"),
])
def test_a_time_or_a_decimal_is_text_as_mysql_writes_it(value: object, text: str) -> None:
    """str() is Python's: '1 day, 2:00:00' for the TIME 26:00:00, '-1 day, 23:00:00' for
    -01:00:00, '0E-10' for a DECIMAL(20,10)'s zero, written into the target as the value."""
    assert expr.evaluate(expr.parse("str(t)"), {"t": value}) == text
    assert expr.evaluate(expr.parse("concat('t=', t)"), {"t": value}) == "t=" + text


def test_a_time_added_to_a_string_is_its_mysql_text() -> None:
    """'x' + t took Python's str(): 'x-1 day, 23:00:00' for the TIME -01:00:00."""
    row = {"t": -datetime.timedelta(hours=1), "n": Decimal("0E-10")}
    assert expr.evaluate(expr.parse("'x' + t"), row) == "x-01:00:00"
    assert expr.evaluate(expr.parse("t + 'x'"), row) == "-01:00:00x"
    assert expr.evaluate(expr.parse("'n=' + n"), row) == "n=0.0000000000"


TEMPORALS = {"d": datetime.date(2024, 1, 1), "dt": datetime.datetime(2024, 1, 1, 9, 30),
             "t": -datetime.timedelta(hours=1)}


@pytest.mark.parametrize("text, value", [
    ("d == '2024-01-01'", True), ("'2024-01-01' == d", True), ("d != '2024-01-01'", False),
    ("d == '2024-01-02'", False), ("dt == '2024-01-01 09:30:00'", True),
    ("t == '-01:00:00'", True), ("d in ('2023-12-31', '2024-01-01')", True),
    ("d not in ('2023-12-31', '2024-01-01')", False), ("dt in ('2024-01-01 09:30:01',)", False),
])
def test_a_date_time_or_datetime_compared_with_a_string_compares_as_mysql_does(
        text: str, value: bool) -> None:
    """A date object never equals a string: d == '2024-01-01' was False for every row."""
    assert expr.evaluate(expr.parse(text), TEMPORALS) is value


@pytest.mark.parametrize("text", ["d == '2024-1-1'", "dt != '2024-01-01'",
                                  "dt == '2024-01-01T09:30:00'", "t == '-1:00'",
                                  "d in ('20240101',)", "d == 'soon'"])
def test_a_temporal_value_compared_with_a_string_in_another_form_is_refused(
        text: str) -> None:
    with pytest.raises(expr.ExpressionError, match="not written as MySQL writes such a value"):
        expr.evaluate(expr.parse(text), TEMPORALS)


def test_the_length_of_bytes_is_their_count() -> None:
    assert expr.evaluate(expr.parse("length(code)"), {"code": b"\x82\xa0"}) == 2
    assert expr.evaluate(expr.parse("length(code)"), {"code": "あ"}) == 1


def test_virtual_columns_constant_expression_and_processor() -> None:
    pair = ("{source: s.t, target: s2.t, virtual_columns: ["
            "{name: origin, value: shop-eu}, "
            "{name: full_name, expression: \"concat_ws(' ', first, last)\"}, "
            "{name: gross, processor: 'setl_examples:price_with_tax'}]}")
    [after] = row_of(pair, insert("s", "t", {"id": 1, "first": "A", "last": "B",
                                             "price": Decimal("10.00")}))
    assert after == {"id": 1, "first": "A", "last": "B", "price": Decimal("10.00"),
                     "origin": "shop-eu", "full_name": "A B", "gross": Decimal("12.00")}


def test_column_merge_and_split_with_the_sources_excluded() -> None:
    pair = ("{source: s.t, target: s2.t, columns: {exclude: [first, last, addr]}, "
            "virtual_columns: [{name: full_name, expression: \"concat_ws(' ', first, last)\"}, "
            "{name: city, expression: \"trim(split_part(addr, ',', 0))\"}, "
            "{name: street, expression: \"trim(split_part(addr, ',', 1))\"}]}")
    [after] = row_of(pair, insert("s", "t", {"id": 1, "first": "A", "last": "B",
                                             "addr": "Lyon , 3 quai C"}))
    assert after == {"id": 1, "full_name": "A B", "city": "Lyon", "street": "3 quai C"}


def test_a_processor_changes_drops_and_names_its_errors() -> None:
    masked = "{source: s.t, target: s2.t, processor: 'setl_examples:mask_email'}"
    [after] = row_of(masked, insert("s", "t", {"id": 1, "email": "ada@example.org"}))
    assert after["email"].endswith("@example.org") and "ada" not in after["email"]
    skipping = "{source: s.t, target: s2.t, processor: 'setl_examples:skip_test_rows'}"
    assert row_of(skipping, insert("s", "t", {"id": 1, "name": "test_x"})) == []
    assert row_of(skipping, insert("s", "t", {"id": 2, "name": "real"})) == [
        {"id": 2, "name": "real"}]
    failing = "{source: s.t, target: s2.t, processor: 'setl_examples:mask_email'}"
    with pytest.raises(TransformError, match=r"pair src:s.t: processor setl_examples:mask_email "
                                             r"failed on key \(3,\): TypeError"):
        list(transform(compiled(failing), 1, insert("s", "t", {"id": 3, "email": 5})))
    with pytest.raises(TransformError, match="processor setl_examples:nothing: its module "
                                             "has no nothing"):
        row_of("{source: s.t, target: s2.t, processor: 'setl_examples:nothing'}",
               insert("s", "t", {"id": 1}))


def test_a_pipeline_with_a_processor_outside_the_directories_does_not_compile() -> None:
    """The node checks its own rules when a pipeline starts, before any row: a definition
    written straight into ZooKeeper was never checked by a manager."""
    with pytest.raises(ConfigError) as caught:
        compiled("{source: s.t, target: s2.t, processor: 'nowhere:fn'}",
                 "{source: s.u, target: s2.u, virtual_columns: "
                 "[{name: pid, processor: 'os:getpid'}, {name: x, processor: 'm:_f'}]}")
    message = str(caught.value)
    assert message.startswith("pipeline shop.fwd: processor nowhere:fn: module nowhere is "
                              "not in the processor directories of this machine (")
    assert "installed modules cannot be processors. Put the module there; processor " \
           "os:getpid: module os is not in the processor directories" in message
    assert message.endswith("; processor m:_f: a name starting with '_' is private; name a "
                            "public module and function")


def test_a_processor_may_turn_one_change_into_several() -> None:
    change = RowChange("s", "t", ChangeType.DELETE, ("id",), {"id": 4, "name": "x"}, None)
    found = list(transform(compiled("{source: s.t, target: s2.t, processor: "
                                    "'setl_examples:skip_test_rows'}"), 1, change))
    assert [(t.type, t.before_key) for t in found] == [(ChangeType.DELETE, (4,))]


def test_column_groups_send_changed_columns_and_their_whole_group() -> None:
    pair = ("{source: s.t, target: s2.t, column_groups: [[street, city, zip]], "
            "column_pairs: [{source: city, target: town}]}")
    before = {"id": 1, "name": "a", "street": "x", "city": "c", "zip": "1", "note": "n"}
    change = RowChange("s", "t", ChangeType.UPDATE, ("id",), before,
                       {**before, "city": "d", "note": "m"})
    assert row_of(pair, change) == [{"id": 1, "street": "x", "town": "d", "zip": "1",
                                     "note": "m"}]
    only_name = RowChange("s", "t", ChangeType.UPDATE, ("id",), before, {**before, "name": "b"})
    assert row_of(pair, only_name) == [{"id": 1, "name": "b"}]
    inserted = insert("s", "t", before)
    assert row_of(pair, inserted) == [{**{k: v for k, v in before.items() if k != "city"},
                                       "town": "c"}]


def test_a_processor_editing_the_row_in_place_changes_only_its_own_pairs_target() -> None:
    """Every pair of a fan-out gets the change's row objects; a processor that edited them in
    place (the documented style) wrote its mask into the other pair's target too, whichever
    pair came first."""
    plain = "{source: s.t, target: full.t, fan_out: true}"
    masked = "{source: s.t, target: public.t, fan_out: true, processor: " \
             "'setl_examples:mask_email'}"
    for pairs in ((plain, masked), (masked, plain)):
        change = RowChange("s", "t", ChangeType.UPDATE, ("id",),
                           {"id": 1, "email": "ada@x.org"}, {"id": 1, "email": "bo@x.org"})
        found = {t.schema: t for t in transform(compiled(*pairs), 1, change)}
        assert found["full"].after == {"id": 1, "email": "bo@x.org"}
        assert not found["public"].after["email"].startswith("bo@")
        assert change.before == {"id": 1, "email": "ada@x.org"}


def test_a_virtual_column_writing_the_key_finds_the_row_it_wrote() -> None:
    """Two tables merged into one target, one pair's keys moved by a virtual column: an
    update and a delete named the source's key, so they deleted the other table's row of
    that key and left the moved row behind for ever."""
    from tests.unit import applied
    moved = '{source: b.t, target: m.t, virtual_columns: [{name: id, expression: "id + 1000"}]}'
    c = compiled("{source: a.t, target: m.t}", moved)
    target: applied.Table = {}
    for change in (insert("a", "t", {"id": 1, "v": "a1"}), insert("b", "t", {"id": 1, "v": "b1"})):
        target = applied.loaded(target, list(transform(c, 1, change)))
    assert target == {(1,): {"id": 1, "v": "a1"}, (1001,): {"id": 1001, "v": "b1"}}
    update = RowChange("b", "t", ChangeType.UPDATE, ("id",), {"id": 1, "v": "b1"},
                       {"id": 1, "v": "b2"})
    target = applied.loaded(target, list(transform(c, 2, update)))
    assert target == {(1,): {"id": 1, "v": "a1"}, (1001,): {"id": 1001, "v": "b2"}}
    rekeyed = RowChange("b", "t", ChangeType.UPDATE, ("id",), {"id": 1, "v": "b2"},
                        {"id": 2, "v": "b2"})
    target = applied.loaded(target, list(transform(c, 3, rekeyed)))
    assert target == {(1,): {"id": 1, "v": "a1"}, (1002,): {"id": 1002, "v": "b2"}}
    delete = RowChange("b", "t", ChangeType.DELETE, ("id",), {"id": 2, "v": "b2"}, None)
    target = applied.loaded(target, list(transform(c, 4, delete)))
    assert target == {(1,): {"id": 1, "v": "a1"}}


SKIP_TEST_ROWS = "{source: s.people, target: t.people, processor: 'setl_examples:skip_test_rows'}"


def test_the_example_filter_deletes_a_row_an_update_takes_out_and_inserts_one_it_brings_in(
        ) -> None:
    """The shipped ``skip_test_rows`` through the real processor path: the target ends as the
    source's rows outside the filter, whatever updates move rows across it."""
    pipeline = compiled(SKIP_TEST_ROWS)
    bob, test_bob = {"id": 1, "name": "bob"}, {"id": 1, "name": "test_bob"}
    steps = [
        (insert("s", "people", bob), {(1,): bob}),
        (RowChange("s", "people", ChangeType.UPDATE, ("id",), bob, test_bob), {}),
        (RowChange("s", "people", ChangeType.UPDATE, ("id",), test_bob,
                   {**test_bob, "x": 1}), {}),  # stays out
        (RowChange("s", "people", ChangeType.UPDATE, ("id",), test_bob, bob), {(1,): bob}),
        (RowChange("s", "people", ChangeType.UPDATE, ("id",), bob, test_bob), {}),
        (RowChange("s", "people", ChangeType.DELETE, ("id",), test_bob, None), {}),
        (insert("s", "people", test_bob), {}),
    ]
    target: applied.Table = {}
    for seq, (change, expected) in enumerate(steps, 1):
        target = applied.loaded(target, list(transform(pipeline, seq, change)))
        assert target == expected, (seq, change)


def test_a_delete_by_key_alone_computes_only_the_virtual_columns_writing_the_key() -> None:
    """A free-door or repair ``D`` (the key alone as its before image) through a pair whose
    virtual column moves the key beside another expression column: the key is computed, the
    other column is not (it read ``first`` and paused the pipeline on each resume)."""
    c = compiled("{source: a.t, target: m.t}",
                 '{source: b.t, target: m.t, virtual_columns: [{name: id, expression: '
                 '"id + 1000"}, {name: full, expression: "concat_ws(\' \', first, last)"}]}')
    door = RowChange("b", "t", ChangeType.DELETE, ("id",), {"id": 2}, None)
    [change] = transform(c, 1, door)
    assert (change.table, change.type, change.before_key) == ("t", ChangeType.DELETE, (1002,))
    whole = RowChange("b", "t", ChangeType.DELETE, ("id",), {"id": 2, "first": "a",
                                                             "last": "b"}, None)
    assert [c.before_key for c in transform(c, 2, whole)] == [(1002,)]


def test_a_delete_by_key_alone_whose_key_column_reads_more_than_the_key_says_what_to_do(
        ) -> None:
    """A key-writing virtual column that reads a column besides the key cannot be computed
    for a ``D`` by key: the error says so and what to do (not ``unknown column``)."""
    c = compiled('{source: b.t, target: m.t, virtual_columns: [{name: id, expression: '
                 '"concat(region, id)"}]}')
    door = RowChange("b", "t", ChangeType.DELETE, ("id",), {"id": 2}, None)
    with pytest.raises(TransformError, match=r"delete by key alone.*Delete that row on "
                       r"the target by hand"):
        list(transform(c, 1, door))


def test_a_processor_s_key_error_on_a_delete_by_key_alone_says_the_row_held_the_key_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A free-door or verify --repair ``D`` gives a processor the key columns alone: its
    KeyError on another column says so and what to do; a KeyError on a whole row does not."""
    def by_region(change: dict) -> dict:
        for image in (change["before"], change["after"]):
            if image is not None:
                image["id"] = image["id"] * 10 + image["region"]
        return change
    monkeypatch.setattr(processors, "load", lambda name: by_region)
    door = RowChange("b", "t", ChangeType.DELETE, ("id",), {"id": 7}, None)
    with pytest.raises(TransformError) as raised:
        processors.run_processor("keyshift:by_region", door, "pipeline p pair b.t")
    assert str(raised.value).startswith(
        "pipeline p pair b.t: processor keyshift:by_region failed on key (7,): KeyError: "
        "'region'; the row it was given held only the key columns (id), as a delete asked "
        "through the free door"), raised.value
    assert "row.get(...)" in str(raised.value) and "resume the channel" in str(raised.value)
    for whole in (RowChange("b", "t", ChangeType.DELETE, ("id",), {"id": 7, "v": 1}, None),
                  insert("b", "t", {"id": 7, "v": 1})):
        with pytest.raises(TransformError) as raised:
            processors.run_processor("keyshift:by_region", whole, "pipeline p pair b.t")
        assert str(raised.value).endswith("failed on key (7,): KeyError: 'region'")
