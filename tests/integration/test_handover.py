"""A pipeline renamed by ``setl apply``: the new one takes over what the old one wrote. While
the channel runs that is refused (the stretch between where the old one stops and where the
new one starts would be loaded by neither, or by both); stopped, the apply's note gives the
position to start the new one from, and the keyless, unique-swap and sum tables, written all
along, end equal to the source as multisets."""

from __future__ import annotations

import re

from manager import cli
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, channel


def renamed(definition: dict[str, object], name: str) -> dict[str, object]:
    [pipeline] = definition["pipelines"]  # type: ignore[misc]
    return {**definition, "pipelines": [{**pipeline, "name": name}]}


def test_a_renamed_pipeline_takes_over_only_stopped_and_from_where_the_old_one_stopped(
        cluster: Cluster, source: Database, target: Database, capsys) -> None:
    shapes = Shapes(cluster.sandbox, source, target, seed=23, kinds=3)
    before = channel("handover", shapes.schema)
    cluster.apply([before])
    cluster.set_status("handover", "START")
    cluster.wait_running("handover")
    shapes.start()
    try:
        shapes.wait_transactions(60)
        refused = cluster.apply_errors([renamed(before, "ahead")])
        assert len(refused) == 1 and "pipeline handover.ahead would take over from pipeline " \
            "handover.forward, which has run" in refused[0], refused
        assert "setl channel stop handover --wait" in refused[0]
        assert cli.main(["--manager", cluster.manager_address, "channel", "stop", "handover",
                         "--wait"]) == 0
        shapes.keep_on(40, reads=0)  # written while stopped: the new pipeline must load them
        answer = cluster.apply_answer([renamed(before, "ahead")])
        assert not answer.errors, answer.errors
        [note] = [n for n in answer.notes if "takes over" in n]
        command = re.search(r"setl position set (\S+) --file (\S+) --pos (\d+)", note)
        assert command and command[1] == "handover/ahead", note
        assert cli.main(["--manager", cluster.manager_address, "position", "set",
                         command[1], "--file", command[2], "--pos", command[3]]) == 0, \
            capsys.readouterr()
        cluster.set_status("handover", "START")
        cluster.wait_running("handover")
        wait_for(lambda: cluster.pipeline_state("handover").pipeline_id == "handover.ahead",
                 30, "the new pipeline running")
        shapes.keep_on(60)
        shapes.finish(source)
    finally:
        shapes.stop()
        cluster.set_status("handover", "STOP")


def test_a_second_channel_writing_the_same_table_is_not_started_while_the_first_runs(
        cluster: Cluster, source: Database, target: Database, capsys) -> None:
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.kl (a INT NOT NULL, "
                         "v VARCHAR(20))")
    # stored while both are stopped: said in a note, not refused
    answer = cluster.apply_answer([one_way("holder", schema, ["kl"]),
                                   one_way("usurper", schema, ["kl"])])
    assert not answer.errors, answer.errors
    assert any("pipeline holder.forward and pipeline usurper.forward both take from source "
               f"source {schema}.kl → target:{schema}.kl" in note for note in answer.notes), \
        answer.notes
    cluster.set_status("holder", "START")
    try:
        cluster.wait_running("holder")
        source.execute(f"INSERT INTO `{schema}`.kl VALUES (1, 'one'), (1, 'one'), (2, 'two')")
        wait_equal(source, target, schema, ["kl"])
        capsys.readouterr()
        assert cli.main(["--manager", cluster.manager_address, "channel", "start",
                         "usurper"]) == 1
        refused = capsys.readouterr().err
        assert "channel usurper was not started: channel holder, which is not stopped, " \
            "writes the same tables from the same source" in refused, refused
        assert f"pipeline holder.forward and pipeline usurper.forward would both take from " \
            f"source source {schema}.kl → target:{schema}.kl" in refused, refused
        assert "setl channel stop holder --wait" in refused
        assert cluster.channel_status("usurper") == "STOP"
        # the target is written by the first channel alone: the keyless rows once each
        source.execute(f"INSERT INTO `{schema}`.kl VALUES (3, 'three'), (3, 'three')")
        wait_equal(source, target, schema, ["kl"])
        assert sorted(target.table(schema, "kl")) == [
            (1, "one"), (1, "one"), (2, "two"), (3, "three"), (3, "three")]
    finally:
        cluster.set_status("holder", "STOP")
