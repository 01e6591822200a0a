"""A snapshot window larger than 2**19 rows on real servers: a composite key whose first
column holds one value for 530,000 rows is one chunk whatever snapshot_chunk_size (the
split goes by the first column). Read as rows (load_data_min_rows 0), its window's rows
join the batch between two events — 2**19 of them was once all a batch had room for, and
the copy paused for good, telling to lower snapshot_chunk_size, which could not help. What
the message tells now does: a pair's key_columns naming the key's other column first split
such a table by that column, in chunks of snapshot_chunk_size."""

from __future__ import annotations

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_for

BIG = ("CREATE TABLE `{schema}`.big (a INT NOT NULL, b INT NOT NULL, pad CHAR(8) NOT NULL,"
       " PRIMARY KEY (a, b))")
HOT = 530_000  # rows of a = 1: more than 2**19 - 1 = 524,287
TURNED = 20_000  # rows of a = 1 in a table whose pair names key_columns [b, a]


def digest(db: Database, schema: str, table: str = "big") -> tuple:
    """The table's rows summed up: count, and sums over each row's values and a checksum."""
    return db.rows(f"SELECT COUNT(*), SUM(a), SUM(b), SUM(CRC32(CONCAT_WS(',', a, b, pad))) "
                   f"FROM `{schema}`.`{table}`")[0]


def test_a_chunk_of_one_first_value_larger_than_two_to_the_nineteen_is_copied(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, BIG, BIG.replace(".big", ".turned"))
    source.execute(f"INSERT INTO `{schema}`.big SELECT 1, seq, LEFT(MD5(seq), 8) "
                   f"FROM `{schema}`.seq_1_to_{HOT}")
    source.execute(f"INSERT INTO `{schema}`.big SELECT 2, seq, 'two' FROM "
                   f"`{schema}`.seq_1_to_50")
    source.execute(f"INSERT INTO `{schema}`.turned SELECT 1, seq, 'turned' FROM "
                   f"`{schema}`.seq_1_to_{TURNED}")
    channel = one_way("bigwin", schema, ["big", "turned"], start="snapshot",
                      snapshot_chunk_size=8192, load_data_min_rows=0, max_retries=0)
    channel["pipelines"][0]["pairs"][1]["key_columns"] = ["b", "a"]
    cluster.apply([channel])
    cluster.set_status("bigwin", "START")

    def settled() -> bool:
        if cluster.channel_status("bigwin") == "PAUSE":
            return True
        copies = cluster.pipeline_state("bigwin").snapshots
        return bool(copies) and all(copy.state == "done" for copy in copies)

    wait_for(settled, 300, "the copy done, or the channel paused")
    state = cluster.pipeline_state("bigwin")
    assert cluster.channel_status("bigwin") != "PAUSE", state.last_error
    copies = {copy.table.rpartition(".")[2]: copy for copy in state.snapshots}
    assert all(copy.chunks_done == copy.chunks for copy in copies.values())
    assert copies["big"].chunks == 2  # split by a: a = 1 (530,000 rows in one) and a = 2
    assert copies["turned"].chunks >= 3  # split by b (key_columns): 20,000 rows by 8192
    # the stream goes on after the copy, into the hot value too
    source.execute(f"UPDATE `{schema}`.big SET pad = 'moved' WHERE a = 1 AND b = {HOT}")
    source.execute(f"INSERT INTO `{schema}`.big VALUES (1, {HOT + 1}, 'new')")
    wait_for(lambda: target.rows(f"SELECT pad FROM `{schema}`.big WHERE a = 1 AND b = "
                                 f"{HOT + 1}"), 60, "the stream's row after the copy")
    for table in ("big", "turned"):
        wait_for(lambda table=table: digest(source, schema, table) == digest(target, schema,
                                                                               table),
                 60, f"{table} equal on source and target")
    assert digest(target, schema)[0] == HOT + 51
