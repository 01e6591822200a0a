"""``setl check``: the sandbox's servers as set up pass; misconfigured on purpose (ROW → MIXED,
row image MINIMAL, a user without REPLICATION SLAVE, a tiny max_allowed_packet) each problem is
named with its fix, and the exit code says whether a pipeline would stop."""

from __future__ import annotations

import json
import uuid
from typing import Any

from manager import cli
from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, make_schema, one_way

TABLE = "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY)"


def check(cluster: Cluster, capsys: Any, role: str, name: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = cli.main(["--manager", cluster.manager_address, "--config",
                     str(cluster.workdir / "node.yaml"), "-o", "json", "check", role, name])
    out = capsys.readouterr()
    assert code in (0, 1), out.err
    return code, json.loads(out.out)


def whats(report: dict, severity: str = "error") -> dict[str, str]:
    return {f["what"]: f["fix"] for f in report["findings"] if f["severity"] == severity}


def test_check_names_each_problem_and_its_fix(cluster: Cluster, source: Database,
                                              target: Database, sandbox: Sandbox,
                                              capsys: Any) -> None:
    schema = make_schema(source, target, TABLE)
    cluster.apply([one_way("checked", schema, ["items"])])
    code, report = check(cluster, capsys, "source", "source")
    assert code == 0 and whats(report) == {}, report
    assert check(cluster, capsys, "target", "target")[0] == 0
    user = f"chk{uuid.uuid4().hex[:6]}"
    secret = sandbox.secret_file.parent / user
    secret.write_text("chk-pass-1\n")
    before = {name: value for name, value in source.rows(
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('binlog_format', 'binlog_row_image', "
        "'sync_binlog')")}
    packet, zone = target.rows("SELECT @@GLOBAL.max_allowed_packet, @@GLOBAL.time_zone")[0]
    try:
        # a source whose machine's crash may lose transactions setl copied: said
        source.execute("SET GLOBAL sync_binlog = 0")
        code, report = check(cluster, capsys, "source", "source")
        assert code == 0 and whats(report, "warning")["sync_binlog"] == \
            "SET GLOBAL sync_binlog = 1; and sync_binlog = 1 in my.cnf", report
        source.script("SET GLOBAL binlog_format = 'MIXED'",
                      "SET GLOBAL binlog_row_image = 'MINIMAL'")
        code, report = check(cluster, capsys, "source", "source")
        assert code == 1
        assert whats(report)["binlog_format"] == "SET GLOBAL binlog_format = 'ROW'; and " \
                                                 "binlog_format = ROW in my.cnf"
        assert "binlog_row_image" in whats(report)
        capsys.readouterr()  # channel start runs the same checks: refused, with the fixes
        assert cli.main(["--manager", cluster.manager_address, "channel", "start",
                         "checked"]) == 1
        refused = capsys.readouterr().err
        assert "channel checked was not started: 2 problem(s) would stop its pipelines" in \
            refused
        assert "binlog_format is MIXED; setl needs ROW; fix: SET GLOBAL binlog_format = " \
            "'ROW'" in refused
        assert cluster.channel_status("checked") == "STOP"
        # readers of the target see TIMESTAMPs in its own zone: said, not an error
        target.execute("SET GLOBAL time_zone = '+05:00'")
        code, report = check(cluster, capsys, "target", "target")
        assert code == 0, report
        assert whats(report, "warning")["time_zone"].startswith("SET GLOBAL time_zone = '"), \
            report
        # a target that cannot take a row as large as its source may send stops a pipeline
        target.execute("SET GLOBAL max_allowed_packet = 1048576")
        code, report = check(cluster, capsys, "target", "target")
        assert code == 1 and whats(report)["max_allowed_packet"].startswith(
            "SET GLOBAL max_allowed_packet = "), report
        # a user that may read the tables but not the binlog
        source.script(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'chk-pass-1'",
                      f"GRANT SELECT ON `{schema}`.* TO '{user}'@'%'")
        port = sandbox.servers()["source"].port
        weak = one_way("checked2", schema, ["items"])
        weak["pipelines"][0]["source"] = "weak"
        errors = cluster.apply_errors([weak], [
            {"name": "weak", "host": "127.0.0.1", "port": port, "user": user,
             "password": f"file:{secret}"}])
        assert errors == [], errors
        capsys.readouterr()
        assert cli.main(["--manager", cluster.manager_address, "--config",
                         str(cluster.workdir / "node.yaml"), "check", "source", "weak"]) == 1
        out = capsys.readouterr().out
        assert f"GRANT REPLICATION SLAVE ON *.* TO '{user}'@'%';" in out
        assert f"GRANT ALL ON retl.* TO '{user}'@'%';" in out
        assert "SELECT on" not in out  # it may read the replicated schema
    finally:
        source.script(*(f"SET GLOBAL {name} = " + (value if value.isdigit() else f"'{value}'")
                        for name, value in before.items()))
        target.execute(f"SET GLOBAL max_allowed_packet = {packet}")
        target.execute(f"SET GLOBAL time_zone = '{zone}'")
        source.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        secret.unlink()
    cluster.set_status("checked", "START")  # set right again: it starts
    cluster.set_status("checked", "STOP")
