"""The order Load writes a batch's tables in: tables linked by foreign keys keep the
source's order whatever the pairs' push_weight (the weight orders independent tables)."""

from __future__ import annotations

from tests.devcluster import Cluster, Database, make_schema, wait_equal, wait_for

TABLES = (
    "CREATE TABLE `{schema}`.customers (id INT PRIMARY KEY)",
    "CREATE TABLE `{schema}`.orders (id INT PRIMARY KEY, customer INT NOT NULL, "
    "FOREIGN KEY (customer) REFERENCES `{schema}`.customers (id) ON DELETE CASCADE)",
    "CREATE TABLE `{schema}`.order_lines (id INT PRIMARY KEY, order_id INT NOT NULL, "
    "FOREIGN KEY (order_id) REFERENCES `{schema}`.orders (id) ON DELETE CASCADE)")


def test_a_parents_delete_after_its_childs_move_keeps_the_child_whatever_the_weights(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Parents weighted first, as a DBA would: an order moved to another customer, then its
    old customer deleted, in one transaction. Written by weight, the target's cascade took
    the order and its lines, and the upsert after brought the order back without them."""
    schema = make_schema(source, target, *TABLES)
    pairs = [{"source": f"{schema}.{table}", "target": f"{schema}.{table}",
              "push_weight": weight}
             for weight, table in enumerate(("customers", "orders", "order_lines"))]
    cluster.apply([{"name": "weights", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": pairs}]}])
    cluster.set_status("weights", "START")
    cluster.wait_running("weights")
    source.script(f"INSERT INTO `{schema}`.customers VALUES (1), (2)",
                  f"INSERT INTO `{schema}`.orders VALUES (10, 1)",
                  f"INSERT INTO `{schema}`.order_lines VALUES (100, 10), (101, 10)")
    wait_for(lambda: len(target.table(schema, "order_lines")) == 2, 60, "the first rows")
    source.script("BEGIN", f"UPDATE `{schema}`.orders SET customer = 2 WHERE id = 10",
                  f"DELETE FROM `{schema}`.customers WHERE id = 1", "COMMIT",
                  f"INSERT INTO `{schema}`.customers VALUES (3)")
    wait_for(lambda: target.table(schema, "customers") == [(2,), (3,)], 60, "the last batch")
    wait_equal(source, target, schema, ["customers", "orders", "order_lines"], 10)
    assert target.table(schema, "order_lines") == [(100, 10), (101, 10)]


def test_a_key_change_of_a_row_the_target_has_not_got_yet_writes_the_row(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A table with a second unique key is written in source order, a key change as the
    UPDATE the source ran. Of a row no copy has brought yet (written before the start,
    outside the binlog), that UPDATE found nothing and the pipeline stopped for good, each
    resume replaying the batch. The row is written as an upsert writes it now; the copy that
    follows brings the rest."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.tagged (id INT PRIMARY "
                                         "KEY, code VARCHAR(10) NOT NULL, n INT, UNIQUE KEY "
                                         "(code))")
    t = f"`{schema}`.tagged"
    source.script("SET SESSION sql_log_bin = 0", f"INSERT INTO {t} VALUES (1, 'a', 1), "
                  "(2, 'b', 2)", "SET SESSION sql_log_bin = 1")
    cluster.apply([{"name": "ordered-moves", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": [
            {"source": f"{schema}.tagged", "target": f"{schema}.tagged"}]}]}])
    cluster.set_status("ordered-moves", "START")
    cluster.wait_running("ordered-moves")
    source.script("BEGIN", f"UPDATE {t} SET id = 10 WHERE id = 1",  # not on the target
                  f"UPDATE {t} SET code = 'c' WHERE id = 2", f"UPDATE {t} SET id = 1, "
                  "code = 'b' WHERE id = 10", "COMMIT",  # a swap of unique values after it
                  f"INSERT INTO {t} VALUES (3, 'd', 3)")
    wait_for(lambda: (3, "d", 3) in target.table(schema, "tagged"), 60, "the last batch")
    assert cluster.pipeline_state("ordered-moves").last_error == ""
    assert target.table(schema, "tagged") == [(1, "b", 1), (2, "c", 2), (3, "d", 3)]
    cluster.set_status("ordered-moves", "STOP")
