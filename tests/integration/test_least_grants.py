"""The README's grants are what a one-way pipeline needs: a channel whose source and target
users hold exactly the statements of the README's quick start (read from README.md, so the
two cannot drift apart) passes ``setl check``, copies the rows there are (``start:
snapshot``), streams what is written after, and verifies equal (ddl_sync, the free door and
repair are not run here); a replica set's source asks the README's line for it. The
sandbox's own user has ALL, which hid a statement that needed a right the README does not
grant. A right taken away while the pipeline runs is said as such, and granted again the
pipeline goes on."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from manager import cli
from shared import preflight
from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside

README = Path(__file__).resolve().parents[2] / "README.md"
TABLE = "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, note VARCHAR(20))"


def readme_grants(user: str, schema: str, replica_set: bool = False
                  ) -> tuple[list[str], list[str]]:
    """The README's GRANT statements for the source and for a target, made out to ``user``
    on ``schema`` (the README's ``shop`` and ``shop_copy``); a replica set's (a line said to
    be for one) only with ``replica_set``."""
    text = README.read_text()
    block = text[text.index("-- on the source"):]
    block = block[:block.index("```")]
    on_source, on_target = block.split("-- on each target")

    def grants(part: str) -> list[str]:
        return [line.split("--")[0].strip().rstrip(";")
                .replace("setl@'%'", f"'{user}'@'%'")
                .replace("shop_copy.*", f"`{schema}`.*").replace("shop.*", f"`{schema}`.*")
                for line in part.splitlines() if line.strip().startswith("GRANT")
                and ("replica set" in line) == replica_set]
    return grants(on_source), grants(on_target)


def setl(cluster: Cluster, capsys: Any, *args: str) -> tuple[int, str, str]:
    """``setl ARGS``: its exit code, what it printed and what it said on stderr."""
    capsys.readouterr()
    code = cli.main(["--manager", cluster.manager_address, "--config",
                     str(cluster.workdir / "node.yaml"), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@contextlib.contextmanager
def readme_user(sandbox: Sandbox, source: Database, target: Database,
                schema: str) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A user on source and target with the README's grants, and source definitions
    ``source`` and ``target`` that connect as it; dropped at the end."""
    user = f"least{uuid.uuid4().hex[:6]}"
    secret = sandbox.secret_file.parent / user
    secret.write_text("least-pass-1\n")
    secret.chmod(0o600)
    on_source, on_target = readme_grants(user, schema)
    assert len(on_source) >= 3 and len(on_target) >= 2, (on_source, on_target)
    servers = sandbox.servers()
    definitions = [{"name": name, "host": "127.0.0.1", "port": servers[name].port,
                    "user": user, "password": f"file:{secret}"} for name in ("source", "target")]
    try:
        for db, grants in ((source, on_source), (target, on_target)):
            db.script(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'least-pass-1'", *grants)
        yield user, definitions
    finally:
        for db in (source, target):
            db.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        secret.unlink()


def test_a_channel_runs_with_only_the_grants_the_readme_lists(
        cluster: Cluster, source: Database, target: Database, sandbox: Sandbox,
        capsys: Any) -> None:
    schema = make_schema(source, target, TABLE)
    source.script(*(f"INSERT INTO `{schema}`.items VALUES ({i}, 'before')" for i in range(1, 41)))
    with readme_user(sandbox, source, target, schema) as (_, definitions):
        cluster.apply([one_way("least", schema, ["items"], start="snapshot")], definitions)
        try:
            for role in ("source", "target"):
                code, out, err = setl(cluster, capsys, "-o", "json", "check", role, role)
                assert code == 0, (out, err)
            code, out, err = setl(cluster, capsys, "channel", "start", "least", "--wait")
            assert code == 0, (out, err)
            source.script(*(f"INSERT INTO `{schema}`.items VALUES ({i}, 'after')"
                            for i in range(41, 61)),
                          f"UPDATE `{schema}`.items SET note = 'changed' WHERE id % 3 = 0",
                          f"DELETE FROM `{schema}`.items WHERE id % 7 = 0")
            wait_equal(source, target, schema, ["items"], 90)
            assert cluster.pipeline_state("least").state == "running"
            code, out, err = setl(cluster, capsys, "-o", "json", "verify", "least")
            assert code == 0, (out, err)
            [report] = json.loads(out)["reports"]
            assert [table["table"] for table in report["tables"]] == [f"{schema}.items"], \
                report
        finally:
            setl(cluster, capsys, "channel", "stop", "least", "--wait")


def test_a_right_taken_away_is_said_and_granted_again_the_pipeline_goes_on(
        cluster: Cluster, source: Database, target: Database, sandbox: Sandbox,
        capsys: Any) -> None:
    """Batches refused and retried: the keyless, unique-swap and sum tables written through
    it end equal as multisets, every promise kept on the target meanwhile."""
    shapes = Shapes(sandbox, source, target, seed=97, kinds=3)
    schema = shapes.schema
    for db in (source, target):
        db.execute(TABLE.format(schema=schema))
    with readme_user(sandbox, source, target, schema) as (user, definitions):
        cluster.apply([beside(one_way("revoked", schema, ["items"], max_retries=100),
                              schema)], definitions)
        try:
            code, out, err = setl(cluster, capsys, "channel", "start", "revoked", "--wait")
            assert code == 0, (out, err)
            shapes.start()
            source.execute(f"INSERT INTO `{schema}`.items VALUES (1, 'granted')")
            wait_equal(source, target, schema, ["items"], 60)
            target.execute(f"REVOKE INSERT ON `{schema}`.* FROM '{user}'@'%'")
            for (pid,) in target.rows("SELECT ID FROM information_schema.PROCESSLIST "
                                      "WHERE USER = %s", (user,)):
                target.execute(f"KILL CONNECTION {int(pid)}")  # (a database right is read
                # by a connection once: its next one is refused)
            source.execute(f"INSERT INTO `{schema}`.items VALUES (2, 'refused')")
            wait_for(lambda: "lacks a right this needs: grant it" in
                     cluster.pipeline_state("revoked").last_error, 60,
                     "the pipeline to say its user lacks a right")
            assert "INSERT command denied" in cluster.pipeline_state("revoked").last_error
            shapes.keep_on(transactions=30, reads=5)  # written while refused
            target.execute(f"GRANT INSERT ON `{schema}`.* TO '{user}'@'%'")
            wait_equal(source, target, schema, ["items"], 90)
            wait_for(lambda: cluster.pipeline_state("revoked").state == "running", 30,
                     "the pipeline to run again")
            shapes.keep_on()
            shapes.finish(source)
        finally:
            shapes.stop()
            setl(cluster, capsys, "channel", "stop", "revoked", "--wait")


def test_a_replica_set_source_asks_the_readme_s_replica_set_grant(
        source: Database, target: Database, sandbox: Sandbox) -> None:
    """Following a replica set, setl asks each member whether it still replicates (SHOW SLAVE
    STATUS, which MariaDB 10.5+ refuses without SLAVE MONITOR: a switch would then take a
    replica that has not caught up): ``setl check`` names the right, and the README's
    replica-set line grants it."""
    schema = make_schema(source, target, TABLE)
    [for_replica_set], _ = readme_grants("x", schema, replica_set=True)
    assert "SLAVE MONITOR" in for_replica_set, for_replica_set
    with readme_user(sandbox, source, target, schema) as (user, _):
        settings = {**sandbox.connection("source"), "user": user, "password": "least-pass-1"}
        with pymysql.connect(**settings) as conn, conn.cursor() as cursor:
            found = {f.what for f in preflight.source_findings(cursor, [schema], [],
                                                               replica_set=True)}
            assert "SLAVE MONITOR" in found, found
            assert "SLAVE MONITOR" not in {f.what for f in preflight.source_findings(
                cursor, [schema], [])}
            with pytest.raises(pymysql.MySQLError, match="SLAVE MONITOR"):
                cursor.execute("SHOW SLAVE STATUS")
        [grant], _ = readme_grants(user, schema, replica_set=True)
        source.execute(grant)
        with pymysql.connect(**settings) as conn, conn.cursor() as cursor:
            found = {f.what for f in preflight.source_findings(cursor, [schema], [],
                                                               replica_set=True)}
            assert "SLAVE MONITOR" not in found, found
            cursor.execute("SHOW SLAVE STATUS")  # what members.probe asks: answered
