"""Transactions as applications write them: savepoints (Django's nested atomic(),
SQLAlchemy's begin_nested(), Spring's NESTED) are part of their transaction — the binlog
holds what survived, and all of it reaches the target — with DDL sync off and on; an XA
transaction and a statement-format change inside a transaction stop the pipeline with a
message naming it and its position, never a silent drop."""

from __future__ import annotations

import pytest

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for

TABLES = ("CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, note VARCHAR(40))",
          "CREATE TABLE `{schema}`.kl (a INT, b VARCHAR(20))")


def savepoint_transactions(db: Database, schema: str) -> None:
    t, kl = f"`{schema}`.items", f"`{schema}`.kl"
    db.script(  # the two: rows before the savepoint, a ROLLBACK TO in the middle
        "BEGIN", f"INSERT INTO {t} VALUES (900001, 'sp-before')", "SAVEPOINT s1",
        f"INSERT INTO {t} VALUES (900002, 'sp-after')", "COMMIT",
        "BEGIN", f"INSERT INTO {t} VALUES (900003, 'sp2-before')", "SAVEPOINT s2",
        f"INSERT INTO {t} VALUES (900004, 'rolled back')", "ROLLBACK TO SAVEPOINT s2",
        f"INSERT INTO {t} VALUES (900005, 'sp2-after')", "COMMIT")
    db.script(  # nested, released, rolled back to an outer one, over a keyless table too
        "START TRANSACTION", f"INSERT INTO {kl} VALUES (1, 'outer'), (1, 'outer')",
        "SAVEPOINT a", f"INSERT INTO {kl} VALUES (2, 'a')", "SAVEPOINT b",
        f"INSERT INTO {kl} VALUES (3, 'b')", "RELEASE SAVEPOINT b", "SAVEPOINT c",
        f"UPDATE {kl} SET b = 'undone' WHERE a = 1 LIMIT 1", "ROLLBACK WORK TO c",
        f"DELETE FROM {kl} WHERE a = 2", "SAVEPOINT d",
        f"INSERT INTO {t} VALUES (900006, 'nested')", "ROLLBACK TO SAVEPOINT a",
        f"INSERT INTO {kl} VALUES (4, 'after a'), (4, 'after a')",
        f"UPDATE {t} SET note = 'changed' WHERE id = 900001", "COMMIT")


@pytest.mark.parametrize("ddl_sync", [False, True], ids=["ddl_off", "ddl_on"])
def test_savepoints_keep_every_row_of_their_transaction(cluster, source, target, ddl_sync):
    schema = make_schema(source, target, *TABLES)
    name = f"savepoints-{'ddl' if ddl_sync else 'plain'}"
    cluster.apply([one_way(name, schema, ["items", "kl"], ddl_sync=ddl_sync)])
    cluster.set_status(name, "START")
    cluster.wait_running(name)
    savepoint_transactions(source, schema)
    source.execute(f"INSERT INTO `{schema}`.items VALUES (1, 'last')")
    wait_equal(source, target, schema, ["items", "kl"])
    assert [row[0] for row in target.table(schema, "items")] == [
        1, 900001, 900002, 900003, 900005]
    assert sorted(target.table(schema, "kl")) == [(1, "outer"), (1, "outer"), (4, "after a"),
                                                  (4, "after a")]
    state = cluster.pipeline_state(name)
    assert (state.state, state.last_error) == ("running", "")
    cluster.set_status(name, "STOP")


def test_what_a_rollback_undid_goes_though_a_temporary_or_myisam_table_kept_it_in_the_binlog(
        cluster, source, target):
    """A transaction that also wrote a temporary or a non-transactional (MyISAM) table keeps
    the rows a ROLLBACK TO SAVEPOINT or a ROLLBACK undid in the binlog, then the statement:
    the undone rows of transactional tables never reach the target, the MyISAM rows (which
    the source kept) do, a keyless table's duplicates included."""
    schema = make_schema(source, target, *TABLES,
                         "CREATE TABLE `{schema}`.mlog (id INT PRIMARY KEY) ENGINE=MyISAM")
    t, kl, m = (f"`{schema}`.{name}" for name in ("items", "kl", "mlog"))
    target.execute(f"ALTER TABLE {m} ENGINE=InnoDB")  # (a MyISAM target table is refused)
    cluster.apply([one_way("undone", schema, ["items", "kl", "mlog"])])
    cluster.set_status("undone", "START")
    cluster.wait_running("undone")
    source.script(
        "BEGIN", f"INSERT INTO {t} VALUES (10, 'undone by ROLLBACK')",
        f"INSERT INTO {kl} VALUES (10, 'undone'), (10, 'undone')",
        f"CREATE TEMPORARY TABLE `{schema}`.tmpy (a INT)", "ROLLBACK",
        f"DROP TEMPORARY TABLE IF EXISTS `{schema}`.tmpy")
    source.script(
        "BEGIN", f"INSERT INTO {t} VALUES (20, 'keep')",
        f"CREATE TEMPORARY TABLE `{schema}`.tmpx (a INT)", "SAVEPOINT s",
        f"INSERT INTO {t} VALUES (21, 'undone by ROLLBACK TO')",
        f"INSERT INTO {kl} VALUES (21, 'undone')", "ROLLBACK TO SAVEPOINT s",
        f"INSERT INTO {t} VALUES (22, 'keep')", "COMMIT",
        f"DROP TEMPORARY TABLE `{schema}`.tmpx")
    source.script(
        "BEGIN", f"INSERT INTO {t} VALUES (30, 'keep')",
        f"INSERT INTO {kl} VALUES (30, 'keep'), (30, 'keep')", f"INSERT INTO {m} VALUES (1)",
        "SAVEPOINT `a savepoint`", f"INSERT INTO {t} VALUES (31, 'undone by ROLLBACK TO')",
        f"UPDATE {kl} SET b = 'undone' WHERE a = 30 LIMIT 1", f"INSERT INTO {m} VALUES (2)",
        "ROLLBACK TO SAVEPOINT `a savepoint`", "COMMIT")
    source.script("BEGIN", f"INSERT INTO {t} VALUES (40, 'undone by ROLLBACK')",
                  f"INSERT INTO {m} VALUES (3)", "ROLLBACK")
    source.execute(f"INSERT INTO {t} VALUES (99, 'last')")
    wait_for(lambda: (99, "last") in target.table(schema, "items"), 90, "the last row")
    assert target.table(schema, "items") == [(20, "keep"), (22, "keep"), (30, "keep"),
                                             (99, "last")]
    assert sorted(target.table(schema, "kl")) == [(30, "keep"), (30, "keep")]
    assert target.table(schema, "mlog") == [(1,), (2,), (3,)]  # MyISAM: the source kept them
    wait_equal(source, target, schema, ["items", "kl", "mlog"])
    state = cluster.pipeline_state("undone")
    assert (state.state, state.last_error) == ("running", "")
    cluster.set_status("undone", "STOP")


def test_an_xa_transaction_stops_the_pipeline_with_its_position(sandbox, tmp_path):
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, *TABLES)
    cluster = Cluster(sandbox, tmp_path, "xa")
    t = f"`{schema}`.items"
    try:
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([one_way("xa", schema, ["items"], max_retries=0)])
        cluster.set_status("xa", "START")
        cluster.wait_running("xa")
        source.execute(f"INSERT INTO {t} VALUES (1, 'before')")
        wait_equal(source, target, schema, ["items"])
        source.script("XA START 'setl-xa'", f"INSERT INTO {t} VALUES (2, 'in xa')",
                      "XA END 'setl-xa'", "XA PREPARE 'setl-xa'", "XA COMMIT 'setl-xa'")
        error = wait_for(lambda: cluster.pipeline_state("xa").last_error, 60,
                         "the pipeline to stop at the XA transaction")
        assert "XA transaction" in error and "binlog.0" in error, error
        wait_for(lambda: cluster.channel_status("xa") == "PAUSE", 60, "the channel to pause")
        assert target.table(schema, "items") == [(1, "before")]  # nothing half-applied
    finally:
        cluster.stop()
        source.close()
        target.close()
