"""A single-server MariaDB source (no replica set, gtid_strict_mode OFF, MariaDB's default)
whose binlog carries one GTID domain under two originating server_ids, each with its own
sequence numbers: what a multi-source replica whose masters share a gtid_domain_id logs.
A later transaction may have a lower sequence than one a target holds (0-502-31 after
0-501-5000); positions of one server are ordered by file/pos, so its batch is loaded.

The workload's tables (shapes.py) go through the same pipeline, their transactions binlogged
as master A's before its 5000 and as master B's after it, every one of those lower."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal
from tests.integration.shapes import Shapes, beside

ITEMS = "CREATE TABLE {schema}.items (id INT PRIMARY KEY, v VARCHAR(20))"


def as_master(source: Database, server_id: int, seq: int, sql: str) -> None:
    """One transaction binlogged as GTID 77-server_id-seq (as a replica's SQL thread
    replaying that master does)."""
    source.execute("SET SESSION gtid_domain_id = 77")
    source.execute(f"SET SESSION server_id = {server_id}")
    source.execute(f"SET SESSION gtid_seq_no = {seq}")
    try:
        source.execute(sql)
    finally:
        source.execute("SET SESSION gtid_domain_id = DEFAULT")
        source.execute("SET SESSION server_id = DEFAULT")


class Master(Database):
    """The workload's writer as master ``server_id`` of domain 77: each transaction it
    begins is binlogged as 77-server_id-seq, with the next of ``seqs`` (shared by the
    writer's connections: one broken is followed by another)."""

    def __init__(self, sandbox: Sandbox, server_id: int, seqs: Iterator[int]) -> None:
        self.seqs = seqs
        super().__init__(sandbox, "source")
        super().execute("SET SESSION gtid_domain_id = 77")
        super().execute(f"SET SESSION server_id = {server_id}")

    def execute(self, sql: str, args: Any = None) -> int:
        if sql == "BEGIN":
            super().execute(f"SET SESSION gtid_seq_no = {next(self.seqs)}")
        return super().execute(sql, args)


def test_a_lower_sequence_of_another_origin_in_one_domain_is_loaded(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, ITEMS)
    shapes = Shapes(cluster.sandbox, source, target, seed=61)
    cluster.apply([beside(one_way("domorder", schema, ["items"]), shapes.schema)])
    cluster.set_status("domorder", "START")
    cluster.wait_running("domorder")
    source.execute(f"INSERT INTO {schema}.items VALUES (1, 'plain')")
    wait_equal(source, target, schema, ["items"])
    a_seqs, b_seqs = itertools.count(1000), itertools.count(33)
    try:
        shapes.writer = lambda: Master(cluster.sandbox, 501, a_seqs)
        shapes.start()
        shapes.keep_on(60)
        shapes.settle(source)  # the target holds master A's 77-501-1000...
        as_master(source, 501, 5000, f"INSERT INTO {schema}.items VALUES (2, 'master A')")
        wait_equal(source, target, schema, ["items"])  # the target's row: 77-501-5000
        as_master(source, 502, 31, f"INSERT INTO {schema}.items VALUES (3, 'master B')")
        as_master(source, 502, 32, f"UPDATE {schema}.items SET v = 'B changed' WHERE id = 1")
        shapes.writer = lambda: Master(cluster.sandbox, 502, b_seqs)  # from 77-502-33 on
        shapes.start()
        shapes.keep_on(100)
        shapes.finish(source)  # every table of the workload equal, as multisets
    finally:
        shapes.stop()
    wait_equal(source, target, schema, ["items"])
    assert sorted(target.table(schema, "items")) == [
        (1, "B changed"), (2, "master A"), (3, "master B")]
    last_a, last_b = next(a_seqs) - 1, next(b_seqs) - 1
    assert last_a >= 1000 + 59 and 33 + 99 <= last_b < 5000  # all of B's below A's 5000
    [(state,)] = source.rows("SELECT @@GLOBAL.gtid_binlog_state")
    assert {"77-501-5000", f"77-502-{last_b}"} <= set(state.split(","))
