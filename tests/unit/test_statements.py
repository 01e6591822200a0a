"""node/select/statements.py: what a query event's text is to Select."""

from __future__ import annotations

import pytest

from node.select import statements as s
from shared.retl import loop_comment


@pytest.mark.parametrize("query,inside,expected", [
    ("BEGIN", False, s.BEGIN),
    ("COMMIT", True, s.END),
    ("ROLLBACK", True, s.END),  # a binlog transaction with non-transactional changes
    ("SAVEPOINT s1", True, s.SAVEPOINT),
    ("savepoint `nested one`", True, s.SAVEPOINT),
    ("ROLLBACK TO SAVEPOINT s1", True, s.SAVEPOINT),
    ("ROLLBACK WORK TO s1", True, s.SAVEPOINT),
    ("rollback to s1", True, s.SAVEPOINT),
    ("RELEASE SAVEPOINT s1", True, s.SAVEPOINT),
    ("XA START 'x'", False, s.XA),
    ("XA COMMIT 'x'", False, s.XA),
    ("INSERT INTO t VALUES (1)", True, s.INSIDE),  # a session in STATEMENT format
    ("SAVEPOINTX", True, s.INSIDE),
    ("CREATE TABLE t2 SELECT * FROM t", True, s.DDL),  # MariaDB's CREATE … SELECT group
    ("ALTER TABLE t ADD c INT", False, s.DDL),
    ("SAVEPOINT s1", False, s.DDL),  # outside a transaction nothing is skipped silently
])
def test_kinds(query: str, inside: bool, expected: str) -> None:
    assert s.kind(query, inside, None) == expected


def test_the_opposite_pipelines_ddl_is_known_by_its_channels_loop_comment() -> None:
    ddl = loop_comment("shop") + "ALTER TABLE t ADD INDEX (b)"
    assert s.kind(ddl, False, "shop") == s.ECHO
    assert s.kind(ddl, False, "other") == s.DDL
    assert s.kind(ddl, False, None) == s.DDL
