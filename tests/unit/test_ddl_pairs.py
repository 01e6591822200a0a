"""node/ddlpairs.py: with ddl_sync, an ALTER that a pair's transforms stand in the way of
pauses rather than run on the target under the source's names: one that reshapes columns
or keys of a target gathering several source tables, one naming a column the pair renames,
leaves out or fills. node/extract/layouts.py: a column_pairs source column gone stops."""

from __future__ import annotations

from typing import Any

import pytest

from node.changes import ChangeType, RowChange
from node.ddlclauses import named_columns
from node.ddltypes import old_type
from node.extract.etl import extract_transform
from shared.errors import ConfigError
from tests.unit.test_ddl import SHARDS
from tests.unit.test_ddl_pauses import ddl
from tests.unit.test_etl import compiled

PARTS = ("{source: shop.a, target: copy.wide, key_columns: [id], merge_part: true, "
         "columns: {include: [id, x]}}",
         "{source: shop.b, target: copy.wide, key_columns: [id], merge_part: true, "
         "columns: {include: [id, y]}}")


LAX, STRICT = 0, 1 << 21  # sql_mode '' and STRICT_TRANS_TABLES as the query event has them


def replayed(pairs: tuple[str, ...], statement: str, session: tuple[Any, ...] | None = None,
             table_keys: dict[tuple[str, str], tuple[str, ...]] | None = None) -> list[str]:
    c = compiled(*pairs, options="ddl_sync: true")
    if table_keys:
        object.__setattr__(c, "table_keys", table_keys)
    change = ddl(statement) if session is None else \
        RowChange("shop", "", ChangeType.DDL, ddl=statement, session=session)
    return [t.ddl for t in extract_transform(c, [(4, change)])]


# --- a target gathering several source tables ---------------------------------------------

@pytest.mark.parametrize("table", ["orders_1", "a"])
@pytest.mark.parametrize("clause", [
    "DROP COLUMN legacy", "DROP legacy", "MODIFY price DECIMAL(10,1)",
    "CHANGE price cost DECIMAL(10,2)", "RENAME COLUMN price TO cost", "DROP PRIMARY KEY",
    "ADD PRIMARY KEY (id, code)", "ADD CONSTRAINT uk UNIQUE (code)",
    "ADD COLUMN c INT UNIQUE", "CONVERT TO CHARACTER SET latin1",
    "ADD COLUMN n INT, DROP COLUMN legacy"])
def test_an_alter_reshaping_a_gathered_targets_columns_or_keys_pauses(table: str,
                                                                      clause: str) -> None:
    """Replayed on the shared table, ALTER TABLE orders_1 DROP COLUMN legacy dropped every
    shard's legacy values, a rounding MODIFY rounded theirs, without a word."""
    statement = f"ALTER TABLE {table} {clause}"
    with pytest.raises(ConfigError, match="also takes rows of other source tables") as caught:
        replayed(SHARDS, statement)
    message = str(caught.value)
    target = "`copy`.`orders_all`" if table == "orders_1" else "`copy`.`ab`"
    assert target in message and f"`shop`.`{table}`" in message
    assert "pipeline shop.fwd" in message and statement in message
    assert "setl position set shop/fwd" in message and "by hand once every source" in message


NOTE = (("note", *old_type(15)), ("price", *old_type(246, 10, 2)))  # VARCHAR, DECIMAL(10,2)
INT_X = (("x", *old_type(3)),)  # INT


@pytest.mark.parametrize("statement, session", [
    ("ALTER TABLE orders_1 MODIFY note VARCHAR(500)", (("sql_mode", STRICT),)),
    ("ALTER TABLE orders_1 MODIFY note VARCHAR(5)", (("sql_mode", STRICT),)),
    ("ALTER TABLE orders_1 CHANGE note note VARCHAR(500) NOT NULL", (("sql_mode", STRICT),)),
    ("ALTER TABLE orders_1 CHANGE COLUMN note NOTE TEXT", (("sql_mode", STRICT),)),
    ("ALTER TABLE orders_1 MODIFY price DECIMAL(14,2)",
     (("sql_mode", STRICT), ("columns", NOTE))),
    ("ALTER TABLE a MODIFY x BIGINT", (("sql_mode", STRICT), ("columns", INT_X))),
])
def test_a_modify_that_rewrites_no_value_on_a_gathered_target_is_replayed(
        statement: str, session: tuple[Any, ...]) -> None:
    """A widening MODIFY of one of 64 shards paused, and the operator skipped 64 statements:
    in a strict session it changes no other shard's values (a narrowing that does not fit
    them fails on the target, loudly); a DECIMAL made wider rounds nothing."""
    [found] = replayed(SHARDS, statement, session)
    assert "`copy`.`orders_all`" in found or "`copy`.`ab`" in found


@pytest.mark.parametrize("statement, session", [
    ("ALTER TABLE orders_1 MODIFY note VARCHAR(5)", (("sql_mode", LAX),)),  # cuts
    ("ALTER IGNORE TABLE orders_1 MODIFY note VARCHAR(5)", (("sql_mode", STRICT),)),
    ("ALTER TABLE orders_1 MODIFY note VARCHAR(500)", None),  # its session not known
    ("ALTER TABLE orders_1 MODIFY price DECIMAL(14,2)", (("sql_mode", STRICT),)),  # old?
    # the type before not known (after a restart): a DOUBLE made BIGINT rounds 1.655 to 2
    ("ALTER TABLE a MODIFY x BIGINT", (("sql_mode", STRICT),)),
    ("ALTER TABLE orders_1 MODIFY price DECIMAL(10,1)",
     (("sql_mode", STRICT), ("columns", NOTE))),  # rounds
    ("ALTER TABLE orders_1 CHANGE note remark VARCHAR(500)", (("sql_mode", STRICT),)),
    ("ALTER TABLE orders_1 RENAME COLUMN note TO remark", (("sql_mode", STRICT),)),
    ("ALTER TABLE orders_1 MODIFY code INT UNIQUE", (("sql_mode", STRICT),)),
    ("ALTER TABLE orders_1 DROP COLUMN note", (("sql_mode", STRICT),)),
])
def test_a_modify_that_may_rewrite_values_on_a_gathered_target_still_pauses(
        statement: str, session: tuple[Any, ...] | None) -> None:
    with pytest.raises(ConfigError, match="also takes rows of other source tables"):
        replayed(SHARDS, statement, session)


def test_a_unique_index_created_on_a_gathered_target_pauses() -> None:
    with pytest.raises(ConfigError, match="also takes rows of other source tables"):
        replayed(SHARDS, "CREATE UNIQUE INDEX uk ON orders_2 (code)")


def test_merge_parts_gather_their_target_too() -> None:
    with pytest.raises(ConfigError, match=r"`copy`\.`wide` also takes rows"):
        replayed(PARTS, "ALTER TABLE a MODIFY x DECIMAL(10,1)")


@pytest.mark.parametrize("statement", [
    "ALTER TABLE orders_1 ADD COLUMN note TEXT", "ALTER TABLE orders_1 ADD INDEX ix (code)",
    "CREATE INDEX ix ON orders_1 (code)", "ALTER TABLE orders_1 DROP INDEX ix",
    "ALTER TABLE orders_1 ALTER COLUMN code SET DEFAULT 0", "ALTER TABLE orders_1 COMMENT 'x'"])
def test_an_alter_adding_to_a_gathered_target_is_replayed(statement: str) -> None:
    """The other shards' ADD of the same column then find it there (taken as applied when
    alike, node.target.mysql.ddlapply)."""
    [found] = replayed(SHARDS, statement)
    assert "`copy`.`orders_all`" in found


def test_the_same_alter_on_a_table_of_its_own_is_replayed() -> None:
    assert replayed(SHARDS, "ALTER TABLE log_x DROP COLUMN legacy, MODIFY p DECIMAL(9,1)") \
        == ["ALTER TABLE `copy`.`log_x` DROP COLUMN legacy, MODIFY p DECIMAL(9,1)"]


def test_without_ddl_sync_nothing_is_replayed_so_nothing_pauses() -> None:
    c = compiled(*SHARDS)
    assert list(extract_transform(c, [(4, ddl("ALTER TABLE orders_1 DROP COLUMN x"))])) == []


# --- a column the pair renames, leaves out or fills ------------------------------------------

RENAMES = ("{source: shop.people, target: copy.people, "
           "column_pairs: [{source: name, target: full_name}]}",)
EXCLUDES = ("{source: shop.notes, target: copy.notes, columns: {exclude: [note]}}",)
INCLUDES = ("{source: shop.items, target: copy.items, columns: {include: [id, price]}}",)
VIRTUAL = ('{source: shop.prices, target: copy.prices, virtual_columns: '
           '[{name: origin, value: "eu"}]}',)


@pytest.mark.parametrize("pairs, statement, column, why", [
    (RENAMES, "ALTER TABLE people DROP COLUMN name", "name", "renames it to full_name"),
    (RENAMES, "ALTER TABLE people MODIFY `NAME` VARCHAR(5)", "NAME", "renames it to full_name"),
    (RENAMES, "ALTER TABLE people RENAME COLUMN name TO given", "name", "column_pairs"),
    (RENAMES, "ALTER TABLE people ADD full_name TEXT", "full_name",
     "writes source column name under that name"),
    (EXCLUDES, "ALTER TABLE notes DROP COLUMN note", "note", "columns: exclude"),
    (EXCLUDES, "ALTER TABLE notes MODIFY note VARCHAR(3)", "note", "columns: exclude"),
    (INCLUDES, "ALTER TABLE items ADD COLUMN colour TEXT", "colour", "columns: include"),
    (INCLUDES, "ALTER TABLE items ADD INDEX ix (price), DROP note", "note",
     "columns: include"),
    (VIRTUAL, "ALTER TABLE prices ADD origin TEXT", "origin", "virtual_columns"),
    (VIRTUAL, "CREATE INDEX io ON prices (origin)", "origin", "virtual_columns"),
])
def test_with_ddl_sync_a_clause_naming_a_column_the_pair_maps_pauses(
        pairs: tuple[str, ...], statement: str, column: str, why: str) -> None:
    """Column names were never mapped: a DROP of an excluded note dropped the target's own
    note; a DROP of a renamed name failed on the target as 'already applied' (1091) and
    full_name was never written again; an ADD under an include list made a column never
    written."""
    with pytest.raises(ConfigError, match="ddl_sync does not map column names") as caught:
        replayed(pairs, statement)
    message = str(caught.value)
    assert f"names column {column} of `shop`." in message and why in message
    assert statement in message and "setl position set shop/fwd" in message


@pytest.mark.parametrize("pairs, statement", [
    (RENAMES, "ALTER TABLE people ADD COLUMN age INT, MODIFY id BIGINT"),
    (EXCLUDES, "ALTER TABLE notes DROP COLUMN other"),
    (INCLUDES, "ALTER TABLE items MODIFY price DECIMAL(12,2), ADD INDEX ix (price)"),
    (VIRTUAL, "ALTER TABLE prices ADD COLUMN amount INT, ENGINE=InnoDB"),
])
def test_with_ddl_sync_a_clause_naming_other_columns_is_replayed(
        pairs: tuple[str, ...], statement: str) -> None:
    [found] = replayed(pairs, statement)
    assert found.startswith("ALTER TABLE `copy`.")


KEYED = ("{source: shop.items, target: copy.items, key_columns: [id], "
         "columns: {include: [name, price]}}",)
KEYLESS_INCLUDE = ("{source: shop.items, target: copy.items, columns: {include: [name]}}",)


@pytest.mark.parametrize("pairs, statement", [
    (KEYED, "ALTER TABLE items MODIFY id BIGINT UNSIGNED"),
    (KEYED, "ALTER TABLE items ADD INDEX ix (id, price)"),
    (KEYED, "ALTER TABLE items MODIFY `ID` BIGINT UNSIGNED"),
    (KEYLESS_INCLUDE, "ALTER TABLE items ADD INDEX ix (code, name)"),
])
def test_a_key_column_left_out_of_the_columns_list_goes_through_so_is_replayed(
        pairs: tuple[str, ...], statement: str) -> None:
    """map_row keeps a table's key columns whatever include says: a MODIFY of the pair's
    key_columns id (or of the key read for a table without a primary key) acts on a column
    the target has and setl writes."""
    [found] = replayed(pairs, statement, table_keys={("shop", "items"): ("code",)})
    assert found.startswith("ALTER TABLE `copy`.`items`")


def test_a_key_column_that_an_exclude_list_names_goes_through_so_is_replayed() -> None:
    pairs = ("{source: shop.notes, target: copy.notes, columns: {exclude: [Code, note]}}",)
    keys = {("shop", "notes"): ("code",)}
    [found] = replayed(pairs, "ALTER TABLE notes MODIFY code BIGINT", table_keys=keys)
    assert found.startswith("ALTER TABLE `copy`.`notes`")
    with pytest.raises(ConfigError, match="columns: exclude"):
        replayed(pairs, "ALTER TABLE notes MODIFY NOTE TEXT", table_keys=keys)


@pytest.mark.parametrize("statement", [
    "ALTER TABLE items ADD INDEX ix ((lower(colour)))",
    "ALTER TABLE items ADD INDEX ix (price, (price * 2))",
    "CREATE INDEX ix ON items ((lower(colour)))"])
def test_an_expression_part_of_a_functional_index_names_no_column(statement: str) -> None:
    """ADD INDEX ((lower(name))) paused under an include list with "names column (": the
    part's first token was taken for a column's name."""
    [found] = replayed(INCLUDES, statement)
    assert "`copy`.`items`" in found


def test_a_functional_part_still_makes_a_unique_key_on_a_gathered_target() -> None:
    with pytest.raises(ConfigError, match="also takes rows of other source tables"):
        replayed(SHARDS, "ALTER TABLE orders_1 ADD UNIQUE INDEX uk ((lower(code)))")


@pytest.mark.parametrize("pairs, statement", [
    (("{source: shop.people, target: copy.people, "
      "column_pairs: [{source: Email, target: email}]}",),
     "ALTER TABLE people MODIFY email VARCHAR(300)"),
    (("{source: shop.people, target: copy.people, "
      "column_pairs: [{source: Email, target: email}]}",),
     "ALTER TABLE people ADD COLUMN EMAIL2 TEXT"),
    (("{source: shop.items, target: copy.items, columns: {include: [ID, Price]}}",),
     "ALTER TABLE items MODIFY price DECIMAL(12,2), ADD INDEX ix (id, PRICE)"),
])
def test_names_that_differ_only_in_case_are_one_column(pairs: tuple[str, ...],
                                                      statement: str) -> None:
    """Email → email is no rename for MySQL: it paused every DDL naming the column."""
    [found] = replayed(pairs, statement)
    assert found.startswith("ALTER TABLE `copy`.")


def test_the_columns_a_clause_names_are_read() -> None:
    found = [(n.verb, n.columns, n.keys) for n in named_columns(
        "ALTER TABLE t ADD COLUMN IF NOT EXISTS x INT AFTER note, DROP COLUMN IF EXISTS `w`, "
        "CHANGE a b INT, RENAME COLUMN c TO d, DROP INDEX i, RENAME INDEX i TO j, "
        "ADD CONSTRAINT ck CHECK (x > 0), ADD UNIQUE KEY uk (q, r), RENAME TO t2, "
        "ALTER INDEX i IGNORED, DROP FOREIGN KEY fk, ADD PARTITION (PARTITION p9)")]
    assert found == [("ADD", ("x",), False), ("DROP", ("w",), False),
                     ("CHANGE", ("a", "b"), False), ("RENAME", ("c", "d"), False),
                     ("KEY", ("q", "r"), True)]
    assert [(n.verb, n.columns) for n in named_columns(
        "ALTER TABLE t ADD INDEX i ((lower(name)), code(10), (a + b) DESC)")] == \
        [("KEY", ("code",))]


# --- a column_pairs source column gone from the source's table --------------------------------

def test_a_renamed_column_gone_from_the_table_stops_at_its_table_map() -> None:
    """The source dropped name; the pair renamed it to full_name, which was never written
    again (new rows NULL), without a word: include was checked, column_pairs not."""
    problem = compiled(*RENAMES).layout_problem("shop", "people", ("id", "age"))
    assert problem is not None
    assert "renames (column_pairs) column(s) name, which shop.people no longer has" in problem
    assert compiled(*RENAMES).layout_problem("shop", "people", ("id", "name")) is None


PATTERNED = ("{source: {namespace: shop, table: 're:.*'}, target: {namespace: copy, "
             "table: '{table}'}, column_pairs: [{source: name, target: full_name}]}",)
PATTERNED_INCLUDE = ("{source: {namespace: shop, table: 're:.*'}, target: {namespace: copy, "
                     "table: '{table}'}, columns: {include: [id, name]}}",)


@pytest.mark.parametrize("pairs", [PATTERNED, PATTERNED_INCLUDE])
def test_a_pattern_pairs_column_stops_only_where_the_table_had_it(
        pairs: tuple[str, ...]) -> None:
    """shop.* renames name: a table of shop that never had a name column (tags) stopped at
    its first table map; only a table that had it and lost it (people) stops."""
    c = compiled(*pairs)
    assert c.layout_problem("shop", "tags", ("id", "label")) is None
    assert c.layout_problem("shop", "tags", ("id", "label", "colour")) is None
    assert c.layout_problem("shop", "people", ("id", "name")) is None
    problem = c.layout_problem("shop", "people", ("id", "age"))
    assert problem is not None and "column(s) name, which shop.people no longer has" in problem
    assert c.layout_problem("shop", "people", ("id", "age")) is not None  # until fixed


def test_a_pair_naming_its_table_stops_at_its_first_layout_without_the_column() -> None:
    c = compiled("{source: shop.people, target: copy.people, columns: {include: [id, name]}}")
    assert c.layout_problem("shop", "people", ("id", "age")) is not None
