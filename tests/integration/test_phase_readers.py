"""The README's promises watched on the rows of a phase while writes race it: a reader of the
target, in consistent snapshots, over the very table a snapshot copies or a backfill fills
(rows still arriving), through a kill -9 of the node or a failover to the other one. No part
of a source transaction, no row going back, every row once, the end equal; the keyless,
unique-swap and sum tables ride in the same pipeline and end equal as multisets."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.phases import (
    CHURNED,
    HOT,
    LEDGER,
    ROWS,
    Churn,
    CountReader,
    LedgerReader,
    Transfers,
    fill,
)
from tests.integration.shapes import Shapes, beside


@pytest.fixture
def pair(sandbox: Sandbox) -> Iterator[tuple[Database, Database]]:
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    yield source, target
    source.close()
    target.close()


def ledger_beside_shapes(sandbox: Sandbox, source: Database, target: Database,
                         seed: int) -> tuple[str, Shapes]:
    """The ledger filled on the source alone (the target's is empty: the phase brings its
    rows) and the workload's tables."""
    schema = make_schema(source, target, LEDGER)
    source.execute("SET SESSION sql_log_bin = 0")  # not streamed: only the phase copies them
    fill(source, schema)
    source.execute("SET SESSION sql_log_bin = 1")
    return schema, Shapes(sandbox, source, target, seed=seed)


def ended(moves: Transfers, reader: LedgerReader, source: Database, target: Database,
          schema: str, shapes: Shapes) -> None:
    """More transfers, still watched; the writers and the reader stopped; no broken read;
    the ledger and the Shapes tables equal on the target."""
    moves.more(100)
    reader.read_more(20)
    moves.stop.set()
    moves.join(30)
    reader.read_more(5)
    reader.halt()
    assert reader.broken == [], f"{len(reader.broken)} broken reads: {reader.broken[:5]}"
    wait_equal(source, target, schema, ["ledger"], 120)
    shapes.keep_on(transactions=50)
    shapes.finish(source)


def kept(reader: LedgerReader, moves: Transfers, target: Database, schema: str,
         phase: str) -> None:
    """The reader saw the phase in progress, the writer ran, every row and the sum kept."""
    assert reader.partial >= 3, f"the reader did not see {phase} in progress"
    assert moves.moves > 200
    assert target.rows(f"SELECT COUNT(*), SUM(balance) FROM `{schema}`.ledger") == [
        (ROWS, ROWS * 100)]


def test_a_snapshot_killed_mid_copy_never_shows_a_reader_a_mixed_state(
        sandbox: Sandbox, pair: tuple[Database, Database], tmp_path) -> None:
    """``setl snapshot`` of the ledger while transfers change it; kill -9 of the node after
    a few chunks; the node starts again and the copy goes on. The reader of the ledger saw
    the copy in progress, and never a pair mixed nor a row going back."""
    from manager import cli

    source, target = pair
    schema, shapes = ledger_beside_shapes(sandbox, source, target, seed=131)
    cluster = Cluster(sandbox, tmp_path, "phasesnap")
    moves, reader = Transfers(sandbox, schema, seed=3), LedgerReader(sandbox, schema)
    try:
        cluster.start_manager()
        node = cluster.start_node(1)
        cluster.apply([beside(one_way("phasesnap", schema, ["ledger"], snapshot_chunk_size=50,
                                      snapshot_parallelism=1, batch_timeout_ms=50),
                              shapes.schema)])
        cluster.set_status("phasesnap", "START")
        cluster.wait_running("phasesnap")
        for thread in (shapes, moves, reader):
            thread.start()
        moves.more(50)
        assert cli.main(["--manager", cluster.manager_address, "snapshot", "phasesnap",
                         "--table", f"{schema}.ledger"]) == 0
        [copy] = wait_for(lambda: [c for c in cluster.pipeline_state("phasesnap").snapshots
                                   if c.chunks_done >= 4], 120, "four chunks on the target",
                         interval_s=0.02)
        node.kill()  # kill -9 in the middle of the copy
        assert copy.state == "copying" and copy.chunks_done < copy.chunks == ROWS // 50
        moves.more(50)  # written while no node runs the pipeline
        cluster.start_node(1)
        wait_for(lambda: [c.state for c in cluster.pipeline_state("phasesnap").snapshots]
                 == ["done"], 180, "the copy done")
        ended(moves, reader, source, target, schema, shapes)  # the stream alone again
    finally:
        moves.stop.set()
        reader.stop.set()
        shapes.stop()
        cluster.stop()
    kept(reader, moves, target, schema, "the copy")


def test_a_failover_with_backfill_requests_in_flight_never_shows_a_mixed_state(
        sandbox: Sandbox, pair: tuple[Database, Database], tmp_path) -> None:
    """``setl backfill`` of every ledger key, served in small slices while transfers change
    the rows; the owning node killed (-9) part way; the other node takes over and serves
    the rest. The reader of the ledger never sees a pair mixed nor a row going back; every
    request is served and the ledger ends equal."""
    from manager import cli
    from tests.integration.test_failover import owner

    source, target = pair
    schema, shapes = ledger_beside_shapes(sandbox, source, target, seed=137)
    cluster = Cluster(sandbox, tmp_path, "phasefill")
    moves, reader = Transfers(sandbox, schema, seed=4), LedgerReader(sandbox, schema)
    try:
        cluster.start_manager()
        cluster.start_node(1)
        cluster.start_node(2)
        cluster.apply([beside(one_way("phasefill", schema, ["ledger"], batch_timeout_ms=50,
                                      free_door={"slice": 50}), shapes.schema)])
        cluster.set_status("phasefill", "START")
        cluster.wait_running("phasefill")
        first = owner(cluster, "phasefill")
        for thread in (shapes, moves, reader):
            thread.start()
        moves.more(50)
        manager = ["--manager", cluster.manager_address,
                   "--config", str(cluster.workdir / "node.yaml")]
        assert cli.main([*manager, "retl", "init", "source"]) == 0
        assert cli.main([*manager, "backfill", "phasefill", "--table", f"{schema}.ledger",
                         "--batch", "500"]) == 0
        wait_for(lambda: cluster.pipeline_state("phasefill").free_door.loaded >= 600, 120,
                 "a part of the backfill served")
        cluster.nodes[first].kill()  # kill -9 with requests in flight
        [(left,)] = source.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE FULL_NAME = %s",
                                (f"{schema}.ledger",))
        assert 0 < left < ROWS, left  # some served, some not: the other node serves these
        wait_for(lambda: owner(cluster, "phasefill") not in (0, first), 90,
                 "the other node to take over")
        wait_for(lambda: source.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE "
                                     "FULL_NAME = %s", (f"{schema}.ledger",)) == [(0,)],
                 180, "every backfill request served")
        ended(moves, reader, source, target, schema, shapes)  # after the takeover
    finally:
        moves.stop.set()
        reader.stop.set()
        shapes.stop()
        cluster.stop()
    kept(reader, moves, target, schema, "the backfill")


def test_repair_d_requests_racing_inserts_and_deletes_never_show_a_mixed_state(
        cluster: Cluster, source: Database, target: Database, capsys) -> None:
    """``setl verify --repair`` of a table whose target holds stray rows among the keys a
    writer keeps inserting and deleting (each with the counter row, in one source
    transaction): the D requests of the strays race the writer's inserts of the same keys.
    The reader sees the counter equal to the real rows in every read, no row going back,
    no real row turned stray or gone by a D; verify then finds the sides equal."""
    from tests.integration.test_verify import start, verify

    schema = make_schema(source, target, HOT)
    t = f"`{schema}`.hot"
    shapes = Shapes(cluster.sandbox, source, target, seed=139)
    start(cluster, beside(one_way("phaserepair", schema, ["hot"], batch_timeout_ms=50,
                                  free_door={"source": "target", "slice": 20}), shapes.schema))
    source.execute(f"INSERT INTO {t} VALUES (1, 0, 'counter'), (2, 0, 'seq')")
    source.execute(f"INSERT INTO {t} SELECT seq, seq, 'cold' FROM `{schema}`.seq_1000_to_1999")
    wait_equal(source, target, schema, ["hot"])
    target.execute("SET SESSION sql_log_bin = 0")  # the damage: strays among the churned keys
    target.execute(f"INSERT INTO {t} SELECT seq, 0, 'stray' FROM `{schema}`.seq_"
                   f"{CHURNED.start}_to_{CHURNED.stop - 1}_step_2")
    target.execute("SET SESSION sql_log_bin = 1")
    churn, reader = Churn(cluster.sandbox, schema, seed=8), CountReader(cluster.sandbox, schema)
    try:
        for thread in (shapes, churn, reader):
            thread.start()
        wait_for(lambda: churn.done >= 5, 30, "the churn")
        code, report = verify(cluster, capsys, "phaserepair", "--repair", "--table",
                              f"{schema}.hot", "--chunk-size", "50")
        reader.read_more(20)
        churn.stop.set()
        churn.join(30)
        reader.read_more(5)
        reader.halt()
        assert reader.broken == [], f"{len(reader.broken)} broken reads: {reader.broken[:5]}"
        wait_equal(source, target, schema, ["hot"], 60)
        shapes.keep_on(transactions=50)
        shapes.finish(source)
    finally:
        churn.stop.set()
        reader.stop.set()
        shapes.stop()
    [verdict] = report["reports"][0]["tables"]
    assert code == 0 and verdict.get("remaining", 0) == 0, report
    assert int(verdict["repaired"]) >= 20  # D requests among them (strays the churn left)
    assert churn.kinds["insert"] > 50 and churn.kinds["delete"] > 20
    capsys.readouterr()
    assert verify(cluster, capsys, "phaserepair", "--table", f"{schema}.hot")[0] == 0
    cluster.set_status("phaserepair", "STOP")
