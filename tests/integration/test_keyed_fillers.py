"""Tables gathered into one target with a virtual column moving one table's keys (the recipe
of docs/configuration.md, ``id: id + 1000000``), as a review reproduced them on MariaDB:

- a backfill row of ``a`` displaced ``b``'s row on a second unique key; the door asked only
  ``a`` (the one simple pair) for it, ``a`` lacked it, and ``b``'s row was deleted for good,
  status green. Now the batch stops, naming the table and ``b``'s pair; the row stays.
- a free-door ``D`` of ``b`` (its key alone) through a pair that also has an ordinary
  expression column (``concat_ws(' ', first, last)``) failed on ``unknown column 'first'``
  and paused the pipeline on every resume. Now only the key's virtual column is computed:
  the row goes, the pipeline runs on.
"""

from __future__ import annotations

from typing import Any

from shared.retl import encode_key
from tests.devcluster import Cluster, Database, make_schema, wait_for
from tests.integration.test_displaced_loops import paused
from tests.integration.test_displaced_rows import without_binlog

U = ("CREATE TABLE `{schema}`.a (id INT PRIMARY KEY, email VARCHAR(20) NOT NULL, v INT, "
     "UNIQUE KEY ue (email))")
NAMES = "CREATE TABLE `{schema}`.a (id INT PRIMARY KEY, first VARCHAR(20), last VARCHAR(20))"


def running(cluster: Cluster, name: str, pairs: list[dict[str, Any]]) -> None:
    """A one-pipeline channel of ``pairs`` (source → target), applied and running."""
    cluster.apply([{"name": name, "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": pairs}]}])
    cluster.set_status(name, "START")
    cluster.wait_running(name)


def gathered_out_of_step(cluster: Cluster, source: Database, target: Database, name: str,
                         holder: int) -> str:
    """a and b (its keys moved by ``id + 1000000``) gathered into m, running as ``name``
    with a's row 1 and b's row 7; the target row ``holder`` then holds the email 'x2' the
    source gives a's row 2 (written without the binlog), and a backfill of that row asked.
    The schema."""
    schema = make_schema(source, target, U)
    source.execute(U.replace(".a ", ".b ").format(schema=schema))
    target.execute(f"RENAME TABLE `{schema}`.a TO `{schema}`.m")
    running(cluster, name, [
        {"source": f"{schema}.a", "target": f"{schema}.m"},
        {"source": f"{schema}.b", "target": f"{schema}.m",
         "virtual_columns": [{"name": "id", "expression": "id + 1000000"}]}])
    source.execute(f"INSERT INTO `{schema}`.a VALUES (1, 'a1', 1)")
    source.execute(f"INSERT INTO `{schema}`.b VALUES (7, 'b7', 7)")
    wait_for(lambda: len(target.table(schema, "m")) == 2, 60, "the two rows")
    target.execute(f"UPDATE `{schema}`.m SET email = 'x2' WHERE id = {holder}")
    without_binlog(source, f"INSERT INTO `{schema}`.a VALUES (2, 'x2', 2)")
    source.execute("INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA) VALUES "
                   "(%s, 'I', %s)", (f"{schema}.a", encode_key((2,))))
    return schema


def test_a_displaced_row_of_a_table_whose_keys_a_virtual_column_moves_is_not_deleted(
        cluster: Cluster, source: Database, target: Database) -> None:
    # the target out of step on the unique key: b's row holds the value the source gives
    # a's row 2, which the target lacks (what a backfill is run to mend)
    schema = gathered_out_of_step(cluster, source, target, "kf-gather", 1000007)
    message = paused(cluster, "kf-gather", f"{schema}.m", f"{schema}.b",
                     "virtual column(s) id write the target's key")
    assert "is not deleted" in message and "resume the channel" in message
    # (read first: a lacks it, so it may be b's)
    assert "the row of key [1000007] is held by none of the tables the door asks " \
        f"(`{schema}`.`a`)" in message
    assert target.table(schema, "m") == [(1, "a1", 1), (1000007, "x2", 7)]  # b's row stays
    cluster.set_status("kf-gather", "STOP")


def test_a_displaced_row_the_simple_pairs_table_holds_is_copied_again_beside_a_moved_key(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The same gathering, a's OWN row displaced (key 1, which ``a`` holds): the door reads
    the key on ``a`` first, finds it, and asks it as before; the row comes back and the
    channel runs on (a review: the batch stopped for b's pair, paused until someone came)."""
    # a's own row 1 out of step on the unique key (what a swap in flight looks like)
    schema = gathered_out_of_step(cluster, source, target, "kf-own", 1)
    healed = [(1, "a1", 1), (2, "x2", 2), (1000007, "b7", 7)]

    def settled() -> tuple[str, object] | None:
        state = cluster.pipeline_state("kf-own")
        if state.state == "failed":
            return "failed", state.last_error
        return ("healed", None) if target.table(schema, "m") == healed else None
    assert wait_for(settled, 90, "row 1 copied again beside row 2") == ("healed", None)
    source.execute(f"INSERT INTO `{schema}`.b VALUES (8, 'b8', 8)")  # and it runs on
    wait_for(lambda: (1000008, "b8", 8) in target.table(schema, "m"), 60, "a row after it")
    assert cluster.pipeline_state("kf-own").state == "running"
    assert target.table(schema, "m") == [*healed, (1000008, "b8", 8)]
    cluster.set_status("kf-own", "STOP")


def test_a_door_delete_through_a_pair_moving_its_key_beside_another_expression(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, NAMES)
    source.execute(NAMES.replace(".a ", ".b ").format(schema=schema))
    target.execute(f"ALTER TABLE `{schema}`.a ADD COLUMN full VARCHAR(50)")
    target.execute(f"RENAME TABLE `{schema}`.a TO `{schema}`.m")
    full = {"name": "full", "expression": "concat_ws(' ', first, last)"}
    running(cluster, "kf-door", [
        {"source": f"{schema}.a", "target": f"{schema}.m", "virtual_columns": [full]},
        {"source": f"{schema}.b", "target": f"{schema}.m", "virtual_columns": [
            {"name": "id", "expression": "id + 1000"}, full]}])
    source.execute(f"INSERT INTO `{schema}`.a VALUES (1, 'a', 'one')")
    source.execute(f"INSERT INTO `{schema}`.b VALUES (1, 'b', 'one')")
    wait_for(lambda: len(target.table(schema, "m")) == 2, 60, "the two rows")
    # a row the target holds that the source lost without a binlog event (what a D is
    # for): b's 7, at 1007 on the target
    target.execute(f"INSERT INTO `{schema}`.m VALUES (1007, 'b', 'gone', 'b gone')")
    source.execute("INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA) VALUES "
                   "(%s, 'D', %s)", (f"{schema}.b", encode_key((7,))))
    source.execute(f"INSERT INTO `{schema}`.a VALUES (3, 'a', 'three')")
    wait_for(lambda: target.table(schema, "m") == [
        (1, "a", "one", "a one"), (3, "a", "three", "a three"), (1001, "b", "one", "b one")],
        60, "the D served and the stream on")
    state = cluster.pipeline_state("kf-door")
    assert state.state == "running", state.last_error
    source.execute(f"INSERT INTO `{schema}`.b VALUES (4, 'b', 'four')")  # and it runs on
    wait_for(lambda: (1004, "b", "four", "b four") in target.table(schema, "m"), 60,
             "a row after the D")
    cluster.set_status("kf-door", "STOP")


def test_the_apply_notes_a_key_column_computed_from_more_than_the_key(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Not refused (the stream computes it from the whole before image), but noted: a ``D``
    by key alone cannot compute it (the manager reads the source table's key)."""
    schema = make_schema(source, target, NAMES)
    answer = cluster.apply_answer([{"name": "kf-note", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": [
            {"source": f"{schema}.a", "target": f"{schema}.m", "virtual_columns": [
                {"name": "id", "expression": "concat(first, id)"}]}]}]}])
    assert not answer.errors, answer.errors
    [note] = [note for note in answer.notes if "virtual column id" in note]
    assert note.startswith("test.yaml: channel kf-note pipeline forward pair ")
    assert f"key of {schema}.a (id)" in note and "reads first" in note
    answer = cluster.apply_answer([{"name": "kf-note", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": [
            {"source": f"{schema}.a", "target": f"{schema}.m", "virtual_columns": [
                {"name": "id", "expression": "id + 1000"}]}]}]}])
    assert not answer.errors and not [n for n in answer.notes if "virtual column" in n]
