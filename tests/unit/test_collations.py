"""Key collations: what a target key column takes for one value that the source keeps
apart, and the pause before a batch writes such a table (node.target.mysql.collations)."""

from __future__ import annotations

import pytest

from node.changes import Batch, Transaction
from node.extract.decode import TableSchema
from node.extract.etl import CompiledPipeline
from node.extract.job import Planner
from node.target.mysql.collations import loose_collation, looser_than_source
from node.target.mysql.facts import TableFacts
from node.target.mysql.render import Column
from shared.errors import ConfigError
from shared.model import BinlogPosition, PipelineParams
from tests.unit.test_etl import pipeline


@pytest.mark.parametrize(("source", "target", "folded"), [
    ("utf8mb4_bin", "utf8mb4_bin", ""),  # the same: as strict
    ("utf8mb4_general_ci", "utf8mb4_general_ci", ""),
    ("utf8mb4_bin", "utf8mb4_general_ci", "'A'"),  # case
    ("utf8mb4_general_ci", "utf8mb4_unicode_ci", "'ß'"),  # 'ß' and 'ss'
    ("utf8mb4_unicode_ci", "utf8mb4_general_ci", "'ß'"),
    ("utf8mb4_general_ci", "utf8mb4_bin", ""),  # stricter
    ("utf8mb4_general_ci", "binary", ""),
    ("utf8mb4_nopad_bin", "utf8mb4_bin", "trailing"),  # PAD SPACE folds 'a' and 'a '
    ("utf8mb4_general_nopad_ci", "utf8mb4_bin", "trailing"),
    ("utf8mb4_0900_ai_ci", "utf8mb4_bin", "trailing"),  # MySQL 8: NO PAD
    ("utf8mb4_bin", "utf8mb4_nopad_bin", ""),
    ("binary", "utf8mb4_nopad_bin", ""),
    ("binary", "utf8mb4_bin", "trailing"),  # a VARBINARY keeps 'a ' apart
    ("utf8mb3_bin", "utf8mb4_bin", ""),  # every character has its place
    ("utf8mb3_general_ci", "utf8_bin", ""),
    ("utf8mb4_bin", "latin1_bin", "latin1 lacks"),  # the rest are written as '?'
    ("latin1_swedish_ci", "utf8mb4_bin", ""),
])
def test_a_target_key_collation_is_refused_when_it_folds_what_the_source_keeps(
        source: str, target: str, folded: str) -> None:
    why = looser_than_source("varchar", source, "varchar", target)
    assert (folded in why and why) if folded else why == "", why


def test_char_columns_have_no_trailing_spaces_to_keep_apart() -> None:
    assert looser_than_source("char", "utf8mb4_nopad_bin", "varchar", "utf8mb4_bin") == ""
    assert "trailing" in looser_than_source("varchar", "utf8mb4_nopad_bin", "char",
                                            "utf8mb4_nopad_bin")
    assert looser_than_source("varchar", "utf8mb4_bin", "char", "utf8mb4_bin") == ""


def test_the_two_way_check_still_compares_with_exact_values() -> None:
    assert loose_collation("varchar", "binary") == ""
    assert "ABC" in loose_collation("varchar", "utf8mb4_general_ci")
    assert "trailing" in loose_collation("varchar", "utf8mb4_bin")
    assert loose_collation("varchar", "utf8mb4_nopad_bin") == ""
    assert loose_collation("char", "utf8mb4_bin") == ""


class Facts:
    def __init__(self, facts: dict[str, TableFacts]) -> None:
        self.facts, self.asked = facts, 0
        self.dropped: list[tuple[str, str, str]] = []  # read again at the next try

    def of(self, target: tuple[str, str, str], layout: object = None) -> TableFacts:
        self.asked += 1
        return self.facts[target[2]]

    def forget(self) -> None:
        pass

    def drop(self, target: tuple[str, str, str]) -> None:
        self.dropped.append(target)


def text(collation: str) -> Column:
    return Column("varchar", "utf8mb4", column_type="varchar(20)", collation=collation)


def plan(pairs: list[str], facts: dict[str, TableFacts],
         source: dict[str, tuple[str, str | None]]) -> tuple[Planner, Batch, list, list]:
    compiled = CompiledPipeline.compile("c.p", 1, pipeline(*pairs))
    asked: list[tuple[str, str]] = []

    def columns(schema: str, table: str) -> dict[str, tuple[str, str | None]]:
        asked.append((schema, table))
        return source

    planner = Planner(compiled, {1: TableSchema("s", "a", (), ("id",))},
                      Facts(facts), lambda: True, PipelineParams(),  # type: ignore[arg-type]
                      source_columns=columns)
    txn = Transaction((), BinlogPosition("b.1", 9), 1, 1, events=((1, b"x"),), event_rows=1)
    batch = Batch("c.p", 1, [txn])
    return planner, batch, planner.parts(batch, 1), asked


def test_a_batch_into_a_table_whose_key_folds_case_pauses_naming_the_column() -> None:
    """Source key utf8mb4_bin, the target's renamed key column (Login, where the pair
    writes login) utf8mb4_general_ci: 'a' and 'A' would be one row there."""
    facts = {"a": TableFacts({"id": Column("int", None), "Login": text("utf8mb4_general_ci")},
                             (frozenset({"id"}), frozenset({"Login"})))}
    planner, batch, parts, _ = plan(
        ["{source: s.a, target: t.a, column_pairs: [{source: code, target: login}]}"], facts,
        {"id": ("int", None), "code": ("varchar", "utf8mb4_bin")})
    with pytest.raises(ConfigError) as raised:
        planner.spec(batch, parts)
    message = str(raised.value)
    for part in ("pipeline c.p", "target table t.a on dst", "key column Login",
                 "utf8mb4_general_ci", "column code (utf8mb4_bin)",
                 "ALTER TABLE t.a MODIFY Login varchar(20) CHARACTER SET utf8mb4 COLLATE "
                 "utf8mb4_bin", "resume the channel"):
        assert part in message, message


@pytest.mark.parametrize(("pair", "source", "target"), [
    ("{source: s.a, target: t.a}", "utf8mb4_general_ci", "utf8mb4_bin"),  # stricter
    ("{source: s.a, target: t.a}", "utf8mb4_bin", "utf8mb4_bin"),
    # the key is filled by a virtual column, not by the source's code
    ("{source: s.a, target: t.a, virtual_columns: [{name: code, expression: \"'x'\"}]}",
     "utf8mb4_bin", "utf8mb4_general_ci"),
    ("{source: s.a, target: t.a, columns: {exclude: [code]}}",  # not written
     "utf8mb4_bin", "utf8mb4_general_ci"),
])
def test_a_key_the_source_fills_as_strictly_or_not_at_all_goes_on(
        pair: str, source: str, target: str) -> None:
    facts = {"a": TableFacts({"code": text(target), "id": text(target)},
                             (frozenset({"code"}),))}
    planner, batch, parts, asked = plan([pair], facts, {"code": ("varchar", source)})
    spec = planner.spec(batch, parts)
    planner.spec(batch, parts)
    assert set(spec.facts) == {("dst", "t", "a")}
    assert asked == [("s", "a")]  # read once: the next batches cost nothing


def test_a_key_column_a_pair_leaves_out_is_written_all_the_same() -> None:
    facts = {"a": TableFacts({"id": text("utf8mb4_general_ci")}, (frozenset({"id"}),))}
    planner, batch, parts, _ = plan(["{source: s.a, target: t.a, columns: {exclude: [id]}}"],
                                    facts, {"id": ("varchar", "utf8mb4_bin")})
    with pytest.raises(ConfigError, match="key column id"):
        planner.spec(batch, parts)
