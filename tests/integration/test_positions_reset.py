"""``setl position`` after a reset and by GTID, on real servers: a reset forgets where the
pipeline starts, not what the targets hold (a later set earlier than they were is a replay
still); a set is where the next start begins, and ``channel start`` says so; a GTID is
checked when it is set (its form, the source's end) and a move forward by it is a skip. The
keyless table ``kl`` carries duplicate rows through every move, compared as multisets (and
the Shapes workload beside it where a replay is refused and the pipeline goes on)."""

from __future__ import annotations

from collections import Counter

from manager import cli
from tests.devcluster import Database, wait_equal, wait_for
from tests.integration.test_positions_replay import keyless, pipeline, start, stop


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
    one forward, on a source that runs gtid_strict_mode, is a skip: set without --replay,
    printed by the start, and the pipeline goes on from it. The rows of ``kl`` written in
    between ('skipped') never reach the target."""
    with keyless(sandbox, tmp_path, "moved", 73) as (cluster, source, target, schema,
                                                     shapes):
        kl = f"`{schema}`.kl"
        position = ["--manager", cluster.manager_address, "position"]
        channel = ["--manager", cluster.manager_address, "channel"]
        start(cluster, "moved", schema, shapes)
        cluster.wait_running("moved")
        source.execute(f"INSERT INTO {kl} VALUES (1, 'dup'), (1, 'dup')")
        wait_equal(source, target, schema, ["kl"])
        assert cli.main([*channel, "stop", "moved", "--wait"]) == 0
        source.execute(f"INSERT INTO {kl} VALUES (9, 'skipped')")  # skipped by the set below
        file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
        capsys.readouterr()
        assert cli.main([*position, "set", "moved/forward", "--file", file, "--pos",
                         str(pos)]) == 0
        assert "are skipped" in capsys.readouterr().out
        assert cli.main([*channel, "start", "moved", "--wait"]) == 0
        assert f"moved.forward: from {file}:{pos} " in capsys.readouterr().out
        source.execute(f"INSERT INTO {kl} VALUES (2, 'dup'), (2, 'dup')")
        loaded = Counter({(1, "dup"): 2, (2, "dup"): 2})
        wait_for(lambda: Counter(target.table(schema, "kl")) == loaded, 60, "kl loaded")
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
        source.execute("SET GLOBAL gtid_strict_mode = ON")
        try:
            source.execute(f"INSERT INTO {kl} VALUES (9, 'skipped')")  # by the set below
            [(ahead,)] = source.rows("SELECT @@gtid_binlog_pos")
            assert cli.main([*position, "set", "moved/forward", "--gtid", ahead]) == 0
            assert "are skipped" in capsys.readouterr().out
            assert cli.main([*channel, "start", "moved", "--wait"]) == 0
            assert f"moved.forward: from {ahead}" in capsys.readouterr().out
            source.execute(f"INSERT INTO {kl} VALUES (3, 'dup'), (3, 'dup')")
            loaded[(3, "dup")] = 2
            wait_for(lambda: Counter(target.table(schema, "kl")) == loaded, 60, "kl loaded")
        finally:
            source.execute("SET GLOBAL gtid_strict_mode = OFF")


def test_a_gtid_of_a_source_without_strict_mode_is_a_replay_it_cannot_tell(
        sandbox, tmp_path, capsys):
    """gtid_strict_mode OFF (MariaDB's default): a multi-source replica logs a later
    transaction with a lower number in a domain (origin 502's 77-502-5 after origin 501's
    77-501-100). A set to the GTID after the first was taken for a skip by its state and
    loaded the second's keyless row twice (a review): it is refused, saying setl cannot
    tell, then over the keyless table; told both, it loads that row again, as asked."""
    with keyless(sandbox, tmp_path, "origins", 83) as (cluster, source, target, schema,
                                                       shapes):
        kl = f"`{schema}`.kl"
        position = ["--manager", cluster.manager_address, "position"]
        start(cluster, "origins", schema, shapes)
        cluster.wait_running("origins")
        other = Database(sandbox, "source")
        try:
            other.execute("SET SESSION gtid_domain_id = 77, server_id = 501, gtid_seq_no = 100")
            other.execute(f"INSERT INTO {kl} VALUES (1, 'origin 501')")
            [(after_first,)] = other.rows("SELECT @@gtid_binlog_pos")
            other.execute("SET SESSION server_id = 502, gtid_seq_no = 5")
            other.execute(f"INSERT INTO {kl} VALUES (2, 'origin 502')")
        finally:
            other.close()
        wait_equal(source, target, schema, ["kl"])
        stop(cluster, "origins")
        held = target.rows("SELECT binlog_file, binlog_pos FROM retl.retl_position WHERE "
                           "pipeline_id = 'origins.forward'")
        capsys.readouterr()
        assert cli.main([*position, "set", "origins/forward", "--gtid", after_first]) == 1
        refused = capsys.readouterr().err
        assert f"setl cannot tell whether gtid={after_first} is before or after what target " \
            "target holds" in refused and "gtid_strict_mode is OFF on the source" in refused, \
            refused
        assert cli.main([*position, "set", "origins/forward", "--gtid", after_first,
                         "--replay"]) == 1
        refused = capsys.readouterr().err
        assert "takes keyless tables: " in refused and f"{schema}.kl" in refused, refused
        assert target.rows("SELECT binlog_file, binlog_pos FROM retl.retl_position WHERE "
                           "pipeline_id = 'origins.forward'") == held  # nothing moved
        assert cli.main([*position, "set", "origins/forward", "--gtid", after_first,
                         "--replay", "--keyless-duplicates"]) == 0
        assert cli.main(["--manager", cluster.manager_address, "channel", "start", "origins",
                         "--wait"]) == 0
        twice = Counter({(1, "origin 501"): 1, (2, "origin 502"): 2})
        wait_for(lambda: Counter(target.table(schema, "kl")) == twice, 60, "replayed")


def test_a_start_edited_to_an_earlier_place_after_a_reset_is_refused_until_told(
        sandbox, tmp_path, capsys):
    """A reset (start: latest) says the next start begins at the source's end; a definition
    applied since with an earlier start: then loaded the keyless rows twice, silently (a
    review). The channel's start is refused naming the set that replays; the set --latest
    it names instead starts it with nothing loaded twice."""
    with keyless(sandbox, tmp_path, "edited", 81) as (cluster, source, target, schema,
                                                      shapes):
        kl = f"`{schema}`.kl"
        position = ["--manager", cluster.manager_address, "position"]
        channel = ["--manager", cluster.manager_address, "channel"]
        start(cluster, "edited", schema, shapes)
        cluster.wait_running("edited")
        file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
        for n in range(4):
            source.execute(f"INSERT INTO {kl} VALUES ({n % 2}, 'dup'), ({n % 2}, 'dup')")
        wait_equal(source, target, schema, ["kl"])
        stop(cluster, "edited")
        assert cli.main([*position, "reset", "edited"]) == 0
        cluster.apply([pipeline("edited", schema, shapes, start={"file": file, "pos": pos})])
        capsys.readouterr()
        assert cli.main([*channel, "start", "edited", "--wait"]) == 1
        refused = capsys.readouterr().err
        assert f"its start: {file}:{pos} is earlier" in refused and \
            f"setl position set edited/forward --file {file} --pos {pos} --replay" in \
            refused and "setl position set edited/forward --latest" in refused, refused
        assert cli.main([*position, "set", "edited/forward", "--latest"]) == 0
        assert cli.main([*channel, "start", "edited", "--wait"]) == 0
        source.execute(f"INSERT INTO {kl} VALUES (7, 'after'), (7, 'after')")
        wait_equal(source, target, schema, ["kl"])
        assert len(target.table(schema, "kl")) == 10
