"""The schemas corpus (issue 17): every case of ``schemas_cases`` replicated through a real
channel and compared with the source byte for byte.

One run for the whole module: the cases' tables are made, one channel per group is applied
and started, then every case's statements run on the source (in sessions of their own time
zone and sql_mode), and each channel is waited on until it has loaded everything the source
wrote (or paused on an error). The node runs in another time zone than the source sessions,
and the target server in a third. Each case is then one test: the column definitions, the
row count and every cell as ``HEX()`` (numbers with a fraction as exact text, values over 2 KB
as length + SHA-256) as a multiset, so keyless tables with duplicate rows compare too.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pymysql
import pytest

from shared.identifiers import quote as q
from shared.identifiers import short_form
from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, wait_for
from tests.integration.corpus import CASES, GROUPS, OTHER_SETUP, Case, Group

pytestmark = [pytest.mark.schemas]
NODE_TZ = "America/New_York"  # the node's process; sources write in +09:00 and -05:00
TARGET_TZ = "-07:00"  # the target server's global time zone
LONG = 2048  # cells longer than this compare by length and SHA-256


@dataclass
class Outcome:
    """What became of one group's channel."""

    channel: str
    apply_errors: list[str] = field(default_factory=list)
    last_error: str = ""


@dataclass
class Corpus:
    schemas: dict[str, str]  # case id → schema name
    outcomes: dict[str, Outcome]  # group name → its channel's outcome
    source: Database
    target: Database
    cluster: Cluster
    other: str  # the schema of tables outside every channel


def schema_of(run: str, case: Case) -> str:
    return f"sc{run}{case.schema}" if case.schema else f"sc{run}_{case.id.replace('-', '_')}"


def fill(statement: str, schema: str, other: str) -> str:
    return statement.replace("{s}", q(schema)).replace("{o}", q(other))


def channel_of(group: Group, cases: list[Case], schemas: dict[str, str]) -> dict[str, Any]:
    if group.templates:  # every table of the case's schema, created later ones too
        pairs = [{"source": {"namespace": schemas[case.id], "table": "re:.*"},
                  "target": {"namespace": "{schema}", "table": "{table}"}, **case.pair_options}
                 for case in cases]
    else:  # the short form, names in backticks where they need them: `my-db`.`t.1`
        pairs = [{"source": short_form(schemas[case.id], table),
                  "target": short_form(schemas[case.id], table), **case.pair_options}
                 for case in cases for table in case.tables]
    return {"name": f"sc-{group.name}", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "max_retries": 2,
        "pairs": pairs, **group.params}]}


def _position(db: Database) -> tuple[str, int]:
    row = db.rows("SHOW MASTER STATUS")[0]
    return str(row[0]), int(row[1])


def _settled(cluster: Cluster, channel: str, until: tuple[str, int]) -> bool:
    if cluster.channel_status(channel) == "PAUSE":
        return True
    position = cluster.pipeline_state(channel).position
    return (position.file, position.pos) >= until


@pytest.fixture(scope="module")
def corpus(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    admin, target = Database(sandbox, "source"), Database(sandbox, "target")
    old_tz = target.rows("SELECT @@GLOBAL.time_zone")[0][0]
    target.execute(f"SET GLOBAL time_zone = '{TARGET_TZ}'")
    cluster = Cluster(sandbox, tmp_path_factory.mktemp("schemas"), "schemas",
                      env={"TZ": NODE_TZ})
    run = uuid.uuid4().hex[:6]
    schemas = {case.id: schema_of(run, case) for case in CASES}
    other = f"sc{run}_other"
    groups = {group.name: group for group in GROUPS}
    try:
        cluster.start_manager()
        cluster.start_node(1)
        admin.execute(f"CREATE DATABASE {q(other)}")
        admin.script(*(fill(statement, other, other) for statement in OTHER_SETUP))
        for case in CASES:
            schema = schemas[case.id]
            places = [admin] if groups[case.group].ddl_sync else [admin, target]
            for db in places:
                db.execute(f"CREATE DATABASE {q(schema)} {case.schema_options}")
                db.script(*(fill(statement, schema, other) for statement in case.setup))
        outcomes = _start_channels(cluster, schemas)
        for case in CASES:
            _work(sandbox, case, schemas[case.id], other)
        written = _position(admin)
        for outcome in outcomes.values():
            if not outcome.apply_errors:
                wait_for(lambda c=outcome.channel: _settled(cluster, c, written), 120,
                         f"channel {outcome.channel} to load up to {written} or pause")
                if cluster.channel_status(outcome.channel) == "PAUSE":  # the error follows
                    outcome.last_error = wait_for(
                        lambda c=outcome.channel: cluster.pipeline_state(c).last_error, 10,
                        f"the error that paused {outcome.channel}")
        source_utc, target_utc = Database(sandbox, "source"), Database(sandbox, "target")
        for db in (source_utc, target_utc):
            db.execute("SET time_zone = '+00:00'")
        yield Corpus(schemas, outcomes, source_utc, target_utc, cluster, other)
        source_utc.close()
        target_utc.close()
    finally:
        cluster.stop()
        target.execute(f"SET GLOBAL time_zone = '{old_tz}'")
        for db in (admin, target):
            for schema in [*schemas.values(), other]:
                db.execute(f"DROP DATABASE IF EXISTS {q(schema)}")
            db.close()


def _work(sandbox: Sandbox, case: Case, schema: str, other: str) -> None:
    """The case's statements on the source, in a session of its own (its settings stay)."""
    session = Database(sandbox, "source")
    try:
        for statement in case.work:
            try:
                session.execute(fill(statement, schema, other))
            except pymysql.MySQLError as exc:
                raise AssertionError(f"case {case.id}: {statement[:200]}: {exc}") from None
    finally:
        session.close()


def _start_channels(cluster: Cluster, schemas: dict[str, str]) -> dict[str, Outcome]:
    outcomes = {}
    for group in GROUPS:
        cases = [case for case in CASES if case.group == group.name]
        channel = channel_of(group, cases, schemas)
        outcome = outcomes[group.name] = Outcome(channel["name"])
        outcome.apply_errors = cluster.apply_errors([channel])
        if not outcome.apply_errors:
            cluster.set_status(outcome.channel, "START")
    for outcome in outcomes.values():
        if not outcome.apply_errors:
            wait_for(lambda c=outcome.channel: cluster.pipeline_state(c).state == "running"
                     or cluster.channel_status(c) == "PAUSE", 120, f"{outcome.channel} to run")
    return outcomes


# -- comparing ------------------------------------------------------------------------------
_COLUMNS = ("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME, COLLATION_NAME, "
            "IS_NULLABLE, COLUMN_DEFAULT, EXTRA, GENERATION_EXPRESSION FROM "
            "information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "ORDER BY ORDINAL_POSITION")


def cell(column: str, data_type: str) -> str:
    """An expression printing one cell exactly: bytes as hex, fractions as exact text."""
    if data_type in ("float", "double"):
        return f"CAST(CAST({q(column)} AS DOUBLE) AS CHAR)"
    if data_type == "decimal":
        return f"CAST({q(column)} AS CHAR)"
    return (f"IF(LENGTH({q(column)}) > {LONG}, CONCAT('length ', LENGTH({q(column)}), "
            f"' sha256 ', SHA2({q(column)}, 256)), HEX({q(column)}))")


@dataclass(frozen=True)
class Picture:
    """A table as the comparison sees it."""

    schema: tuple[Any, ...]
    table: tuple[Any, ...]
    columns: tuple[tuple[Any, ...], ...]
    rows: Counter[tuple[str, ...]]


def picture(db: Database, schema: str, table: str) -> Picture:
    schema_row = db.rows("SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM "
                         "information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (schema,))
    table_row = db.rows("SELECT TABLE_COLLATION, CREATE_OPTIONS FROM information_schema.TABLES "
                        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (schema, table))
    columns = tuple(db.rows(_COLUMNS, (schema, table)))
    rows: Counter[tuple[str, ...]] = Counter()
    if columns:
        exprs = ", ".join(cell(name, kind) for name, kind, *_ in columns)
        for row in db.rows(f"SELECT {exprs} FROM {q(schema)}.{q(table)}"):
            rows[tuple("NULL" if value is None else str(value) for value in row)] += 1
    return Picture(tuple(schema_row), tuple(table_row), columns, rows)


def assert_same(corpus: Corpus, schema: str, table: str) -> int:
    """Source and target hold the same table; return the cells compared."""
    want, got = picture(corpus.source, schema, table), picture(corpus.target, schema, table)
    where = f"{schema}.{table}"
    assert got.columns, f"{where}: no such table on the target"
    assert got.schema == want.schema, f"{where}: schema charset source {want.schema}, " \
                                      f"target {got.schema}"
    assert got.table == want.table, f"{where}: table options source {want.table}, " \
                                    f"target {got.table}"
    for a, b in zip(want.columns, got.columns, strict=False):
        assert a == b, f"{where}: column source {a}, target {b}"
    assert len(want.columns) == len(got.columns), f"{where}: columns differ"
    names = [column[0] for column in want.columns]
    only_source = list((want.rows - got.rows).elements())[:3]
    only_target = list((got.rows - want.rows).elements())[:3]
    assert want.rows == got.rows, (
        f"{where}: source {want.rows.total()} rows, target {got.rows.total()}; columns {names}"
        f"; only on the source {only_source}; only on the target {only_target}")
    return want.rows.total() * len(names)


def _param(case: Case) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_case_is_copied_exactly(corpus: Corpus, case: Case) -> None:
    outcome = corpus.outcomes[case.group]
    assert not outcome.apply_errors, f"apply refused {outcome.channel}: {outcome.apply_errors}"
    if case.pauses:  # setl stops and says what to do; done, the channel copies the rest
        assert case.pauses in outcome.last_error, outcome.last_error
        schema, cluster = corpus.schemas[case.id], corpus.cluster
        corpus.target.script(*(fill(text, schema, corpus.other) for text in case.remedy))
        until = _position(corpus.source)
        cluster.set_status(outcome.channel, "START")

        def caught_up() -> bool:
            if cluster.channel_status(outcome.channel) == "PAUSE":
                raise AssertionError(f"{outcome.channel} paused again: "
                                     f"{cluster.pipeline_state(outcome.channel).last_error}")
            return _settled(cluster, outcome.channel, until)

        wait_for(caught_up, 120, f"{outcome.channel} to resume and load up to {until}")
    else:
        assert not outcome.last_error, f"{outcome.channel} stopped: {outcome.last_error}"
    for table in case.tables:
        assert_same(corpus, corpus.schemas[case.id], table)
