"""A single-server MariaDB source (no replica set, gtid_strict_mode OFF, MariaDB's default)
whose binlog carries one GTID domain under two originating server_ids, each with its own
sequence numbers: what a multi-source replica whose masters share a gtid_domain_id logs.
A later transaction may have a lower sequence than one a target holds (0-502-31 after
0-501-5000); positions of one server are ordered by file/pos, so its batch is loaded."""

from __future__ import annotations

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal

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


def test_a_lower_sequence_of_another_origin_in_one_domain_is_loaded(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, ITEMS)
    cluster.apply([one_way("domorder", schema, ["items"])])
    cluster.set_status("domorder", "START")
    cluster.wait_running("domorder")
    source.execute(f"INSERT INTO {schema}.items VALUES (1, 'plain')")
    wait_equal(source, target, schema, ["items"])
    as_master(source, 501, 5000, f"INSERT INTO {schema}.items VALUES (2, 'master A')")
    wait_equal(source, target, schema, ["items"])  # the target's row: 77-501-5000
    as_master(source, 502, 31, f"INSERT INTO {schema}.items VALUES (3, 'master B')")
    as_master(source, 502, 32, f"UPDATE {schema}.items SET v = 'B changed' WHERE id = 1")
    wait_equal(source, target, schema, ["items"])
    assert sorted(target.table(schema, "items")) == [
        (1, "B changed"), (2, "master A"), (3, "master B")]
