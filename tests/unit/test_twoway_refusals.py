"""node/target/mysql/twoway.py and twowaytables.py, shared/pairchecks.py and node/start.py:
what a two-way channel refuses — pairs that write part of a row, keyless tables, target
tables whose engine does not roll back, and target tables the conflict check cannot tell
apart as the write does."""

from __future__ import annotations

from typing import Any

import pytest

from node.changes import ChangeType
from node.target.mysql import twowaytables
from node.target.mysql.facts import TableFacts
from node.target.mysql.twoway import LoopGuard
from shared.errors import ConfigError
from shared.model import BinlogPosition
from tests.unit.test_twoway import change


class FakeConnection:
    """A connection and its cursor in one, as ``with connect(…) as conn, conn.cursor()``
    uses them: what it answers is each test's."""

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def cursor(self) -> Any:
        return self



TWO_WAY = """sources:
  - {name: a, host: h1}
  - {name: b, host: h2}
channels:
  - name: c
    pipelines:
      - name: forward
        source: a
        target: b
        pairs:
%s
      - name: back
        source: b
        target: a
        pairs:
          - {source: s.t, target: s.t}
"""


@pytest.mark.parametrize(("pairs", "expected"), [
    (["{source: s.t, target: s.t, column_groups: [[x, y]]}"],
     "pipeline forward pair a:s.t → b:s.t has column_groups: on a two-way channel a key both "
     "sides wrote is settled by the first pipeline's change overwriting the other side's row, "
     "and with column groups an update carries only its changed columns and their groups, so "
     "the two sides would keep different values in the other columns; leave column_groups "
     "out of the pair, or give these tables a one-way channel"),
    (["{source: s.t, target: s.t, key_columns: [id], merge_part: true}"],
     "pipeline forward pair a:s.t → b:s.t has merge_part: "),
    (["{source: s.t, target: s.t, joins: [{table: s.u, by: id, key: uid, columns: [x]}]}"],
     "pipeline forward pair a:s.t → b:s.t has joins: "),
    (["{source: s.t, target: s.w, key_columns: [id]}",
      "{source: s.u, target: s.w, key_columns: [id]}"],
     "pipeline forward: pairs a:s.t and a:s.u both write b:s.w: "),
])
def test_pairs_that_write_part_of_a_row_are_refused_on_a_two_way_channel(
        pairs: list[str], expected: str) -> None:
    """The first pipeline's change overwrites the other side's row: only a change carrying
    the whole row makes the two sides alike."""
    from shared.definitions import load_text
    from shared.errors import ConfigError
    from shared.pairchecks import two_way_pair_problems

    text = TWO_WAY % "\n".join(f"          - {pair}" for pair in pairs)
    with pytest.raises(ConfigError) as refused:
        load_text(text, "f.yaml")
    assert f"f.yaml:7: channels[0].pipelines: {expected}" in str(refused.value)
    one_way = text.split("      - name: back")[0]
    [pipeline] = load_text(one_way, "f.yaml").channels[0].pipelines  # one-way: fine
    assert two_way_pair_problems(pipeline)[0].startswith(expected)  # the node's start says it


def test_the_start_of_a_two_way_pipeline_refuses_keyless_tables_and_partial_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A definition written straight into ZooKeeper was never applied: the node's start
    checks it the same."""
    from node import start
    from shared.definitions import load_text
    from shared.errors import ConfigError
    from tests.unit.test_etl import compiled

    monkeypatch.setattr(start.tablekeys, "read_keys", lambda source: {
        ("s", "t"): ("id",), ("s", "logs"): None})
    monkeypatch.setattr(start.tablekeys, "read_nullable", lambda source, pipelines: frozenset())
    monkeypatch.setattr(start, "name_case", lambda source: 0)
    monkeypatch.setattr(start, "versioned_pair_problems", lambda compiled, source: [])
    monkeypatch.setattr(start.positions, "current_position", lambda source: BinlogPosition())
    one_way = (TWO_WAY % "          - {source: s.t, target: s.t, column_groups: [[x, y]]}\n"
               "          - {source: s.logs, target: s.logs}").split("      - name: back")[0]
    [pipeline] = load_text(one_way, "f.yaml").channels[0].pipelines
    made = compiled("{source: s.t, target: s.t}")
    start.with_table_keys(made, None, pipeline)  # type: ignore[arg-type]  # one-way: fine
    made = made.__class__.compile("c.forward", 1, pipeline, two_way=True)
    with pytest.raises(ConfigError) as refused:
        start.with_table_keys(made, None, pipeline)  # type: ignore[arg-type]
    assert "pipeline forward: table s.logs (pair a:s.logs) has no primary key" in \
        str(refused.value)
    assert "pipeline forward pair a:s.t → b:s.t has column_groups" in str(refused.value)



def test_a_target_table_whose_engine_does_not_roll_back_is_refused_naming_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A MyISAM/Aria write reaches the binlog as a group of its own, without the loop mark:
    the opposite pipeline would send it back. Refused at the start (the target tables of
    the source's paired tables), and before a batch writes a table met later."""
    from shared.errors import ConfigError
    from shared.model import DataSource
    from tests.unit.test_etl import compiled

    asked: list[tuple[str, Any]] = []
    answers = {"h1": [("s", "t"), ("s", "u"), ("other", "x")],
               "h2": [("s2", "t", "MyISAM")]}

    class Conn(FakeConnection):
        def __init__(self, source: DataSource) -> None:
            self.host = source.host

        def execute(self, statement: str, args: Any = None) -> None:
            asked.append((self.host, args))

        def fetchall(self) -> list[tuple[str, ...]]:
            return answers[self.host]

    monkeypatch.setattr(twowaytables, "connect", Conn)
    made = compiled("{source: s.t, target: s2.t}", "{source: s.u, target: s2.u}")
    source, target = DataSource("src", host="h1"), DataSource("dst", host="h2")
    with pytest.raises(ConfigError) as refused:
        twowaytables.refuse_non_transactional("c.forward", made, source, {"dst": target})
    assert str(refused.value).startswith(
        "pipeline c.forward (two-way): target table s2.t on dst has engine MyISAM, which does "
        "not roll back: its rows reach the binlog as a group of their own, without the loop "
        "mark")
    assert "ALTER TABLE `s2`.`t` ENGINE=InnoDB" in str(refused.value)
    assert asked[-1] == ("h2", ["s2", "t", "s2", "u"])  # the paired tables' targets only
    answers["h2"] = []
    twowaytables.refuse_non_transactional("c.forward", made, source, {"dst": target})

    guard = LoopGuard("c", "c.forward", wins_conflicts=True)
    rows = [change(1, ChangeType.INSERT, None, None, {"id": 1})]
    guard.refuse_engines(lambda target: TableFacts(engine="InnoDB"), rows)
    with pytest.raises(ConfigError, match=r"target table s.t on dst has engine Aria, which "):
        guard.refuse_engines(lambda target: TableFacts(engine="Aria", transactional=False),
                             rows)



def test_target_tables_the_conflict_check_cannot_tell_apart_as_the_write_does_are_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A second unique key (the upsert lands on the other side's row by it), a key the
    server's collation compares loosely ('abc' and 'ABC', 'abc' and 'abc ' the same key, the
    check's exact comparison not) and a trigger (its rows ride in the marked transaction and
    never cross back) are refused at the start, naming the table."""
    from shared.model import DataSource
    from tests.unit.test_etl import compiled

    answers: dict[str, list[tuple[Any, ...]]] = {
        "information_schema.TABLES": [("s", "t")], "STATISTICS": [],
        "auto_increment": [], "COLUMNS": [], "TRIGGERS": []}  # (the first name a query holds)

    class Conn(FakeConnection):
        def __init__(self, source: DataSource) -> None:
            pass

        def execute(self, statement: str, args: Any = None) -> None:
            self.found = next(rows for name, rows in answers.items() if name in statement)

        def fetchall(self) -> list[tuple[Any, ...]]:
            return self.found

    monkeypatch.setattr(twowaytables, "connect", Conn)
    made = compiled("{source: s.t, target: s.t}")
    source, targets = DataSource("src", host="h1"), {"dst": DataSource("dst", host="h2")}

    def refused() -> str:
        try:
            twowaytables.refuse_unsafe_tables("c.forward", made, source, targets)
        except ConfigError as exc:
            return str(exc)
        return ""

    answers["STATISTICS"] = [("s", "t", "PRIMARY", "id"), ("s", "t", "PRIMARY", "code")]
    text = [("s", "t", "code", "varchar", "utf8mb4", "utf8mb4_nopad_bin"),
            ("s", "t", "name", "varchar", "utf8mb4", "utf8mb4_general_ci")]
    answers["COLUMNS"] = text
    assert refused() == ""  # one key, compared by bytes; a loose collation off the key
    answers["COLUMNS"] = [("s", "t", "code", "char", "utf8mb4", "utf8mb4_bin")]
    assert refused() == ""  # (a CHAR's trailing spaces are gone before it compares)
    answers["COLUMNS"] = [("s", "t", "code", "varchar", "utf8mb4", "utf8mb4_general_ci")]
    assert refused().startswith(
        "pipeline c.forward (two-way): target table s.t on dst: key column code has collation "
        "utf8mb4_general_ci, under which the server takes 'abc' and 'ABC' (or 'é' and 'e') "
        "for one key")
    assert "COLLATE utf8mb4_nopad_bin on MariaDB" in refused()
    answers["COLUMNS"] = [("s", "t", "code", "varchar", "utf8mb4", "utf8mb4_bin")]
    assert "takes 'abc' and 'abc ' (trailing spaces) for one key" in refused()
    answers["COLUMNS"] = text
    answers["STATISTICS"].append(("s", "t", "email", "email"))
    assert refused().startswith(
        "pipeline c.forward (two-way): target table s.t on dst has 2 unique keys (PRIMARY, "
        "email): the conflict check reads a row by one key, while the write (INSERT … ON "
        "DUPLICATE KEY UPDATE) lands on the row any unique key collides with")
    answers["STATISTICS"].pop()
    answers["TRIGGERS"] = [("s", "t", "audit")]
    assert refused().startswith(
        "pipeline c.forward (two-way): target table s.t on dst has trigger audit: the rows a "
        "trigger writes while setl loads ride in its marked transaction and never cross back")
    answers["TRIGGERS"] = []
    # key_columns wider than the table's key: the check reads by (id, tenant), the upsert
    # meets the row by PK (id): rows of one id under two tenants overwrite each other unseen
    answers["STATISTICS"] = [("s", "t", "PRIMARY", "id")]
    made = compiled("{source: s.t, target: s.t, key_columns: [id, tenant]}")
    assert refused().startswith(
        "pipeline c.forward (two-way): target table s.t on dst: the pair's key_columns (id, "
        "tenant) are not a unique key of it (its unique keys: PRIMARY (id)): the conflict "
        "check reads a row by the key_columns, while the write")
    made = compiled("{source: s.t, target: s.t, key_columns: [ID]}")
    assert refused() == ""  # exactly its key (names without case)
    answers["STATISTICS"] = []
    assert "(its unique keys: none)" in refused()

