"""node/ddlpairs.py: with ddl_sync, an ALTER that a pair's transforms stand in the way of
pauses rather than run on the target under the source's names: one that reshapes columns
or keys of a target gathering several source tables, one naming a column the pair renames,
leaves out or fills. node/extract/layouts.py: a column_pairs source column gone stops."""

from __future__ import annotations

import pytest

from node.ddlclauses import named_columns
from node.extract.etl import extract_transform
from shared.errors import ConfigError
from tests.unit.test_ddl import SHARDS
from tests.unit.test_ddl_pauses import ddl
from tests.unit.test_etl import compiled

PARTS = ("{source: shop.a, target: copy.wide, key_columns: [id], merge_part: true, "
         "columns: {include: [id, x]}}",
         "{source: shop.b, target: copy.wide, key_columns: [id], merge_part: true, "
         "columns: {include: [id, y]}}")


def replayed(pairs: tuple[str, ...], statement: str) -> list[str]:
    c = compiled(*pairs, options="ddl_sync: true")
    return [t.ddl for t in extract_transform(c, [(4, ddl(statement))])]


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


def test_the_columns_a_clause_names_are_read() -> None:
    found = [(n.verb, n.columns, n.keys) for n in named_columns(
        "ALTER TABLE t ADD COLUMN IF NOT EXISTS x INT AFTER note, DROP COLUMN IF EXISTS `w`, "
        "CHANGE a b INT, RENAME COLUMN c TO d, DROP INDEX i, RENAME INDEX i TO j, "
        "ADD CONSTRAINT ck CHECK (x > 0), ADD UNIQUE KEY uk (q, r), RENAME TO t2, "
        "ALTER INDEX i IGNORED, DROP FOREIGN KEY fk, ADD PARTITION (PARTITION p9)")]
    assert found == [("ADD", ("x",), False), ("DROP", ("w",), False),
                     ("CHANGE", ("a", "b"), False), ("RENAME", ("c", "d"), False),
                     ("KEY", ("q", "r"), True)]


# --- a column_pairs source column gone from the source's table --------------------------------

def test_a_renamed_column_gone_from_the_table_stops_at_its_table_map() -> None:
    """The source dropped name; the pair renamed it to full_name, which was never written
    again (new rows NULL), without a word: include was checked, column_pairs not."""
    problem = compiled(*RENAMES).layout_problem("shop", "people", ("id", "age"))
    assert problem is not None
    assert "renames (column_pairs) column(s) name, which shop.people no longer has" in problem
    assert compiled(*RENAMES).layout_problem("shop", "people", ("id", "name")) is None
