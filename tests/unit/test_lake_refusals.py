"""What a lake target refuses, and why, before it could hold other rows than the source's:
a foreign key that cascades, text in a charset setl cannot decode, a pair whose rows carry
only some of their columns."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from node.changes import Batch, ChangeType, TargetChange, Transaction
from node.jobs import JobSpec
from node.target.delta import tables, units
from node.target.delta.columns import LakeColumn, TextColumn
from node.target.delta.loader import LakeLoader
from node.target.delta.tables import LakeFacts, LakeTables
from shared.errors import ConfigError, LoadError
from shared.model import BinlogPosition, DataSource, PipelineParams
from tests.unit.test_etl import compiled as etl
from tests.unit.yaml_cases import errors, load


def loader(location: Path) -> LakeLoader:
    return LakeLoader("c.p", {"lake": DataSource("lake", "", type="delta",
                                                 location=str(location))},
                      PipelineParams(), epoch=1, run="r1")


def ddl_batch(statement: str) -> tuple[Batch, list[TargetChange]]:
    batch = Batch("c.p", 4)
    batch.add(Transaction((), BinlogPosition("bin.000001", 900), 0, 0))
    return batch, [TargetChange("lake", "s", "child", ChangeType.DDL, (), None, None,
                                ddl=statement)]


def test_a_foreign_key_added_with_a_cascade_stops_the_pipeline_saying_what_to_do(
        tmp_path: Path) -> None:
    writer = loader(tmp_path)
    with pytest.raises(LoadError) as stopped:
        writer.load(*ddl_batch("ALTER TABLE child ADD CONSTRAINT fk FOREIGN KEY (pid) "
                               "REFERENCES parent (id) ON DELETE CASCADE"))
    message = str(stopped.value)
    assert message.startswith("pipeline c.p processId 4, position bin.000001:900: the source "
                              "ran 'ALTER TABLE child ADD CONSTRAINT fk")
    assert "on s.child, a foreign key whose ON DELETE or ON UPDATE changes the rows" in message
    assert "Make the key RESTRICT on the source" in message
    assert "setl position set c/p" in message
    assert writer.load(*ddl_batch("ALTER TABLE child ADD CONSTRAINT fk FOREIGN KEY (pid) "
                                  "REFERENCES parent (id) ON DELETE RESTRICT")) == 0


SWE7 = SimpleNamespace(schema="shop", table="names", primary_key=("id",), columns=(
    TextColumn("id", "int", "int(11)", None), TextColumn("name", "varchar", "varchar(9)", "swe7"),
    TextColumn("note", "varchar", "varchar(9)", "utf8mb4")))


def test_text_that_is_not_utf_8_stops_the_batch_naming_the_column() -> None:
    """Bytes of a charset setl cannot decode (swe7's 'KÄra' is K, 0x5b, r, a): ones that
    are not UTF-8 stop the batch with the column and what to do, never a bare
    UnicodeDecodeError."""
    facts = LakeFacts((LakeColumn("id", "int32"), LakeColumn("name", "string")), ("id",))
    spec = JobSpec(1, False, {("lake", "shop", "names"): facts}, target="delta")
    change = TargetChange("lake", "shop", "names", ChangeType.INSERT, ("id",), None,
                          {"id": 1, "name": b"K\xe4ra"}, seq=0)
    with pytest.raises(LoadError, match=r"lake table shop.names, column name: the source "
                                        r"gives the bytes b'K\\xe4ra', which are not UTF-8 "
                                        r"text .*columns: \{exclude: \[name\]\}"):
        units.render([change], spec)


def test_a_text_column_setl_cannot_decode_is_refused_for_a_lake() -> None:
    compiled = etl("{source: shop.names, target: shop.names}")
    with pytest.raises(ConfigError, match=r"pipeline shop.fwd pair src:shop.names: column name "
                                          r"of shop.names is text in swe7, a charset setl "
                                          r"cannot decode.*exclude: \[name\]"):
        LakeTables(compiled).of(("dst", "shop", "names"), SWE7)
    left_out = etl("{source: shop.names, target: shop.names, columns: {exclude: [name]}}")
    facts = LakeTables(left_out).of(("dst", "shop", "names"), SWE7)
    assert [column.name for column in facts.columns] == ["id", "note"]


class Server:
    """A source's information_schema as refuse_undecodable asks it."""

    def __init__(self, columns: list[tuple[str, str, str, str]]) -> None:
        self.columns, self.asked = columns, []

    def __call__(self, source: object) -> Server:
        return self

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def cursor(self) -> Server:
        return self

    def execute(self, query: str, params: object = ()) -> None:
        self.asked.append(params)
        self.rows = [("utf8mb4",), ("swe7",), ("latin1",), ("keybcs2",)] \
            if "CHARACTER_SETS" in query else self.columns

    def fetchall(self) -> list[tuple]:
        return self.rows


def test_the_start_refuses_a_paired_column_setl_cannot_decode(monkeypatch) -> None:
    server = Server([("shop", "names", "name", "swe7"), ("other", "t", "c", "keybcs2")])
    monkeypatch.setattr(tables, "connect", server)
    with pytest.raises(ConfigError, match=r"column name of shop.names is text in swe7"):
        tables.refuse_undecodable(etl("{source: shop.names, target: shop.names}"), None)
    assert server.asked[1] == ["swe7", "keybcs2"]  # only the charsets Python lacks
    tables.refuse_undecodable(etl("{source: shop.names, target: shop.names, columns: "
                                  "{include: [id]}}"), None)  # left out: fine
    tables.refuse_undecodable(etl("{source: shop.orders, target: shop.orders}"), None)


LAKE = """\
sources:
  - {name: src, host: db1}
  - {name: lake, type: delta, location: /var/lib/lake}
"""
CHANNEL = """\
channels:
  - name: c
    pipelines:
      - name: p
        source: src
        target: lake
        pairs:
          - {source: s.a, target: s.a, column_groups: [[x, y]]}
          - {source: s.b, target: s.wide, key_columns: [id], merge_part: true}
          - {source: s.c, target: s.c, mode: changelog, column_groups: [[x, y]]}
"""


def test_a_lake_pair_that_writes_part_of_a_row_is_refused_at_apply() -> None:
    """A Delta row is written whole: a pair whose rows carry only some columns (groups of
    changed columns, one part of a wide row) would write NULL over the others."""
    found = errors(LAKE + CHANNEL)
    where = "channels[0].pipelines[0].pairs"
    assert [line.split(": target lake is a lake")[0] for line in found] == [
        f"f.yaml:11: {where}[0].column_groups", f"f.yaml:12: {where}[1].merge_part",
        f"f.yaml:13: {where}[2].column_groups"]
    assert "leave column_groups out of the pair" in found[0]
    assert "give each part its own lake table" in found[1]
    # a lake stored by an earlier apply, named with its type: the same
    stored = errors(CHANNEL, known_sources={"src": "mysql", "lake": "delta"})
    assert [line.split(":", 2) for line in stored] == [
        ["f.yaml", str(int(line.split(":")[1]) - 3), line.split(":", 2)[2]] for line in found]
    # into a database, both are what they are for
    assert load(CHANNEL, known_sources={"src": "mysql", "lake": "mariadb"}).channels


def test_a_lake_pair_that_writes_part_of_a_row_is_refused_at_start() -> None:
    """A definition written straight into ZooKeeper was never applied: the start refuses."""
    compiled = etl("{source: s.a, target: s.a, key_columns: [id], merge_part: true}")
    with pytest.raises(ConfigError, match=r"^pipeline shop.fwd pair src:s.a: merge_part: "
                                          r"target dst is a lake, whose rows are written "
                                          r"whole"):
        tables.refuse_partial_rows(compiled)
    tables.refuse_partial_rows(etl("{source: s.a, target: s.a}"))


def layout(table: str, *names: str) -> SimpleNamespace:
    return SimpleNamespace(schema="s", table=table, primary_key=("id",), columns=tuple(
        TextColumn(name, "int", "int(11)", None) for name in ("id", *names)))


def test_source_tables_of_other_columns_into_one_mirrored_lake_table_are_refused() -> None:
    """A wide row merged from several tables (N:1, keyed alike): each table's rows carry its
    own columns, and a Delta row is written whole, so one's rows would write NULL into the
    other's columns. Shards of one shape merge into one table as before."""
    wide = etl("{source: s.a, target: s.w}", "{source: s.b, target: s.w}")
    found = LakeTables(wide)
    assert [c.name for c in found.of(("dst", "s", "w"), layout("a", "x")).columns] == \
        ["id", "x"]
    with pytest.raises(ConfigError, match=r"^pipeline shop.fwd: lake table s.w gets the rows "
                                          r"of s.a and of s.b, whose columns differ \(x, y\)"):
        found.of(("dst", "s", "w"), layout("b", "y"))
    assert found.of(("dst", "s", "w"), layout("a", "x")).keys == ("id",)  # (a again: fine)
    shards = etl("{source: {namespace: s, table: 're:t_[0-9]'}, target: s.t}")
    found = LakeTables(shards)
    for table in ("t_0", "t_1", "t_2"):
        assert [c.name for c in found.of(("dst", "s", "t"), layout(table, "x")).columns] == \
            ["id", "x"]
    logged = LakeTables(etl("{source: s.a, target: s.w, mode: changelog}",
                            "{source: s.b, target: s.w, mode: changelog}"))
    logged.of(("dst", "s", "w"), layout("a", "x"))
    logged.of(("dst", "s", "w"), layout("b", "y"))  # each change its own row: no overwrite


def test_shards_of_one_family_altered_one_at_a_time_write_the_union_of_their_columns() -> None:
    """ALTER TABLE … ADD COLUMN rolled out over a family of shards, one at a time: each
    shard's rows write the columns it has (one it lacks is not there for its rows), and the
    lake table's columns are the union; a column the shards type differently is refused."""
    shards = etl("{source: {namespace: s, table: 're:t_[0-9]'}, target: s.t}")
    found = LakeTables(shards)
    assert [c.name for c in found.of(("dst", "s", "t"), layout("t_0", "x")).columns] == \
        ["id", "x"]
    assert [c.name for c in found.of(("dst", "s", "t"), layout("t_1", "x", "note")).columns] \
        == ["id", "x", "note"]
    assert [c.name for c in found.of(("dst", "s", "t"), layout("t_0", "x")).columns] == \
        ["id", "x", "note"]
    typed = SimpleNamespace(schema="s", table="t_2", primary_key=("id",), columns=(
        TextColumn("id", "int", "int(11)", None), TextColumn("x", "varchar", "varchar(9)",
                                                             "utf8mb4")))
    with pytest.raises(ConfigError, match=r"whose columns differ"):
        found.of(("dst", "s", "t"), typed)


def test_shards_whose_set_members_differ_still_write_the_union_of_their_columns() -> None:
    """One shard ALTERed first (a SET member and a column added): a SET's members are not
    its type, so the shards still share the lake table."""
    def shard(table: str, members: str, *more: str) -> SimpleNamespace:
        return SimpleNamespace(schema="s", table=table, primary_key=("id",), columns=(
            TextColumn("id", "int", "int(11)", None),
            TextColumn("tags", "set", f"set({members})", "utf8mb4"),
            *(TextColumn(name, "int", "int(11)", None) for name in more)))

    found = LakeTables(etl("{source: {namespace: s, table: 're:t_[0-9]'}, target: s.t}"))
    found.of(("dst", "s", "t"), shard("t_0", "'a','b'"))
    assert [c.name for c in found.of(("dst", "s", "t"),
                                     shard("t_1", "'a','b','c'", "note")).columns] == \
        ["id", "tags", "note"]
