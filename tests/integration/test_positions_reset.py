"""``setl position`` after a reset and by GTID, on real servers: a reset forgets where the
pipeline starts, not what the targets hold (a later set earlier than they were is a replay
still); a set is where the next start begins, and ``channel start`` says so; a GTID is
checked when it is set (its form, the source's end) and a move forward by it is a skip. The
keyless table ``kl`` carries duplicate rows through every move, compared as multisets (and
the Shapes workload beside it where a replay is refused and the pipeline goes on)."""

from __future__ import annotations

from manager import cli
from tests.devcluster import Database, wait_equal
from tests.integration.test_positions_replay import keyless, start, stop


def test_a_reset_then_a_set_earlier_than_the_targets_were_is_a_replay_still(
        sandbox, tmp_path, capsys):
    """The reset blanks the target's row (the next start begins at start: latest); a set to
    a place before the rows the target still holds is refused as a replay (without
    --replay, then over the keyless table without --keyless-duplicates), as before the
    reset. The start that follows begins at the source's end: nothing loaded twice."""
    with keyless(sandbox, tmp_path, "forgot", 71) as (cluster, source, target, schema,
                                                      shapes):
        kl = f"`{schema}`.kl"
        position = ["--manager", cluster.manager_address, "position"]
        start(cluster, "forgot", schema, shapes)
        cluster.wait_running("forgot")
        shapes.start()
        file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
        for n in range(6):
            source.execute(f"INSERT INTO {kl} VALUES ({n % 2}, 'dup'), ({n % 2}, 'dup')")
        wait_equal(source, target, schema, ["kl"])
        shapes.keep_on()
        shapes.settle(source)
        stop(cluster, "forgot")
        [(row_file, row_pos)] = target.rows("SELECT binlog_file, binlog_pos FROM "
                                            "retl.retl_position WHERE pipeline_id = "
                                            "'forgot.forward'")
        capsys.readouterr()
        assert cli.main([*position, "reset", "forgot"]) == 0
        assert target.rows("SELECT binlog_file FROM retl.retl_position WHERE pipeline_id = "
                           "'forgot.forward'") == [("",)]
        capsys.readouterr()
        assert cli.main([*position, "set", "forgot/forward", "--file", file, "--pos",
                         str(pos)]) == 1
        refused = capsys.readouterr().err
        assert f"holds pipeline forgot.forward's transactions up to {row_file}:{row_pos}" in \
            refused and "--replay" in refused, refused
        assert cli.main([*position, "set", "forgot/forward", "--file", file, "--pos",
                         str(pos), "--replay"]) == 1
        refused = capsys.readouterr().err
        assert "takes keyless tables: " in refused and f"{schema}.kl" in refused, refused
        assert cli.main([*position, "reset", "forgot"]) == 0  # (a second reset keeps it too)
        assert cli.main([*position, "set", "forgot/forward", "--file", file, "--pos",
                         str(pos)]) == 1
        assert "--replay" in capsys.readouterr().err
        assert cli.main(["--manager", cluster.manager_address, "channel", "start", "forgot",
                         "--wait"]) == 0
        shapes.start()
        source.execute(f"INSERT INTO {kl} VALUES (5, 'after the reset'), (5, 'after the "
                       "reset')")
        wait_equal(source, target, schema, ["kl"])
        shapes.keep_on()
        shapes.finish(source)
        assert len(target.table(schema, "kl")) == 14


def test_a_set_is_where_the_start_says_it_begins_and_a_gtid_is_checked_when_set(
        sandbox, tmp_path, capsys):
    """After a run (its figures published), a set forward by file/pos is what the next
    ``channel start`` prints, not where the last run was. A GTID not of MariaDB's form, or
    past the source's end, is refused at the set, saying which (not taken for a replay);
    one forward is a skip: set without --replay, printed by the start, and the pipeline
    goes on from it. ``side`` (not replicated) takes the writes skipped."""
    with keyless(sandbox, tmp_path, "moved", 73) as (cluster, source, target, schema,
                                                     shapes):
        kl, side = f"`{schema}`.kl", f"`{schema}`.side"
        source.execute(f"CREATE TABLE {side} (a INT)")
        position = ["--manager", cluster.manager_address, "position"]
        channel = ["--manager", cluster.manager_address, "channel"]
        start(cluster, "moved", schema, shapes)
        cluster.wait_running("moved")
        source.execute(f"INSERT INTO {kl} VALUES (1, 'dup'), (1, 'dup')")
        wait_equal(source, target, schema, ["kl"])
        assert cli.main([*channel, "stop", "moved", "--wait"]) == 0
        source.execute(f"INSERT INTO {side} VALUES (1)")  # skipped by the set below
        file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
        capsys.readouterr()
        assert cli.main([*position, "set", "moved/forward", "--file", file, "--pos",
                         str(pos)]) == 0
        assert "are skipped" in capsys.readouterr().out
        assert cli.main([*channel, "start", "moved", "--wait"]) == 0
        assert f"moved.forward: from {file}:{pos} " in capsys.readouterr().out
        source.execute(f"INSERT INTO {kl} VALUES (2, 'dup'), (2, 'dup')")
        wait_equal(source, target, schema, ["kl"])
        assert cli.main([*channel, "stop", "moved", "--wait"]) == 0
        [(row,)] = target.rows("SELECT binlog_pos FROM retl.retl_position WHERE "
                               "pipeline_id = 'moved.forward'")
        [(state,)] = source.rows("SELECT @@gtid_binlog_pos")
        domain, server, sequence = (int(part) for part in state.split(",")[0].split("-"))
        capsys.readouterr()
        assert cli.main([*position, "set", "moved/forward", "--gtid", "garbage",
                         "--replay"]) == 1
        refused = capsys.readouterr().err
        assert "--gtid 'garbage' is not a MariaDB GTID position" in refused and \
            "domain-server-seq[,…]" in refused, refused
        past = f"{domain}-{server}-{sequence + 100000}"
        assert cli.main([*position, "set", "moved/forward", "--gtid", past, "--replay"]) == 1
        refused = capsys.readouterr().err
        assert f"has not written {past}" in refused and "past its end" in refused, refused
        assert "load again" not in refused
        assert target.rows("SELECT binlog_pos FROM retl.retl_position WHERE pipeline_id = "
                           "'moved.forward'") == [(row,)]  # nothing moved
        source.execute(f"INSERT INTO {side} VALUES (2)")  # skipped by the GTID set below
        [(ahead,)] = source.rows("SELECT @@gtid_binlog_pos")
        assert cli.main([*position, "set", "moved/forward", "--gtid", ahead]) == 0
        assert "are skipped" in capsys.readouterr().out
        assert cli.main([*channel, "start", "moved", "--wait"]) == 0
        assert f"moved.forward: from {ahead}" in capsys.readouterr().out
        source.execute(f"INSERT INTO {kl} VALUES (3, 'dup'), (3, 'dup')")
        wait_equal(source, target, schema, ["kl"])
        assert len(target.table(schema, "kl")) == 6
        other = Database(sandbox, "target")
        try:
            assert other.rows(f"SHOW TABLES FROM `{schema}` LIKE 'side'") == []
        finally:
            other.close()
