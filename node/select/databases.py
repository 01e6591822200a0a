"""The source databases' default charset and collation as Select reads the binlog: CREATE
and ALTER DATABASE are followed, so a CREATE TABLE carries its database's defaults as they
are at its point of the binlog (its target database is made with them)."""

from __future__ import annotations

from node import ddlsession
from node.changes import Session
from node.ddl import database_options, parse_database
from node.ddl import parse as parse_ddl


class SourceDatabases:
    def __init__(self, facts: ddlsession.SourceFacts) -> None:
        self._facts = facts
        self._known: dict[str, tuple[str, str]] = {}  # default (charset, collation)

    def read(self) -> None:
        """Every database's defaults now (where the reader starts; DDL keeps them up to
        date)."""
        self._known = self._facts.databases()

    def follow(self, statement: str, schema: str, session: Session) -> Session:
        """The DDL statement's session, with its database's defaults for a CREATE TABLE."""
        mode = ddlsession.sql_mode(session)
        database = parse_database(statement, schema, mode)
        if database is not None:
            found = self._facts.defaults(*database_options(statement, mode))
            server = dict(session).get("collation_server")
            if found is None and database.kind == "CREATE" and server:
                found = self._facts.defaults(None, server)
            if found is not None:
                self._known[database.schema] = found
            return session
        table = parse_ddl(statement, schema, mode)
        known = self._known.get(table.names[0].schema) \
            if table is not None and table.kind == "CREATE" else None
        return (*session, (ddlsession.DATABASE_DEFAULTS, known)) if known else session
