"""node/target/kinds.py: a pipeline's targets' type chooses the kind of target that loads
them; one pipeline writes one kind."""

from __future__ import annotations

import pytest

from node.target import kinds
from shared.errors import ConfigError
from shared.model import DataSource


def source(name: str, kind: str) -> DataSource:
    return DataSource(name, "127.0.0.1", 3306, "setl", None, kind)


def test_mysql_and_mariadb_targets_are_one_kind() -> None:
    assert kinds.kind_of("c.p", {"a": source("a", "mysql"), "b": source("b", "mariadb")}) == \
        "mysql"


def test_an_unknown_type_is_refused_with_what_setl_writes() -> None:
    with pytest.raises(ConfigError, match=r"pipeline c.p: target pg has type 'postgres'; "
                                          r"setl writes delta, mariadb, mysql"):
        kinds.kind_of("c.p", {"pg": source("pg", "postgres")})


def test_a_pipeline_writes_one_kind() -> None:
    with pytest.raises(ConfigError, match="writes targets of different kinds"):
        kinds.kind_of("c.p", {"a": source("a", "mysql"), "b": source("b", "delta")})
