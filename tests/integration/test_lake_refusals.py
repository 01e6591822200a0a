"""What a lake target refuses before it could hold other rows than the source's, on real
servers: each refusal names the pipeline, the table or pair and what to do, and the lake
holds nothing the source does not."""

from __future__ import annotations

import dataclasses
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest
import yaml

from shared import definitions, zk
from shared.catalog import Catalog
from tests.devcluster import Cluster, Database, make_schema, wait_for
from tests.integration.lakes import ended, lake_channel, lake_sources, rows, started

pytestmark = pytest.mark.integration


def test_a_text_column_setl_cannot_decode_is_refused_at_start(sandbox, tmp_path):
    """swe7's 'KÄra' is the bytes of 'K[ra': copied, the lake would hold the wrong text."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.names (id INT PRIMARY KEY, "
                         "name VARCHAR(9) CHARACTER SET swe7, note VARCHAR(9))")
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-swe7")
    try:
        started(cluster, location, "lw", schema, [{"table": "names"}], running=False)
        wait_for(lambda: "a charset setl cannot decode" in
                 cluster.pipeline_state("lw").last_error, 60, "the pipeline to refuse swe7")
        error = cluster.pipeline_state("lw").last_error
        assert f"pair source:{schema}.names: column name of {schema}.names is text in swe7" \
            in error, error
        assert "columns: {exclude: [name]}" in error
        # left out, the rest of the table goes to the lake
        cluster.apply([lake_channel("lw", schema, [{"table": "names", "columns": {
            "exclude": ["name"]}}])], lake_sources(cluster, location))
        cluster.set_status("lw", "START")
        cluster.wait_running("lw")
        source.execute(f"INSERT INTO `{schema}`.names VALUES (1, 'K\u00c4ra', 'ok')")
        wait_for(lambda: rows(location, schema, "names", ["id", "note"]).get((1, "ok")), 60,
                 "the row without its swe7 column")
    finally:
        ended(cluster, source, target)


def written_straight(zk_client: Any, cluster: Cluster, channel: dict[str, Any],
                     sources: list[dict[str, Any]], **options: Any) -> None:
    """``channel`` stored in ZooKeeper with ``options`` on its pairs, as someone with
    ZooKeeper access would: no manager, no check at apply."""
    parsed = definitions.load_text(yaml.safe_dump({"sources": sources, "channels": [channel]}))
    [stored] = parsed.channels
    pipelines = tuple(dataclasses.replace(pipeline, pairs=tuple(
        dataclasses.replace(pair, **options) for pair in pipeline.pairs))
        for pipeline in stored.pipelines)
    Catalog(zk_client, zk.ZkPaths(cluster.root)).apply(dataclasses.replace(
        parsed, channels=(dataclasses.replace(stored, pipelines=pipelines),)))


def test_a_lake_pair_that_writes_part_of_a_row_is_refused_at_apply_and_at_start(
        sandbox, tmp_path, zk_client):
    """column_groups and merge_part make rows that carry some of their columns; a Delta row
    is written whole, so the lake would get NULL in the others. setl apply refuses them (a
    lake stored by an earlier apply too); written straight into ZooKeeper, the start does."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.t (id INT PRIMARY KEY, "
                         "a INT, b INT)")
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-parts")
    sources = lake_sources(cluster, location)
    try:
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([], sources)  # the lake stored first: the channel names it only
        errors = cluster.apply_errors([lake_channel("lp", schema, [
            {"table": "t", "column_groups": [["a", "b"]]}])], sources[:1])
        [error] = errors
        assert error.startswith("test.yaml:") and error.split(":", 2)[2].startswith(
            " channels[0].pipelines[0].pairs[0].column_groups: target lake is a lake, whose "
            "rows are written whole"), error
        written_straight(zk_client, cluster, lake_channel("lp", schema, [{"table": "t"}]),
                         sources, key_columns=("id",), merge_part=True)
        source.execute(f"INSERT INTO `{schema}`.t VALUES (1, 1, 1)")
        cluster.set_status("lp", "START")
        wait_for(lambda: cluster.channel_status("lp") == "PAUSE", 60, "the start to refuse")
        error = cluster.pipeline_state("lp").last_error
        assert error.startswith(f"pipeline lp.forward pair source:{schema}.t: merge_part: "
                                "target lake is a lake, whose rows are written whole"), error
        assert not location.exists()
    finally:
        ended(cluster, source, target)


def test_key_columns_that_leave_out_the_tables_key_are_refused_for_a_lake_mirror(
        sandbox, tmp_path, zk_client):
    """A Delta table has no unique key: a MERGE by key_columns [customer_id] of a table keyed
    by id took two customers' orders for one lake row. setl apply refuses them (it reads the
    source's keys), the start refuses them when written straight into ZooKeeper, and
    key_columns that hold the key keep every row."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.orders (id INT PRIMARY KEY, "
                         "customer_id INT NOT NULL, amount INT)")
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-keys")
    sources = lake_sources(cluster, location)
    narrow = lake_channel("lk", schema, [{"table": "orders", "key_columns": ["customer_id"]}])
    refusal = (f"table {schema}.orders (pair source:{schema}.orders) is mirrored into a lake "
               "by key_columns customer_id, which leave out id of its own key (id)")
    try:
        cluster.start_manager()
        cluster.start_node(1)
        [error] = cluster.apply_errors([narrow], sources)
        assert error.startswith("test.yaml: channel lk pipeline forward: ") and refusal in \
            error, error
        written_straight(zk_client, cluster, lake_channel("lk", schema, [{"table": "orders"}]),
                         sources, key_columns=("customer_id",))
        cluster.set_status("lk", "START")
        wait_for(lambda: cluster.channel_status("lk") == "PAUSE", 60, "the start to refuse")
        assert refusal in cluster.pipeline_state("lk").last_error
        cluster.apply([lake_channel("lk", schema, [
            {"table": "orders", "key_columns": ["customer_id", "id"]}])], sources)
        cluster.set_status("lk", "START")
        cluster.wait_running("lk")
        source.execute(f"INSERT INTO `{schema}`.orders VALUES (1, 7, 10), (2, 7, 20), "
                       "(3, 8, 30)")
        source.execute(f"UPDATE `{schema}`.orders SET amount = 21 WHERE id = 2")
        expected = Counter(source.rows(f"SELECT id, customer_id, amount FROM "
                                       f"`{schema}`.orders"))
        wait_for(lambda: rows(location, schema, "orders", ["id", "customer_id", "amount"]) ==
                 expected, 60, "every order in the lake")
    finally:
        ended(cluster, source, target)


def test_a_column_whose_type_changed_on_the_source_stops_before_its_values_change(
        sandbox, tmp_path):
    """Without ddl_sync, ALTER TABLE … MODIFY is not followed: the lake's column keeps its
    type. Values it holds exactly still land (an INT made BIGINT, a wider DECIMAL: the types
    before them known, no pause for values rewritten in place); a DECIMAL into its integer
    column (6.75 merged as 6) stops the pipeline, naming the column, both types and what to
    do."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.t (id INT PRIMARY KEY, "
                         "n INT, p DECIMAL(6,2))")
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-types-changed")
    t = f"`{schema}`.t"
    try:
        started(cluster, location, "lt", schema, [{"table": "t"}])
        source.execute(f"INSERT INTO {t} VALUES (1, 5, 1.25)")
        wait_for(lambda: rows(location, schema, "t", ["id"]), 60, "the first row")
        source.script(f"ALTER TABLE {t} MODIFY n BIGINT", f"ALTER TABLE {t} MODIFY p "
                      "DECIMAL(9,3)", f"INSERT INTO {t} VALUES (2, 7, 2.5)",
                      f"UPDATE {t} SET n = 6 WHERE id = 1")
        wait_for(lambda: rows(location, schema, "t", ["id", "n", "p"]) == Counter(
            {(1, 6, Decimal("1.25")): 1, (2, 7, Decimal("2.50")): 1}), 60,
            "the rows of the wider types")
        # (a BIGINT made DECIMAL rounds nothing in place: the lake's own check says it)
        source.script(f"ALTER TABLE {t} MODIFY n DECIMAL(10,2)",
                      f"INSERT INTO {t} VALUES (3, 6.75, 1)")
        wait_for(lambda: "its type changed on the source" in
                 cluster.pipeline_state("lt").last_error, 60, "the pipeline to stop")
        error = cluster.pipeline_state("lt").last_error
        assert f"lake table lake:{schema}.t: column n is int32 in the lake table, and the " \
               "source gives decimal" in error, error
        assert "columns: {exclude: [n]}" in error
        assert rows(location, schema, "t", ["id", "n"]) == Counter({(1, 6): 1, (2, 7): 1})
    finally:
        ended(cluster, source, target)


def test_a_cascading_foreign_key_added_without_ddl_sync_stops_the_pipeline(sandbox, tmp_path):
    """Without ddl_sync Load never sees the ALTER: the pipeline checks what its start
    refuses again after a DDL on a replicated table, before the rows that follow it."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.parent (id INT PRIMARY KEY)",
                         "CREATE TABLE `{schema}`.child (id INT PRIMARY KEY, pid INT)")
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-cascade-later")
    try:
        started(cluster, location, "lc", schema, [{"table": "parent"}, {"table": "child"}])
        source.script(f"INSERT INTO `{schema}`.parent VALUES (1)",
                      f"INSERT INTO `{schema}`.child VALUES (1, 1)")
        wait_for(lambda: rows(location, schema, "child", ["id"]), 60, "the child row")
        source.script(f"ALTER TABLE `{schema}`.child ADD CONSTRAINT fk_parent FOREIGN KEY "
                      f"(pid) REFERENCES `{schema}`.parent (id) ON DELETE CASCADE",
                      f"DELETE FROM `{schema}`.parent WHERE id = 1")
        wait_for(lambda: "has foreign key fk_parent" in cluster.pipeline_state("lc").last_error,
                 60, "the pipeline to stop on the cascade")
        assert rows(location, schema, "parent", ["id"]) == Counter({(1,): 1})  # not past it
    finally:
        ended(cluster, source, target)
