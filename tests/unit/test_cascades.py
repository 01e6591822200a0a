"""A parent's ON DELETE / ON UPDATE actions written by Load itself after its checked deletes
and key changes (node.target.mysql.cascades): whether or not the target holds the parent."""

from __future__ import annotations

from typing import Any

from node.changes import ChangeType, TargetChange
from node.jobs import ROW_BITS, JobSpec
from node.merge import DELETE, MOVE, UPSERT, TableWrites
from node.target.mysql.cascades import Child, read_children
from node.target.mysql.facts import TableFacts
from node.target.mysql.render import statements
from node.target.mysql.units import render

CASCADE = Child("s", "child", ("p",), ("id",), "CASCADE", "CASCADE", "fk1")
NULLED = Child("s", "kid", ("a", "b"), ("ID", "code"), "SET NULL", "SET NULL", "fk")
# each action runs while the target still has its foreign key with that action
HELD = (" AND EXISTS (SELECT 1 FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE "
        "CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s AND CONSTRAINT_NAME = %s AND {} = %s)")
KEPT = Child("s", "held", ("p",), ("id",), "RESTRICT", "NO ACTION")
ELSEWHERE = Child("s", "other", ("x",), ("name",), "CASCADE", "CASCADE")  # not a key column


def writes(keys: tuple[str, ...], steps: list[Any]) -> TableWrites:
    return TableWrites("t", "s", "parent", keys, 0, 0, steps=steps)


def rendered(keys: tuple[str, ...], steps: list[Any], *children: Child) -> list[Any]:
    return [(s.sql, s.args, s.continues) for s in statements(writes(keys, steps), 100,
                                                              children=children)]


def test_a_delete_is_followed_by_its_childrens_actions_a_statement_per_child() -> None:
    found = rendered(("id",), [(DELETE, (1,)), (DELETE, (2,)), (UPSERT, {"id": 1})],
                     CASCADE, KEPT, ELSEWHERE)
    assert found == [
        ("DELETE FROM `s`.`parent` WHERE (`id`) IN ((%s), (%s))", [1, 2], False),
        ("DELETE FROM `s`.`child` WHERE (`p` IN (%s, %s))" + HELD.format("DELETE_RULE"),
         [1, 2, "s", "child", "fk1", "CASCADE"], True),
        # then the row born again: after the action, as on the source
        ("INSERT INTO `s`.`parent` (`id`) VALUES (%s) ON DUPLICATE KEY UPDATE `id` = "
         "VALUES(`id`)", [[1]], False)]


def test_a_multi_column_set_null_matches_each_key_and_never_a_null() -> None:
    found = rendered(("id", "code"), [(DELETE, (1, "a")), (DELETE, (2, None))], NULLED)
    assert found[1:] == [
        ("UPDATE `s`.`kid` SET `a` = NULL, `b` = NULL WHERE ((`a` = %s AND `b` = %s))"
         + HELD.format("DELETE_RULE"), [1, "a", "s", "kid", "fk", "SET NULL"], True)]


def test_a_key_change_moves_or_clears_the_children_after_the_rows_upsert() -> None:
    found = rendered(("id", "code"), [(MOVE, ((1, "a"), {"id": 5, "code": "a"}))],
                     Child("s", "child", ("p",), ("id",), "RESTRICT", "CASCADE", "c"), NULLED)
    assert [sql.split(" WHERE")[0] for sql, _, _ in found] == [
        "UPDATE `s`.`parent` SET `id` = %s, `code` = %s",
        "INSERT INTO `s`.`parent` (`id`, `code`) VALUES (%s, %s) ON DUPLICATE KEY UPDATE "
        "`id` = VALUES(`id`)",
        "UPDATE `s`.`child` SET `p` = %s", "UPDATE `s`.`kid` SET `a` = NULL, `b` = NULL"]
    assert found[2][1:] == ([5, 1, "s", "child", "c", "CASCADE"], True)
    assert found[3][1:] == ([1, "a", "s", "kid", "fk", "SET NULL"], True)
    assert found[2][0].endswith(HELD.format("UPDATE_RULE"))
    # a key change that leaves the referenced columns as they were: nothing to do
    same = rendered(("id", "code"), [(MOVE, ((1, "a"), {"id": 1, "code": "b"}))],
                    Child("s", "child", ("p",), ("id",), "RESTRICT", "CASCADE"))
    assert len(same) == 2


def test_a_run_the_source_wrote_with_checks_off_gets_no_actions() -> None:
    facts = {("t", "s", "parent"): TableFacts(foreign_keys=True, referenced=(
        frozenset({"id"}),), children=(CASCADE,))}
    changes = [TargetChange("t", "s", "parent", ChangeType.DELETE, ("id",), (1,), None, seq=0),
               TargetChange("t", "s", "parent", ChangeType.DELETE, ("id",), (2,), None,
                            seq=1 << ROW_BITS)]
    units = render(changes, JobSpec(0, False, facts, unchecked=frozenset({1})))
    assert [(u.unchecked, [s.text for s in u.sqls]) for u in units] == [
        (False, ["DELETE FROM `s`.`parent` WHERE (`id`) IN ((1))",
                 "DELETE FROM `s`.`child` WHERE (`p` IN (1))" + HELD.replace(
                     "%s", "{!r}").format("s", "child", "fk1", "DELETE_RULE", "CASCADE")]),
        (True, ["DELETE FROM `s`.`parent` WHERE (`id`) IN ((2))"])]
    assert [s.rows for s in units[0].sqls] == [1, 0]  # the action counts no row


class Answers:
    def execute(self, sql: str, args: Any = None) -> None:
        assert "REFERENTIAL_CONSTRAINTS" in sql and args == ("s", "parent")

    def fetchall(self) -> list[Any]:
        return [("s", "kid", "fk", "a", "ID", "SET NULL", "SET NULL"),
                ("s", "kid", "fk", "b", "code", "SET NULL", "SET NULL"),
                ("s", "child", "fk1", "p", "id", "CASCADE", "CASCADE")]


def test_the_children_are_read_a_foreign_key_at_a_time_in_column_order() -> None:
    assert read_children(Answers(), "s", "parent") == (NULLED, CASCADE)
