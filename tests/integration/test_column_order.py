"""A target table whose columns are in another order than the source's, fed transactions of
bulk inserts (LOAD DATA; with the compiled build, the lines written straight from the rows
events' bytes, each line's fields moved into the target's order): every value lands in its
own column, whatever the widths — values of equal width once went silently into other
columns and under another key, values of other widths stopped the pipeline for good."""

from __future__ import annotations

from tests.devcluster import make_schema, one_way, wait_for
from tests.integration.test_verify import start

TABLES = {
    "n": ("(id INT PRIMARY KEY, b INT, c INT)", "(b INT, c INT, id INT PRIMARY KEY)"),
    "w": ("(id INT PRIMARY KEY, name VARCHAR(40), qty INT, note TEXT)",
          "(note TEXT, id INT PRIMARY KEY, qty INT, name VARCHAR(40))"),
}


def test_bulk_inserts_land_in_their_own_columns_of_a_target_in_another_order(
        cluster, source, target) -> None:
    schema = make_schema(source, target)
    for table, (on_source, on_target) in TABLES.items():
        source.execute(f"CREATE TABLE `{schema}`.{table} {on_source}")
        target.execute(f"CREATE TABLE `{schema}`.{table} {on_target}")
    start(cluster, one_way("colorder", schema, list(TABLES), load_data_min_rows=2))
    source.execute(f"INSERT INTO `{schema}`.n SELECT seq, seq + 10, seq + 20 "
                   "FROM mysql.seq_11_to_60")  # equal widths
    source.execute(f"INSERT INTO `{schema}`.n SELECT seq, seq * 1000, -seq "
                   "FROM mysql.seq_100_to_160")  # other widths
    source.execute(f"INSERT INTO `{schema}`.w SELECT seq, REPEAT('n', seq % 7), seq * 3, "
                   "IF(seq % 5 = 0, NULL, CONCAT('note\\t', seq, REPEAT('é', seq % 4))) "
                   "FROM mysql.seq_1_to_80")
    source.execute(f"INSERT INTO `{schema}`.n VALUES (1000, 0, 0)")  # the last

    def rows(db, table: str) -> list[tuple[object, ...]]:
        columns = "id, b, c" if table == "n" else "id, name, qty, note"
        return db.rows(f"SELECT {columns} FROM `{schema}`.{table} ORDER BY id")
    wait_for(lambda: (1000, 0, 0) in rows(target, "n") or
             cluster.pipeline_state("colorder").last_error, 90, "the last row")
    assert cluster.pipeline_state("colorder").last_error == ""
    for table in TABLES:
        assert rows(target, table) == rows(source, table), table
    cluster.set_status("colorder", "STOP")
