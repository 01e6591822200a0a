"""A virtual column named as a source column in another case (``total`` beside ``Total``):
MySQL's column names ignore case, so the row would give the target that column twice, which
the server refuses — the pipeline paused at run time. Refused at ``setl apply``, and when a
pipeline starts (a column the source table gained after the apply)."""

from __future__ import annotations

import pymysql
import pytest

from manager.subscribejson import value
from manager.subscriber import Subscriber
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_for
from tests.integration.test_subscription import feed_channel, sources

ORDERS = "CREATE TABLE `{schema}`.orders (id INT PRIMARY KEY, Total INT)"


def with_virtual(name: str, schema: str, column: str, **pair: object) -> dict:
    channel = one_way(name, schema, ["orders"])
    channel["pipelines"][0]["pairs"][0].update(
        virtual_columns=[{"name": column, "expression": "id * 10"}], **pair)
    return channel


def test_a_virtual_column_named_as_a_source_column_in_another_case_is_refused(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, ORDERS)
    with pytest.raises(pymysql.err.ProgrammingError, match=r"Column '\w+' specified twice"):
        target.execute(f"INSERT INTO `{schema}`.orders (id, Total, total) VALUES (1, 2, 3)")
    [error] = cluster.apply_errors([with_virtual("cased", schema, "total")])
    assert f"channel cased pipeline forward pair source:{schema}.orders → " in error
    assert f"virtual column total and column Total of {schema}.orders are one column name " \
        "in another case" in error and "Rename the virtual column" in error
    # named exactly as the source names it, it writes over the source's value
    cluster.apply([with_virtual("cased", schema, "Total")])
    cluster.set_status("cased", "START")
    cluster.wait_running("cased")
    source.execute(f"INSERT INTO `{schema}`.orders VALUES (1, 5), (2, 6)")
    wait_for(lambda: sorted(target.table(schema, "orders")) == [(1, 10), (2, 20)], 60,
             "the virtual column's values")
    cluster.set_status("cased", "STOP")
    wait_for(lambda: cluster.pipeline_state("cased").state == "not running", 15, "stop")


def test_the_start_refuses_a_column_the_source_gained_after_the_apply(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.orders (id INT PRIMARY KEY)")
    cluster.apply([with_virtual("gained", schema, "total")])  # (no Total yet)
    for db in (source, target):
        db.execute(f"ALTER TABLE `{schema}`.orders ADD Total INT")
    cluster.set_status("gained", "START")
    wait_for(lambda: f"virtual column total and column Total of {schema}.orders are one "
             "column name in another case" in cluster.pipeline_state("gained").last_error,
             90, "the start refused")
    cluster.set_status("gained", "STOP")
    # left out of the pair, the source's column is no clash
    cluster.apply([with_virtual("gained", schema, "total", columns={"exclude": ["Total"]})])
    cluster.set_status("gained", "START")
    cluster.wait_running("gained")
    source.execute(f"INSERT INTO `{schema}`.orders VALUES (3, 7)")
    wait_for(lambda: target.table(schema, "orders") == [(3, 30)], 60, "the row")
    cluster.set_status("gained", "STOP")
    wait_for(lambda: cluster.pipeline_state("gained").state == "not running", 15, "stop")




def test_a_view_a_pattern_takes_and_a_subscription_are_not_refused(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A view logs no row, yet its columns (``amount`` and ``gross`` beside a pair renaming
    amount to gross) were read as a table's: the apply refused, and a running pipeline
    stopped for good at its next start or DDL (a review). A subscription's reader gets each
    column by its own name (``Total`` and ``total`` are two fields): not refused either."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.orders (id INT PRIMARY KEY, "
                         "amount INT)")
    target.execute(f"ALTER TABLE `{schema}`.orders CHANGE amount gross INT")
    source.execute(f"CREATE VIEW `{schema}`.v_gross AS SELECT id, amount, amount * 2 AS gross "
                   f"FROM `{schema}`.orders")
    channel = one_way("viewed", schema, [])
    channel["pipelines"][0]["pairs"] = [{
        "source": {"namespace": schema, "table": "re:.*"}, "target": f"{schema}.{{table}}",
        "column_pairs": [{"source": "amount", "target": "gross"}]}]
    assert cluster.apply_errors([channel]) == []
    cluster.set_status("viewed", "START")
    cluster.wait_running("viewed")
    source.execute(f"INSERT INTO `{schema}`.orders VALUES (1, 5)")
    wait_for(lambda: target.table(schema, "orders") == [(1, 5)], 60, "the row")
    cluster.set_status("viewed", "STOP")

    source.execute(f"CREATE TABLE `{schema}`.sums (id INT PRIMARY KEY, Total INT)")
    feed = feed_channel("subcase", "feed", schema, ["sums"])
    feed["pipelines"][0]["pairs"][0]["virtual_columns"] = [
        {"name": "total", "expression": "id * 10"}]
    assert cluster.apply_errors([feed], sources(cluster, "feed")) == []
    cluster.set_status("subcase", "START")
    cluster.wait_running("subcase")
    source.execute(f"INSERT INTO `{schema}`.sums VALUES (1, 5)")
    got: list[object] = []
    with Subscriber("subcase", managers=cluster.manager_address, retry_s=0.2) as reader:
        for batch in reader:
            got += [[(field.name, value(field.value)) for field in change.after]
                    for txn in batch.transactions for change in txn.changes
                    if change.schema == schema]
            reader.ack(batch)
            if got:
                break
    assert got == [[("id", 1), ("Total", 5), ("total", "10")]]
    cluster.set_status("subcase", "STOP")
