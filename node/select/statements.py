"""What a query event of the binlog is to Select: a transaction's start or end, a savepoint
inside one, the opposite pipeline's DDL on a two-way channel, a DDL, or something Select
must stop at (an XA transaction, a statement inside a transaction). Plain text in, a kind
out: tested without a server (tests/unit/test_statements.py)."""

from __future__ import annotations

import re

from shared.retl import loop_comment

BEGIN, END, SAVEPOINT, XA, INSIDE, ECHO, DDL = (
    "begin", "end", "savepoint", "xa", "inside", "echo", "ddl")
# statements a transaction may hold in the binlog besides its rows (Django's nested atomic(),
# SQLAlchemy's begin_nested() and Spring's NESTED propagation issue them): what a rollback to
# a savepoint undid is mostly not in the binlog; where it is, node.select.rollbacks drops it
_SAVEPOINT = re.compile(r"(SAVEPOINT|ROLLBACK\s+(WORK\s+)?TO|RELEASE\s+SAVEPOINT)\s",
                        re.IGNORECASE)
# DDL that MariaDB may log inside a transaction's group (CREATE TABLE … SELECT: the statement,
# then its rows)
_DDL_WORDS = {"CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE"}


def kind(query: str, in_transaction: bool, loop_channel: str | None) -> str:
    """The kind of a query event's (stripped) text, read inside a transaction or not; a
    ROLLBACK that ends a binlog transaction ends it like a COMMIT, its transactional rows
    dropped (node.select.rollbacks: its non-transactional changes stay)."""
    upper = query.upper()
    if upper == "BEGIN":
        return BEGIN
    if upper in ("COMMIT", "ROLLBACK"):
        return END
    if upper.startswith("XA "):
        return XA
    if in_transaction and upper.split(None, 1)[0] not in _DDL_WORDS:
        return SAVEPOINT if _SAVEPOINT.match(query + " ") else INSIDE
    if loop_channel is not None and query.startswith(loop_comment(loop_channel)):
        return ECHO
    return DDL
