"""A pair writing one target column twice, from the source table's columns
(shared/columnclash.py): a virtual column named as a source column in another case (MySQL's
column names ignore case: the server refuses the row, "Column 'Total' specified twice"), or
a rename onto another column's name. Refused at apply and when a pipeline starts."""

from __future__ import annotations

import pytest

from shared.columnclash import clash_problems, written
from shared.errors import ConfigError
from tests.unit.etl_helpers import pipeline

COLUMNS = {("shop", "orders"): ("id", "Total", "note"), ("shop", "other"): ("id", "x")}
KEYS = {("shop", "orders"): ("id",), ("shop", "other"): ("id",)}


def pair(options: str) -> str:
    return "{source: shop.orders, target: dw.orders, " + options + "}"


def test_a_virtual_column_named_as_a_source_column_in_another_case_is_refused() -> None:
    found = pipeline(pair('virtual_columns: [{name: total, expression: "Total * 2"}]'))
    [problem] = clash_problems(found, COLUMNS, KEYS)
    assert problem.startswith(f"pipeline {found.name} pair src:shop.orders → ")
    assert "virtual column total and column Total of shop.orders are one column name in " \
        "another case" in problem
    assert "error 1110, Column '…' specified twice" in problem
    assert "Rename the virtual column (or name it Total, exactly as the row has it, to " \
        "write over that value), or leave Total out (columns: exclude) or rename it " \
        "(column_pairs)" in problem
    key = pipeline(pair('virtual_columns: [{name: ID, expression: "id + 1000"}]'))
    assert "virtual column ID and column id of shop.orders" in clash_problems(
        key, COLUMNS, KEYS)[0]


@pytest.mark.parametrize("options", [
    'virtual_columns: [{name: Total, expression: "Total * 2"}]',  # writes over its value
    'virtual_columns: [{name: id, expression: "id + 1000"}]',
    'virtual_columns: [{name: total, value: "1"}], columns: {exclude: [TOTAL]}',
    'virtual_columns: [{name: total, value: "1"}], columns: {include: [id, note]}',
    'virtual_columns: [{name: total, value: "1"}], column_pairs: [{source: Total, '
    'target: gross}]',
    'virtual_columns: [{name: total, value: "1"}], column_pairs: [{source: Total, '
    'target: total}]',  # (renamed to the virtual column's name: written over)
    'virtual_columns: [{name: total, value: "1"}], processor: "m:f"',  # (its own columns)
])
def test_a_virtual_column_the_row_does_not_carry_twice_is_fine(options: str) -> None:
    assert clash_problems(pipeline(pair(options)), COLUMNS, KEYS) == []


def test_a_rename_onto_another_columns_name_in_any_case_is_refused() -> None:
    for target in ("total", "Total"):
        found = pipeline(pair(f"column_pairs: [{{source: note, target: {target}}}]"))
        [problem] = clash_problems(found, COLUMNS, KEYS)
        assert f"writes columns Total and note (as {target}) of shop.orders to one target " \
            "column" in problem
        assert "rename one of them to another name in column_pairs, or leave one out" in problem
    apart = pipeline(pair("column_pairs: [{source: note, target: total}], "
                          "columns: {exclude: [total]}"))
    assert clash_problems(apart, COLUMNS, KEYS) == []


def test_the_virtual_column_meets_a_renamed_column() -> None:
    found = pipeline(pair('column_pairs: [{source: note, target: Memo}], '
                          'virtual_columns: [{name: memo, value: "x"}]'))
    [problem] = clash_problems(found, COLUMNS, KEYS)
    assert "virtual column memo and column note (renamed Memo) of shop.orders" in problem
    assert "or name it Memo, exactly as the row has it" in problem


def test_the_columns_a_pair_writes_as_the_node_maps_a_row() -> None:
    """An include names columns exactly, an exclude in any case; the key always goes."""
    include = pipeline(pair("columns: {include: [note, total]}")).pairs[0]
    assert written(include, ("id", "Total", "note"), ("id",)) == [("id", "id"),
                                                                   ("note", "note")]
    exclude = pipeline(pair("columns: {exclude: [NOTE, id]}")).pairs[0]
    assert written(exclude, ("id", "Total", "note"), ("id",)) == [("id", "id"),
                                                                   ("Total", "Total")]


def test_two_virtual_columns_of_one_name_in_any_case_are_refused_when_read() -> None:
    with pytest.raises(ConfigError, match="two virtual columns fill one target column"):
        pipeline(pair('virtual_columns: [{name: Gross, value: "1"}, {name: gross, '
                      'value: "2"}]'))
