"""Select's row readers (node.select.fastrows for tables of plain columns,
node.select.rowdecode for the others) against the binlog library's own, on the binlog of the
schemas corpus' tables (every type at its edges, odd names, keyless tables, generated
columns): the same row changes, value for value."""

from __future__ import annotations

import uuid

import pytest
from pymysqlreplication.row_event import RowsEvent

from node.changes import ChangeType, Transaction
from node.select import fastrows, rowdecode
from node.select.binlog import BinlogReader
from shared.devcluster import Database
from shared.model import BinlogPosition, DataSource
from shared.secrets import SecretRef
from tests.integration.corpus import CASES, GROUPS
from tests.integration.test_schemas import fill, q

SYNCED = {group.name for group in GROUPS if group.ddl_sync}
ROWS_CASES = [case for case in CASES if case.group not in SYNCED]


def master(db: Database) -> BinlogPosition:
    file, pos = db.rows("SHOW MASTER STATUS")[0][:2]
    return BinlogPosition(str(file), int(pos))


def read(source: DataSource, start: BinlogPosition, end: BinlogPosition,
         schemas: set[str], server_id: int) -> list[Transaction]:
    reader = BinlogReader(source, server_id, start, lambda schema, table: schema in schemas,
                          lambda schema: schema in schemas)
    found: list[Transaction] = []
    reader.begin()
    try:
        while not found or (found[-1].end.file, found[-1].end.pos) < (end.file, end.pos):
            txn = reader.take(30.0)
            assert txn is not None, f"the reader stopped before {end}"
            found.append(txn)
    finally:
        reader.stop()
    return [txn for txn in found if txn.changes]


def test_rows_read_fast_equal_the_librarys(sandbox, monkeypatch) -> None:
    source = Database(sandbox, "source")
    run = uuid.uuid4().hex[:6]
    schemas = {case.id: f"rd{run}_{case.id.replace('-', '_')}" for case in ROWS_CASES}
    other = f"rd{run}_other"
    try:
        source.execute(f"CREATE DATABASE {q(other)}")
        start = master(source)
        for case in ROWS_CASES:
            source.execute(f"CREATE DATABASE {q(schemas[case.id])} {case.schema_options}")
            session = Database(sandbox, "source")
            try:
                for statement in (*case.setup, *case.work):
                    session.execute(fill(statement, schemas[case.id], other))
            finally:
                session.close()
        end = master(source)
        server = sandbox.servers()["source"]
        endpoint = DataSource("source", "127.0.0.1", server.port, "setl",
                              SecretRef(f"file:{sandbox.secret_file}"))
        wanted = set(schemas.values())
        before, boundaries = fastrows.read_here, fastrows.boundaries_here
        fast = read(endpoint, start, end, wanted, 7101)
        assert fastrows.read_here - before > 50  # many tables have only plain columns
        assert fastrows.boundaries_here - boundaries > 2 * len(ROWS_CASES)  # GTID and XID
        assert RowsEvent._read_column_data is rowdecode.read_column_data
        monkeypatch.setattr(RowsEvent, "_read_column_data", rowdecode._ORIGINAL)
        monkeypatch.setattr(fastrows, "ENABLED", False)
        library = read(endpoint, start, end, wanted, 7102)
        assert len(fast) == len(library) > len(ROWS_CASES)
        for ours, theirs in zip(fast, library, strict=True):
            assert ours.end == theirs.end  # file, position and GTID
            assert ours.commit_ts_ms == theirs.commit_ts_ms
            assert ours.changes == theirs.changes, f"at {ours.end}"
    finally:
        for schema in [*schemas.values(), other]:
            source.execute(f"DROP DATABASE IF EXISTS {q(schema)}")
        source.close()


def test_a_table_changed_by_ddl_gets_a_new_plan(sandbox) -> None:
    source = Database(sandbox, "source")
    schema = f"rd{uuid.uuid4().hex[:6]}"
    try:
        source.execute(f"CREATE DATABASE {q(schema)}")
        start = master(source)
        source.script(f"CREATE TABLE {q(schema)}.t (id INT PRIMARY KEY, v SMALLINT)",
                      f"INSERT INTO {q(schema)}.t VALUES (1, 7)",
                      f"ALTER TABLE {q(schema)}.t MODIFY v VARCHAR(9), ADD w DOUBLE",
                      f"INSERT INTO {q(schema)}.t VALUES (2, 'x', 0.5)")
        end = master(source)
        server = sandbox.servers()["source"]
        endpoint = DataSource("source", "127.0.0.1", server.port, "setl",
                              SecretRef(f"file:{sandbox.secret_file}"))
        rows = [change.after for txn in read(endpoint, start, end, {schema}, 7103)
                for change in txn.changes if change.type is ChangeType.INSERT]
        assert rows == [{"id": 1, "v": 7}, {"id": 2, "v": "x", "w": 0.5}]
    finally:
        source.execute(f"DROP DATABASE IF EXISTS {q(schema)}")
        source.close()


pytestmark = [pytest.mark.schemas]
