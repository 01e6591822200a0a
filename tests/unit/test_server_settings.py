"""Server settings setl must not inherit: a server's default ``sql_select_limit`` (every
connection reads every row)."""

from __future__ import annotations

from shared.endpoint import ALL_ROWS, Connection, all_rows


def test_every_connection_reads_every_row_whatever_the_servers_sql_select_limit() -> None:
    """A global sql_select_limit of 50 cut every snapshot chunk and verify's reads to 50
    rows: each connection sets the session's limit to the most, in the SET of its own
    init_command, or apart where that is another statement."""
    assert all_rows(None) == ("SET " + ALL_ROWS, False)
    assert all_rows("SET time_zone = '+00:00'") == (
        f"SET {ALL_ROWS}, time_zone = '+00:00'", False)
    assert all_rows("set @x = @@global.binlog_checksum") == (
        f"SET {ALL_ROWS}, @x = @@global.binlog_checksum", False)
    for apart in ("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
                  "SET TRANSACTION READ ONLY", "SELECT 1"):
        assert all_rows(apart) == (apart, True)
    conn = Connection(host="127.0.0.1", defer_connect=True, init_command="SET time_zone = 'x'")
    assert conn.init_command == f"SET {ALL_ROWS}, time_zone = 'x'"
    assert Connection(host="127.0.0.1", defer_connect=True).init_command == "SET " + ALL_ROWS
