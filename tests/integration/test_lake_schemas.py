"""The schemas corpus into a lake: every case of the ``values`` group replicated into Delta
tables and read back with ``deltalake``, each cell held against the source's value mapped as
docs/lake.md says (keyed tables mirrored, keyless ones as change logs replayed); a case whose
rows a Delta table cannot hold (zero and invalid dates) must stop its own channel saying why.

Left out: cases of cascading foreign keys (a lake refuses them at start: test_lake.py), and
cases whose remedy is a statement on a database target.
"""

from __future__ import annotations

import datetime
import decimal
import struct
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from deltalake import DeltaTable

from node.target.delta.columns import TextColumn, of_text, time_text
from shared import lakes
from shared.identifiers import quote as q
from shared.identifiers import short_form
from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, wait_for
from tests.integration.corpus import CASES, OTHER_SETUP, Case
from tests.integration.corpus.shapes import FOREIGN_KEYS
from tests.integration.lakes import lake_sources
from tests.integration.test_schemas import fill, schema_of

pytestmark = [pytest.mark.schemas]
# each refused case with what its channel's error must say
DATES = "zero or partial date"  # a Delta date cannot hold them
REFUSED = {"date-edges": DATES, "zero-in-date": DATES, "sql-mode-lenient": DATES,
           "dates-invalid": DATES, "keyless-duplicates-nulls": DATES,
           "key-columns-duplicates-nulls": DATES,
           "name-backtick": "holds a backtick, which delta-rs cannot name in the MERGE"}
# refused cases whose refused values are all deleted again: a batch that holds the insert
# and the delete writes neither (a mirror holds the source's current rows), so whether the
# channel stops depends on where the batches were cut; landed, they must be equal
GONE_AGAIN = {"date-edges"}
LAKE_CASES = [case for case in CASES if case.group == "values" and case not in FOREIGN_KEYS
              and not case.pauses]


@dataclass
class Lake:
    schemas: dict[str, str]
    location: str
    errors: dict[str, str]  # case id of a refused case → its channel's error
    source: Database


def _keyless(db: Database, schema: str, table: str) -> bool:
    return not db.rows("SELECT 1 FROM information_schema.STATISTICS s WHERE TABLE_SCHEMA = %s "
                       "AND TABLE_NAME = %s AND NON_UNIQUE = 0 AND NOT EXISTS (SELECT 1 FROM "
                       "information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = s.TABLE_SCHEMA AND "
                       "c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME AND "
                       "c.IS_NULLABLE = 'YES')", (schema, table))


def _channel(name: str, cases: list[Case], schemas: dict[str, str], db: Database
             ) -> dict[str, Any]:
    pairs = []
    for case in cases:
        for table in case.tables:
            mode = "changelog" if _keyless(db, schemas[case.id], table) else "mirror"
            pairs.append({"source": short_form(schemas[case.id], table),
                          "target": short_form(schemas[case.id], table), "mode": mode,
                          **case.pair_options})
    return {"name": name, "pipelines": [{"name": "forward", "source": "source",
                                         "target": "lake", "max_retries": 0, "pairs": pairs}]}


@pytest.fixture(scope="module")
def lake(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    admin = Database(sandbox, "source")
    work = tmp_path_factory.mktemp("lake-schemas")
    cluster = Cluster(sandbox, work, "lake-schemas", env={"TZ": "America/New_York"})
    run = uuid.uuid4().hex[:6]
    schemas = {case.id: schema_of(run, case) for case in LAKE_CASES}
    other = f"sc{run}_other"
    location = work / "lake"
    try:
        cluster.start_manager()
        cluster.start_node(1)
        admin.execute(f"CREATE DATABASE {q(other)}")
        admin.script(*(fill(statement, other, other) for statement in OTHER_SETUP))
        for case in LAKE_CASES:
            admin.execute(f"CREATE DATABASE {q(schemas[case.id])} {case.schema_options}")
            admin.script(*(fill(text, schemas[case.id], other) for text in case.setup))
        channels = {"lk-values": [case for case in LAKE_CASES if case.id not in REFUSED]}
        channels |= {f"lk-{case.id}": [case] for case in LAKE_CASES if case.id in REFUSED}
        sources = lake_sources(cluster, location)
        cluster.apply([_channel(name, cases, schemas, admin)
                       for name, cases in channels.items()], sources)
        for name in channels:
            cluster.set_status(name, "START")
        for name in channels:
            cluster.wait_running(name)
        for case in LAKE_CASES:
            session = Database(sandbox, "source")
            session.script(*(fill(text, schemas[case.id], other) for text in case.work))
            session.close()
        written = admin.rows("SHOW MASTER STATUS")[0][:2]

        def settled(name: str) -> bool:
            state = cluster.pipeline_state(name)
            return (cluster.channel_status(name) == "PAUSE" and bool(state.last_error)) or (
                (state.position.file, state.position.pos) >= tuple(written))
        for name in channels:
            wait_for(lambda n=name: settled(n), 120, f"{name} to load everything or stop")
        errors = {cases[0].id: cluster.pipeline_state(name).last_error
                  for name, cases in channels.items() if name != "lk-values"}
        assert cluster.channel_status("lk-values") == "START", \
            cluster.pipeline_state("lk-values").last_error
        source = Database(sandbox, "source")
        source.execute("SET time_zone = '+00:00'")
        yield Lake(schemas, str(location), errors, source)
        source.close()
    finally:
        cluster.stop()
        for schema in [*schemas.values(), other]:
            admin.execute(f"DROP DATABASE IF EXISTS {q(schema)}")
        admin.close()


def expected(value: Any, column: TextColumn) -> Any:
    """A source value (PyMySQL's, the session in UTC) as docs/lake.md says the lake holds
    it."""
    if value is None:
        return None
    lake = of_text(column, column.name)
    kind = lake.kind
    if isinstance(value, bytes) and kind in ("int64", "uint64") and column.data_type == "bit":
        value = int.from_bytes(value, "big")
    if kind == "uint64":
        return decimal.Decimal(int(value))
    if kind == "float32":
        return struct.unpack("f", struct.pack("f", value))[0]
    if kind == "decimal_text":
        return format(value, "f")
    if kind == "timestamp":
        return value.replace(tzinfo=datetime.UTC)
    if kind == "time":
        return time_text(value, lake.scale)
    return value


def source_picture(db: Database, schema: str, table: str) -> tuple[list[str], Counter]:
    columns = [TextColumn(str(name), str(kind).lower(), str(full).lower(), charset)
               for name, kind, full, charset in db.rows(
                   "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME FROM "
                   "information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                   "ORDER BY ORDINAL_POSITION", (schema, table))]
    # the stored value of a FLOAT or DOUBLE(M,D), not its text rounded for display
    exprs = ", ".join(f"CAST({q(c.name)} AS DOUBLE)" if c.data_type in ("float", "double")
                      else q(c.name) for c in columns)
    rows = Counter(tuple(expected(value, column) for value, column in zip(row, columns,
                                                                           strict=True))
                   for row in db.rows(f"SELECT {exprs} FROM {q(schema)}.{q(table)}"))
    return [c.name for c in columns], rows


def lake_picture(location: str, schema: str, table: str, names: list[str]) -> Counter:
    data = DeltaTable(lakes.table_uri(location, schema, table)).to_pyarrow_table().to_pylist()
    if data and "_setl_op" in data[0]:  # a change log: replayed in source order
        def order(change: dict[str, Any]) -> tuple[int, int, int]:
            file, _, pos = change["_setl_position"].rpartition(":")
            return int(file.rpartition(".")[2]), int(pos), change["_setl_seq"]
        state: Counter = Counter()
        for change in sorted(data, key=order):
            if change["_setl_op"] in ("U", "D"):
                state[tuple(change["_setl_before"][n] for n in names)] -= 1
            if change["_setl_op"] in ("I", "U"):
                state[tuple(change[n] for n in names)] += 1
        return +state
    return Counter(tuple(row.get(n) for n in names) for row in data)


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in LAKE_CASES])
def test_case_lands_in_the_lake_exactly(lake: Lake, case: Case) -> None:
    if case.id in REFUSED and (lake.errors[case.id] or case.id not in GONE_AGAIN):
        assert REFUSED[case.id] in lake.errors[case.id], lake.errors[case.id]
        return
    schema = lake.schemas[case.id]
    for table in case.tables:
        names, want = source_picture(lake.source, schema, table)
        got = lake_picture(lake.location, schema, table, names)
        only_source = list((want - got).elements())[:3]
        only_lake = list((got - want).elements())[:3]
        assert got == want, (f"{schema}.{table}: source {want.total()} rows, lake "
                             f"{got.total()}; columns {names}; only on the source "
                             f"{only_source}; only in the lake {only_lake}")
