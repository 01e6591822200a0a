"""Which failures mean the connection is gone, and the central free door's read cut off by
one, without servers (on real servers: tests/integration/test_reconnect_*.py)."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from node.extract import freedoor
from node.extract.freedoor import CentralDoor
from shared.endpoint import lost
from shared.model import DataSource
from shared.secrets import SecretRef

COLUMNS = ("ID", "FULL_NAME", "TYPE", "PK_DATA", "CHANNEL_ID", "PIPELINE_ID")


@pytest.mark.parametrize(("exc", "gone"), [
    (pymysql.err.OperationalError(2006, "MySQL server has gone away"), True),
    (pymysql.err.OperationalError(2013, "Lost connection to server during query"), True),
    (pymysql.err.OperationalError(4031, "The client was disconnected by the server"), True),
    (pymysql.err.OperationalError(1205, "Lock wait timeout exceeded"), False),
    (pymysql.err.IntegrityError(1062, "Duplicate entry"), False),
    (pymysql.err.InterfaceError("(0, '')"), False),
    (ValueError(2013), False),
])
def test_only_a_connection_gone_is_lost(exc: BaseException, gone: bool) -> None:
    assert lost(exc) is gone


class Server:
    """The buffer's rows; each connection's cursor answers the door's queries, and the
    first connection is lost at the query ``cut_at``."""

    def __init__(self, rows: list[tuple[Any, ...]], cut_at: int) -> None:
        self.rows, self.cut_at, self.connections, self.queries = rows, cut_at, 0, 0

    def connect(self, *_: Any, **__: Any) -> Connection:
        self.connections += 1
        return Connection(self, self.connections)


class Connection:
    def __init__(self, server: Server, number: int) -> None:
        self.server, self.number, self.open = server, number, True

    def cursor(self) -> Cursor:
        return Cursor(self)

    def close(self) -> None:
        self.open = False


class Cursor:
    def __init__(self, conn: Connection) -> None:
        self.conn, self.answer, self.description = conn, [], None

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *_: Any) -> None:
        pass

    def execute(self, sql: str, args: Any = None) -> None:
        server = self.conn.server
        server.queries += 1
        if self.conn.number == 1 and server.queries == server.cut_at:
            raise pymysql.err.OperationalError(2013, "Lost connection to server during query")
        self.description = None
        if "information_schema.TABLES" in sql:
            self.answer = [(9,)]  # the retl tables are there
        elif "PIPELINE_ID IS NULL OR" in sql:  # the orphans of the channel's first pipeline
            self.answer = [row for row in server.rows if row[5] not in args[1:-1]]
            self.description = [(name,) for name in COLUMNS]
        elif sql.startswith("SELECT ID FROM"):
            self.answer = [(row[0],) for row in server.rows if row[5] == args[1]]
        elif sql.startswith("SELECT ID, FULL_NAME"):
            self.answer = [row for row in server.rows if row[0] in args]
            self.description = [(name,) for name in COLUMNS]
        else:  # the count
            self.answer = [(sum(row[5] == args[1] for row in server.rows),)]

    def fetchall(self) -> list[Any]:
        return list(self.answer)

    def fetchone(self) -> Any:
        return self.answer[0]


def test_orphans_of_a_read_cut_off_are_taken_again_on_the_new_connection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first pipeline of a channel takes rows naming no pipeline of it, to reject
    them: a read lost after its orphans were read noted them as taken, and the read made
    again on a new connection left them out: never rejected, never deleted."""
    server = Server([(1, "s.t", "I", "[1]", "c", "nobody"), (2, "s.t", "I", "[2]", "c", "fwd")],
                    cut_at=3)  # the retl check, the orphans, then the ids: lost
    monkeypatch.setattr(freedoor, "connect", server.connect)
    door = CentralDoor(DataSource("buffer", "127.0.0.1", 3306, "u", SecretRef("env:X")), "c",
                       "fwd", slice=10, siblings=("fwd",))
    taken = door.take(10)
    assert server.connections == 2
    assert sorted((int(change.after["ID"]), "reject" in change.after) for change in taken) \
        == [(1, True), (2, False)]
