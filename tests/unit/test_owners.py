"""node/target/mysql/owners.py ``one_server`` where GET_LOCK is not there: a Galera node
before MDEV-31325 answers it with error 1235, and the servers then say who they are (the
lock path runs on real servers in tests/integration/test_load.py)."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from node.target.mysql.owners import one_server
from shared.errors import ConfigError


class GaleraNode:
    """A connection to a server that refuses GET_LOCK and tells its identity."""

    def __init__(self, identity: tuple[Any, ...]) -> None:
        self.identity, self.committed, self.asked = identity, 0, []

    def cursor(self) -> GaleraNode:
        return self

    def __enter__(self) -> GaleraNode:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def execute(self, sql: str, args: Any = None) -> None:
        self.asked.append(sql)
        if "GET_LOCK" in sql:
            raise pymysql.err.NotSupportedError(
                1235, "This version of MariaDB doesn't yet support 'GET_LOCK in cluster "
                "(WSREP_ON=ON)'")

    def fetchone(self) -> tuple[Any, ...]:
        return self.identity

    def commit(self) -> None:
        self.committed += 1


def test_galera_nodes_are_told_apart_by_what_they_say_they_are() -> None:
    one, two = GaleraNode(("db1", 3306, "/var/lib/mysql/", 1)), \
        GaleraNode(("db2", 3306, "/var/lib/mysql/", 2))
    one_server("c.p", {"a": one, "b": two})
    assert one.committed and two.committed
    assert not any("RELEASE_LOCK" in sql for sql in one.asked + two.asked)
    same = GaleraNode(("db1", 3306, "/var/lib/mysql/", 1))
    with pytest.raises(ConfigError, match="targets a and c are one server"):
        one_server("c.p", {"a": one, "b": two, "c": same})
