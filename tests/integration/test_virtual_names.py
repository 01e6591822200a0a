"""A virtual column named as a source column in another case (``total`` beside ``Total``):
MySQL's column names ignore case, so the row would give the target that column twice, which
the server refuses — the pipeline paused at run time. Refused at ``setl apply``, and when a
pipeline starts (a column the source table gained after the apply)."""

from __future__ import annotations

import pymysql
import pytest

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_for

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


