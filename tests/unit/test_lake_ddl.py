"""An ADD COLUMN that gives a mirrored lake table's rows a value (a DEFAULT, NOT NULL) stops
the pipeline: the rows the lake holds would read NULL there, the source's the value. On a
change log, a table with no rows yet, or with a NULL default, it is taken."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from node.changes import Batch, ChangeType, TargetChange, Transaction
from node.jobs import ROW_BITS, PartResult
from node.target.delta import units
from node.target.delta.ddl import filled_column
from shared.errors import LoadError
from shared.model import BinlogPosition
from tests.unit.test_lake import INS, LOG, MIRROR, SPEC, batch, change, loader


def alter(table: str, statement: str) -> tuple[Batch, list[TargetChange]]:
    found = Batch("c.p", 4)
    found.add(Transaction((), BinlogPosition("bin.000001", 900), 0, 0))
    return found, [TargetChange("lake", "s", table, ChangeType.DDL, (), None, None,
                                ddl=statement)]


def written(location: Path):
    writer = loader(location, epoch=1)
    done = units.render([change(MIRROR, INS, 0, {"id": 1, "v": "a"}),
                         change(LOG, INS, 3 << ROW_BITS, {"id": 1, "v": "a"})], SPEC)
    writer.load_units(batch(1, 100), [PartResult(done, [], 2)])
    return writer


def test_a_column_added_with_a_default_to_a_mirror_stops_saying_what_to_do(
        tmp_path: Path) -> None:
    writer = written(tmp_path)
    with pytest.raises(LoadError) as stopped:
        writer.load(*alter("m", "ALTER TABLE s.m ADD COLUMN n INT NOT NULL DEFAULT 0"))
    message = str(stopped.value)
    assert message.startswith("pipeline c.p processId 4, position bin.000001:900: the source "
                              "ran 'ALTER TABLE s.m ADD COLUMN n INT NOT NULL DEFAULT 0' on "
                              "s.m: column n is added with DEFAULT 0")
    assert "setl position set c/p" in message and "setl snapshot c --table" in message
    with pytest.raises(LoadError, match="column n is added with NOT NULL"):
        writer.load(*alter("m", "ALTER TABLE s.m ADD n INT NOT NULL"))


@pytest.mark.parametrize(("table", "statement"), [
    ("m", "ALTER TABLE s.m ADD COLUMN n INT"),  # NULL in every row, as in the lake
    ("m", "ALTER TABLE s.m ADD n INT NULL DEFAULT NULL, ADD INDEX i (n)"),
    ("c", "ALTER TABLE s.c ADD COLUMN n INT NOT NULL DEFAULT 0"),  # earlier changes: NULL
    ("new", "ALTER TABLE s.new ADD COLUMN n INT DEFAULT 0"),  # no lake table yet
])
def test_an_added_column_the_lake_holds_alike_is_taken(
        tmp_path: Path, table: str, statement: str) -> None:
    assert written(tmp_path).load(*alter(table, statement)) == 0


def test_without_ddl_sync_an_alter_stops_only_where_it_fills_the_rows_held(
        tmp_path: Path) -> None:
    """ddl_sync off: the lake follows new columns (with their first rows) and nothing else, so
    a DROP or MODIFY goes on, and a column added with a value still stops a mirror."""
    writer = written(tmp_path)
    writer.params = dataclasses.replace(writer.params, ddl_sync=False)
    assert writer.load(*alter("m", "ALTER TABLE s.m DROP COLUMN v, MODIFY id BIGINT")) == 0
    with pytest.raises(LoadError, match="column n is added with DEFAULT 2"):
        writer.load(*alter("m", "ALTER IGNORE TABLE s.m DROP v, ADD n INT DEFAULT 2"))


@pytest.mark.parametrize(("statement", "found"), [
    ("ALTER TABLE t ADD c INT", None),
    ("ALTER TABLE t ADD c INT NULL DEFAULT NULL", None),
    ("ALTER TABLE t ADD c INT CHECK (c IS NOT NULL) COMMENT 'NOT NULL'", None),
    ("ALTER TABLE t ADD c INT AS (a + 1) PERSISTENT NOT NULL",  # in every row event
     ("c", "AS (…): a generated column, computed for every row")),
    ("ALTER TABLE t ADD c INT GENERATED ALWAYS AS (a * 4) VIRTUAL",
     ("c", "AS (…): a generated column, computed for every row")),
    ("ALTER TABLE t ADD INDEX i (c), ADD CONSTRAINT u UNIQUE (c)", None),
    ("ALTER TABLE t ADD c TIMESTAMP NULL ON UPDATE CURRENT_TIMESTAMP", None),
    ("CREATE TABLE t (a INT DEFAULT 1)", None),
    ("ALTER TABLE t ADD COLUMN c VARCHAR(9) DEFAULT 'x'", ("c", "DEFAULT 'x'")),
    ("ALTER ONLINE TABLE t ADD c INT DEFAULT 1", ("c", "DEFAULT 1")),
    ("ALTER ONLINE IGNORE TABLE IF EXISTS s.t ADD c INT DEFAULT 1", ("c", "DEFAULT 1")),
    ("ALTER TABLE t ADD (a INT, `b c` INT DEFAULT (1 + 1))", ("b c", "DEFAULT (…)")),
    ("ALTER TABLE t ADD COLUMN IF NOT EXISTS c ENUM('a','b') NOT NULL",
     ("c", "NOT NULL (its type's implicit default)")),
    ("ALTER TABLE t ADD c INT, ADD d BIGINT AUTO_INCREMENT", ("d", "AUTO_INCREMENT")),
    ("ALTER TABLE t ADD c TIMESTAMP", ("c", "TIMESTAMP without NULL (a server without "
                                           "explicit_defaults_for_timestamp makes it NOT "
                                           "NULL with a default)")),
])
def test_which_added_columns_fill_the_rows_a_table_holds(
        statement: str, found: tuple[str, str] | None) -> None:
    assert filled_column(statement) == found
