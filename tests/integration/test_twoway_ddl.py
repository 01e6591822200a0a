"""Two-way channels on two real MariaDB servers: DDL with ddl_sync both ways crosses once
(the loop mark on every statement it brings, the databases' defaults left as they are),
and a DROP whose intent one side wrote is never sent back to the other."""

from __future__ import annotations

import time

from node.target.mysql.ddlapply import INTENT_DDL
from tests.devcluster import Cluster, Database, make_schema, wait_equal, wait_for
from tests.integration.test_twoway import (
    ITEMS,
    master_position,
    set_and_wait,
    start,
    started_with_ddl,
    two_way,
)


def test_ddl_sync_on_a_two_way_channel_crosses_once(cluster: Cluster, source: Database,
                                                   target: Database) -> None:
    """A DDL commits on its own, so no loop mark can share its transaction: setl's DDL
    carries the channel's loop comment and the opposite pipeline drops it. An unnamed index
    that bounced would be added again on each crossing."""
    schema = make_schema(source, target, ITEMS)
    started_with_ddl(cluster, "ddl-both", schema)
    t = f"`{schema}`.items"

    def qty_indexes(db: Database) -> list[str]:
        return sorted({row[2] for row in db.rows(f"SHOW INDEX FROM {t}") if row[4] == "qty"})

    source.execute(f"ALTER TABLE {t} ADD INDEX (qty)")
    wait_for(lambda: qty_indexes(target) == ["qty"], 60, "the index on the target")
    target.execute(f"INSERT INTO {t} VALUES (1, 'after the DDL on the target', 0)")
    wait_for(lambda: source.rows(f"SELECT COUNT(*) FROM {t} WHERE id = 1")[0][0], 60,
             "the target's row after the DDL to cross back")  # the DDL's place passed too
    source.execute(f"INSERT INTO {t} VALUES (2, 'after that on the source', 0)")
    wait_for(lambda: target.rows(f"SELECT COUNT(*) FROM {t} WHERE id = 2")[0][0], 60,
             "the source's row to cross")
    assert qty_indexes(source) == ["qty"] and qty_indexes(target) == ["qty"]
    wait_equal(source, target, schema, ["items"])
    # the server writes a DROP TABLE as text of its own, without the loop comment: its echo
    # dropped the table made again meanwhile (and IF EXISTS went back and forth for ever)
    source.script(f"DROP TABLE IF EXISTS {t}", ITEMS.format(schema=schema),
                  f"INSERT INTO {t} VALUES (3, 'after the table came again', 0)")
    wait_for(lambda: target.rows(f"SELECT COUNT(*) FROM {t} WHERE id = 3")[0][0] if
             "items" in [r[0] for r in target.rows(f"SHOW TABLES FROM `{schema}`")] else 0,
             60, "the table made again, with its row, on the target")
    target.execute(f"INSERT INTO {t} VALUES (4, 'after that on the target', 0)")
    wait_for(lambda: source.rows(f"SELECT COUNT(*) FROM {t} WHERE id = 4")[0][0], 60,
             "the target's row after the DROP to cross back")
    wait_equal(source, target, schema, ["items"])
    assert [row[0] for row in source.table(schema, "items")] == [3, 4]
    set_and_wait(cluster, "ddl-both", "STOP", "not running")


def test_a_create_table_under_the_source_databases_defaults_leaves_both_databases_as_they_are(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A CREATE TABLE runs on the target between two ALTER DATABASE that give it the source
    database's defaults and put the target's back: without the loop mark the opposite
    pipeline replayed them on the source, whose database took the target's defaults."""
    schema = make_schema(source, target, ITEMS)
    source.execute(f"ALTER DATABASE `{schema}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    target.execute(f"ALTER DATABASE `{schema}` CHARACTER SET latin1 COLLATE latin1_swedish_ci")
    started_with_ddl(cluster, "defaults-both", schema)
    t = f"`{schema}`.items"
    source.script(f"DROP TABLE {t}", ITEMS.format(schema=schema))
    wait_for(lambda: "items" in [r[0] for r in target.rows(f"SHOW TABLES FROM `{schema}`")]
             and target.rows("SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE "
                             "TABLE_SCHEMA = %s AND TABLE_NAME = 'items'", (schema,))
             == [("utf8mb4_bin",)], 60, "the table made on the target")
    target.execute(f"INSERT INTO {t} VALUES (1, 'after the DDL on the target', 0)")
    wait_for(lambda: source.rows(f"SELECT COUNT(*) FROM {t} WHERE id = 1")[0][0], 60,
             "the target's row after the DDL to cross back")  # its ALTERs read by then

    def defaults(db: Database) -> list[tuple]:
        return db.rows("SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM "
                       "information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (schema,))
    assert defaults(source) == [("utf8mb4", "utf8mb4_bin")]
    assert defaults(target) == [("latin1", "latin1_swedish_ci")]
    set_and_wait(cluster, "defaults-both", "STOP", "not running")



def test_a_drop_that_never_ran_on_the_other_side_does_not_swallow_a_later_drop_there(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A DROP replayed on the target of a table the target no longer had fails there and is
    taken as applied: its intent reached the target's binlog, the DROP never did. The
    opposite pipeline kept that intent and took the target users' own DROP of the name,
    much later, for its echo: the table stayed on the source for good."""
    schema = make_schema(source, target, ITEMS)
    channel = two_way("drop-intent-both", schema)
    for pipeline in channel["pipelines"]:
        pipeline["ddl_sync"] = True
        pipeline["pairs"] = [{"source": f"{schema}.{name}", "target": f"{schema}.{name}"}
                             for name in ("items", "marker")]
    cluster.apply([channel])
    start(cluster, "drop-intent-both")
    t = f"`{schema}`.items"

    def has_items(db: Database) -> bool:
        return "items" in [row[0] for row in db.rows(f"SHOW TABLES FROM `{schema}`")]

    target.script("SET SESSION sql_log_bin = 0", f"DROP TABLE {t}",
                  "SET SESSION sql_log_bin = 1")  # gone on the target alone, unseen
    source.execute(f"DROP TABLE {t}")  # replayed on the target: no such table there
    source.execute(f"CREATE TABLE `{schema}`.marker (id INT PRIMARY KEY)")
    wait_for(lambda: "marker" in [row[0] for row in target.rows(f"SHOW TABLES FROM `{schema}`")],
             60, "the DDL after the DROP on the target")
    target.execute(ITEMS.format(schema=schema))  # made again on the target: it crosses
    wait_for(lambda: has_items(source), 60, "the table made again on the source")
    target.execute(f"INSERT INTO {t} VALUES (1, 'made on the target', 0)")
    wait_equal(source, target, schema, ["items"])
    target.execute(f"DROP TABLE {t}")  # the target users' own: it crosses
    wait_for(lambda: not has_items(source), 60, "the target's DROP on the source")
    source.execute(f"INSERT INTO `{schema}`.marker VALUES (1)")
    wait_equal(source, target, schema, ["marker"])
    assert not has_items(source) and not has_items(target)
    set_and_wait(cluster, "drop-intent-both", "STOP", "not running")


def test_a_drop_whose_intent_was_read_before_a_restart_is_still_not_sent_back(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The forward pipeline's replay of a DROP on the target: its intent, then the DROP (as
    the server writes it, without the loop comment), played here by hand, the channel
    stopped between them. The backward pipeline loaded the stretch up to the intent: its
    position rested between the two, and restarted there it knew no intent, took the DROP
    for the target users' and ran it on the source, where the table had been made again
    meanwhile. No batch ends between an intent and its DROP now."""
    schema = make_schema(source, target, ITEMS)
    started_with_ddl(cluster, "drop-restart-both", schema)
    t = f"`{schema}`.items"
    made_again = [ITEMS.format(schema=schema), f"INSERT INTO {t} VALUES (3, 'made again', 0)"]
    # the source's users drop the table and make it again (their DDL: by hand, unlogged)
    source.script("SET SESSION sql_log_bin = 0", f"DROP TABLE {t}", *made_again,
                  "SET SESSION sql_log_bin = 1")
    target.execute(INTENT_DDL)
    target.execute("INSERT INTO retl.retl_ddl VALUES (%s, 'binlog.000001', 4, 0, %s, %s)",
                   ("drop-restart-both.forward", "0" * 64, f"DROP TABLE {t}"))
    file, pos = master_position(target)

    def loaded() -> bool:
        rows = source.rows("SELECT binlog_file, binlog_pos FROM retl.retl_position WHERE "
                           "pipeline_id = 'drop-restart-both.backward'")
        return bool(rows) and (rows[0][0], int(rows[0][1])) >= (file, int(pos))
    # a position-only batch goes at least every second: within seconds one would end past
    # the intent, and no batch may end there before its DROP came
    deadline = time.monotonic() + 4.0
    while not loaded() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not loaded(), "the backward pipeline's position rests between intent and DROP"
    set_and_wait(cluster, "drop-restart-both", "STOP", "not running")
    target.execute(f"DROP TABLE {t}")  # the forward pipeline's, after its intent
    target.script("SET SESSION sql_log_bin = 0", *made_again, "SET SESSION sql_log_bin = 1")
    target.execute("DELETE FROM retl.retl_ddl WHERE pipeline_id = 'drop-restart-both.forward'")
    start(cluster, "drop-restart-both")
    target.execute(f"INSERT INTO {t} VALUES (4, 'after the restart', 0)")
    wait_for(lambda: source.rows(f"SELECT COUNT(*) FROM {t} WHERE id = 4")[0][0]
             if "items" in [r[0] for r in source.rows(f"SHOW TABLES FROM `{schema}`")] else 0,
             60, "the target's row after the DROP on the source")
    wait_equal(source, target, schema, ["items"])
    assert [row[0] for row in source.table(schema, "items")] == [3, 4]
    set_and_wait(cluster, "drop-restart-both", "STOP", "not running")

