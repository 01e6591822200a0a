"""Tables without a primary key: refused at apply time unless a unique key over NOT NULL
columns or the pair's ``key_columns`` identifies a row; with one, they replicate."""

from __future__ import annotations

from shared.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from shared.rpc import manager_pb2

LOGS = "CREATE TABLE `{schema}`.logs (at INT, message VARCHAR(50))"
CODES = ("CREATE TABLE `{schema}`.codes (code VARCHAR(10) NOT NULL, label VARCHAR(20), "
         "alias INT NULL, UNIQUE KEY (alias), UNIQUE KEY by_code (code))")


def test_a_table_nothing_keys_is_refused_at_apply_and_key_columns_make_it_replicate(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, LOGS)
    errors = cluster.apply_errors([one_way("keyless", schema, ["logs"])])
    assert len(errors) == 1, errors
    assert f"channel keyless pipeline forward: table {schema}.logs" in errors[0]
    assert "no primary key" in errors[0] and "key_columns" in errors[0]
    stored = cluster.call("ListChannels", manager_pb2.ListChannelsRequest()).channels
    assert "keyless" not in [channel.name for channel in stored]

    channel = one_way("keyed-by-config", schema, ["logs"])
    channel["pipelines"][0]["pairs"][0]["key_columns"] = ["at"]
    cluster.apply([channel])
    cluster.set_status("keyed-by-config", "START")
    cluster.wait_running("keyed-by-config")
    t = f"`{schema}`.logs"
    source.script(f"INSERT INTO {t} VALUES (1, 'one'), (2, 'two'), (3, 'three')",
                  f"UPDATE {t} SET message = 'TWO' WHERE at = 2",
                  f"UPDATE {t} SET at = 30 WHERE at = 3",
                  f"DELETE FROM {t} WHERE at = 1")
    wait_equal(source, target, schema, ["logs"])
    assert target.table(schema, "logs") == [(2, "TWO"), (30, "three")]
    cluster.set_status("keyed-by-config", "STOP")


def test_a_table_with_a_not_null_unique_key_replicates_by_it(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, CODES)
    cluster.apply([one_way("unique-key", schema, ["codes"])])
    cluster.set_status("unique-key", "START")
    cluster.wait_running("unique-key")
    t = f"`{schema}`.codes"
    source.script(f"INSERT INTO {t} VALUES ('a', 'first', NULL), ('b', 'second', 2), "
                  "('c', 'third', NULL)",
                  f"UPDATE {t} SET label = 'changed' WHERE code = 'a'",
                  f"UPDATE {t} SET code = 'z' WHERE code = 'b'",
                  f"DELETE FROM {t} WHERE code = 'c'")
    wait_equal(source, target, schema, ["codes"])
    assert sorted(target.table(schema, "codes")) == [("a", "changed", None), ("z", "second", 2)]
    cluster.set_status("unique-key", "STOP")


def test_a_keyless_table_created_after_apply_stops_the_pipeline_at_start(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, CODES)
    channel = one_way("late-keyless", schema, [])
    channel["pipelines"][0]["pairs"] = [{"source": {"namespace": schema, "table": "re:.*"},
                                         "target": f"{schema}.codes"}]
    cluster.apply([channel])
    source.execute(LOGS.format(schema=schema))  # matched by the pair, keyed by nothing
    cluster.set_status("late-keyless", "START")
    wait_for(lambda: cluster.channel_status("late-keyless") == "PAUSE", 60, "the pause")
    error = cluster.pipeline_state("late-keyless").last_error
    assert f"table {schema}.logs" in error and "key_columns" in error, error
    cluster.set_status("late-keyless", "STOP")
