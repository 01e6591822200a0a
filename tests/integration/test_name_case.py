"""A target that folds table names (lower_case_table_names=1, on a fresh datadir) would
merge two tables a case-keeping source holds apart (``Users`` and ``users``): the start
reads the target's setting and refuses, naming both tables; a pair that keeps them apart
starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.extract.etl import CompiledPipeline
from node.target import kinds
from shared.errors import ConfigError
from shared.model import DataSource
from shared.sandbox import Sandbox, free_port
from shared.sandbox_servers import MariaDBKind, ServerSpec, launch
from shared.secrets import SecretRef
from tests.devcluster import Database
from tests.unit.test_etl import pipeline


def test_a_target_that_folds_names_refuses_two_tables_it_would_merge(
        sandbox: Sandbox, source: Database, tmp_path: Path) -> None:
    schema = "Cs_" + tmp_path.name[-8:].replace("-", "_")
    source.script(f"CREATE DATABASE `{schema}`",
                  f"CREATE TABLE `{schema}`.Users (id INT PRIMARY KEY)",
                  f"CREATE TABLE `{schema}`.users (id INT PRIMARY KEY)")
    spec = ServerSpec("foldeddb", "mariadb", 43, extra_args=("--lower-case-table-names=1",))
    server, port = launch(MariaDBKind(), spec, tmp_path / "foldeddb", sandbox.password(),
                          "setl", lambda attempt: free_port(), 60)
    secret = SecretRef(f"file:{sandbox.secret_file}")
    origin = DataSource("src", "127.0.0.1", sandbox.servers()["source"].port, "setl", secret)
    targets = {"dst": DataSource("dst", "127.0.0.1", port, "setl", secret)}
    each = f"{{source: {{namespace: {schema}, table: 're:.*'}}, target: {{namespace: " \
           f"copy, table: '{{table}}'}}}}"
    try:
        folding = CompiledPipeline.compile("shop.fwd", 1, pipeline(each))
        with pytest.raises(ConfigError) as caught:
            kinds.check_source("mysql", folding, origin, targets=targets)
        assert f"`{schema}`.`Users` and `{schema}`.`users` go to `copy`.`Users` and " \
            "`copy`.`users` on target dst, which compares table names without case " \
            "(lower_case_table_names=1)" in str(caught.value)
        apart = CompiledPipeline.compile("shop.fwd", 1, pipeline(
            f"{{source: {schema}.Users, target: copy.users_2}}", each))
        kinds.check_source("mysql", apart, origin, targets=targets)
    finally:
        source.execute(f"DROP DATABASE `{schema}`")
        server.terminate()
        server.wait(60)
