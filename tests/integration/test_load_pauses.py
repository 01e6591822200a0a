"""Load on a real target: target tables it pauses on (or refuses) before their rows would be
written wrong — triggers, an engine that does not roll back, two target data sources on one
server, a key that folds case the source keeps, a column that would round or stamp the
source's values."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest

from node.jobs import PartResult, Unit
from node.target.mysql import loaddata
from node.target.mysql.loader import Loader
from node.target.mysql.sqltext import Sql
from shared.errors import LoadError
from shared.model import PipelineParams
from tests.devcluster import make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes, beside
from tests.integration.test_load import ITEMS, batch, copy_unit, target_endpoint


def test_a_target_table_with_triggers_pauses_before_its_rows_are_written_twice(
        cluster, source, target):
    """The target's schema was copied with mysqldump, which brings triggers: the source's
    trigger wrote an audit row that comes in the binlog, and the target's own would write
    it again for the row setl writes (native row replication fires none). The pipeline
    pauses before the batch, naming the trigger; dropped, the batch loads once. The
    keyless, unique-swap and sum tables of the same pipeline go through the pause."""
    schema = make_schema(source, target, ITEMS, "CREATE TABLE `{schema}`.audit (item INT)")
    t = f"`{schema}`"
    trigger = (f"CREATE TRIGGER {t}.noted AFTER INSERT ON {t}.items FOR EACH ROW "
               f"INSERT INTO {t}.audit VALUES (NEW.id)")
    source.execute(trigger)
    target.execute(trigger)
    shapes = Shapes(cluster.sandbox, source, target, seed=59)
    cluster.apply([beside(one_way("fired", schema, ["items", "audit"], max_retries=0),
                          shapes.schema)])
    cluster.set_status("fired", "START")
    cluster.wait_running("fired")
    shapes.start()
    try:
        shapes.wait_transactions(30)
        source.execute(f"INSERT INTO {t}.items VALUES (1, 'a'), (2, 'b')")
        wait_for(lambda: cluster.channel_status("fired") == "PAUSE", 60, "the pause")
        error = cluster.pipeline_state("fired").last_error
        assert f"target table {schema}.items on target has trigger noted" in error, error
        assert target.table(schema, "audit") == []
        target.execute(f"DROP TRIGGER {t}.noted")
        cluster.set_status("fired", "START")
        wait_equal(source, target, schema, ["items", "audit"])
        assert sorted(target.table(schema, "audit")) == [(1,), (2,)]  # once each
        shapes.keep_on()
        shapes.finish(source)
    finally:
        shapes.stop()
    cluster.set_status("fired", "STOP")


def test_a_target_table_that_does_not_roll_back_pauses_before_its_rows(
        cluster, source, target):
    """A MyISAM target table takes a batch's rows before its position commits, and again
    after a crash (a keyless table's twice): the pipeline pauses before writing it, saying
    how to convert it; converted, the batch loads whole, duplicate keyless rows and all."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.kl (a INT, b VARCHAR(9))")
    target.execute(f"ALTER TABLE `{schema}`.kl ENGINE=MyISAM")
    cluster.apply([one_way("engine", schema, ["kl"], max_retries=0)])
    cluster.set_status("engine", "START")
    cluster.wait_running("engine")
    source.script("BEGIN", f"INSERT INTO `{schema}`.kl VALUES (1, 'twin'), (1, 'twin')",
                  "COMMIT")
    wait_for(lambda: cluster.channel_status("engine") == "PAUSE", 60, "the pause")
    error = cluster.pipeline_state("engine").last_error
    assert f"target table {schema}.kl on target is MyISAM, whose writes do not roll back" \
        in error and "ENGINE=InnoDB" in error, error
    assert target.table(schema, "kl") == []
    target.execute(f"ALTER TABLE `{schema}`.kl ENGINE=InnoDB")
    cluster.set_status("engine", "START")
    wait_equal(source, target, schema, ["kl"])
    assert target.table(schema, "kl") == [(1, "twin"), (1, "twin")]
    cluster.set_status("engine", "STOP")



def test_two_target_datasources_on_one_server_are_refused_naming_them(cluster, source, target):
    """They would share the pipeline's position row: the second to load a batch found it
    loaded by the first and wrote nothing."""
    schema = make_schema(source, target, ITEMS, ITEMS.replace(".items", ".others"))
    servers = cluster.sandbox.servers()
    sources = [{"name": name, "host": host, "port": servers[server].port, "user": "setl",
                "password": f"file:{cluster.sandbox.secret_file}"}
               for name, host, server in (("source", "127.0.0.1", "source"),
                                          ("target", "127.0.0.1", "target"),
                                          ("target_too", "localhost", "target"))]
    channel = one_way("one-server", schema, ["items"])
    channel["pipelines"][0]["pairs"].append(
        {"source": f"{schema}.others",
         "target": {"datasource": "target_too", "namespace": schema, "table": "others"}})
    cluster.apply([channel], sources)
    cluster.set_status("one-server", "START")
    wait_for(lambda: "are one server" in cluster.pipeline_state("one-server").last_error, 90,
             "the refusal")
    error = cluster.pipeline_state("one-server").last_error
    assert "targets target and target_too are one server" in error or \
        "targets target_too and target are one server" in error
    cluster.set_status("one-server", "STOP")


def test_a_target_key_that_folds_case_the_source_keeps_pauses_before_rows_merge(
        cluster, source, target):
    """The source keys rows by a utf8mb4_bin column, the target's copy of the table was
    made with utf8mb4_general_ci: 'a' and 'A' are two rows on the source and one key on the
    target, where the second write landed on the first row and a delete of 'A' then took
    'a' with it, silently. The pipeline pauses before writing, naming the column and both
    collations; with the target's column altered as it says, both rows arrive."""
    assert source.rows("SELECT 'a' = 'a ' COLLATE utf8mb4_bin, "  # MariaDB's _bin pads
                       "'a' = 'a ' COLLATE utf8mb4_nopad_bin") == [(1, 0)]
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.codes (code VARCHAR(10) "
                         "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, n INT)")
    t = f"`{schema}`"
    target.execute(f"ALTER TABLE {t}.codes MODIFY code VARCHAR(10) CHARACTER SET utf8mb4 "
                   "COLLATE utf8mb4_general_ci")
    cluster.apply([one_way("keyfold", schema, ["codes"], max_retries=0)])
    cluster.set_status("keyfold", "START")
    cluster.wait_running("keyfold")
    source.execute(f"INSERT INTO {t}.codes VALUES ('a', 1), ('A', 2)")
    wait_for(lambda: cluster.channel_status("keyfold") == "PAUSE", 60, "the pause")
    error = cluster.pipeline_state("keyfold").last_error
    for part in (f"target table {schema}.codes on target: key column code has collation "
                 "utf8mb4_general_ci", "column code (utf8mb4_bin)",
                 f"ALTER TABLE {schema}.codes MODIFY code varchar(10) CHARACTER SET utf8mb4 "
                 "COLLATE utf8mb4_bin"):
        assert part in error, error
    assert target.table(schema, "codes") == []
    target.execute(f"ALTER TABLE {t}.codes MODIFY code VARCHAR(10) CHARACTER SET utf8mb4 "
                   "COLLATE utf8mb4_bin")
    cluster.set_status("keyfold", "START")
    wait_equal(source, target, schema, ["codes"])
    source.execute(f"DELETE FROM {t}.codes WHERE code = 'A'")
    wait_equal(source, target, schema, ["codes"])
    assert target.table(schema, "codes") == [("a", 1)]
    cluster.set_status("keyfold", "STOP")


def test_a_copy_into_a_target_key_that_folds_case_pauses_before_rows_merge(
        cluster, source, target):
    """As above for a table copied (``start: snapshot``) as LOAD DATA lines, which go to the
    target without a batch of their own: 'a' and 'A' were two source rows and one target
    row, silently. The copy fails, saying why in status, until the column is altered."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.codes (code VARCHAR(10) "
                         "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, n INT)")
    t = f"`{schema}`"
    target.execute(f"ALTER TABLE {t}.codes MODIFY code VARCHAR(10) CHARACTER SET utf8mb4 "
                   "COLLATE utf8mb4_general_ci")
    source.execute(f"INSERT INTO {t}.codes VALUES ('a', 1), ('A', 2)")
    source.execute(f"USE {t}")
    source.execute(f"INSERT INTO {t}.codes SELECT CONCAT('k', seq), seq FROM seq_1_to_500")
    cluster.apply([one_way("keyfoldcopy", schema, ["codes"], max_retries=0, start="snapshot",
                           load_data_min_rows=2)])
    cluster.set_status("keyfoldcopy", "START")
    wait_for(lambda: "key column code has collation utf8mb4_general_ci" in
             cluster.pipeline_state("keyfoldcopy").last_error, 90,
             "the copy refused, said in status")
    assert target.rows(f"SELECT COUNT(*) FROM {t}.codes WHERE code IN ('a', 'A')")[0][0] == 0
    target.execute(f"ALTER TABLE {t}.codes MODIFY code VARCHAR(10) CHARACTER SET utf8mb4 "
                   "COLLATE utf8mb4_bin")
    wait_equal(source, target, schema, ["codes"], 90)  # the copy tried again
    cluster.set_status("keyfoldcopy", "STOP")


def test_a_load_data_the_target_rounds_a_value_of_fails_with_nothing_written(
        sandbox, source, target):
    """A strict session still rounds a DECIMAL given more digits than its scale, with only a
    note (1265): LOAD DATA lines of the stream or of a copy wrote 1.26 for 1.255, silently.
    Now the statement fails, naming what the target said, and nothing of the batch or of
    the copy is written."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, "
                         "d DECIMAL(5,2))")
    loader = Loader(f"rounded-{schema}.forward", {"target": target_endpoint(sandbox)},
                    PipelineParams())
    try:
        head = loaddata.head(schema, "items", ["`id`", "`d`"])
        stream = PartResult([Unit("target", schema, "items", 0, 1 << 20,
                                  [Sql(head, 2, data=b"1\t1.25\n2\t1.255\n")], 2)], [], 2)
        with pytest.raises(LoadError) as raised:
            loader.load_units(batch(1, 100), [stream])
        for part in (f"table {schema}.items", "the target changed values as it loaded them",
                     "Data truncated for column 'd'"):
            assert part in str(raised.value), raised.value
        copied = copy_unit(schema, b"3\t3\t1.5\n4\t4\t2.125\n", 2)
        copied.sqls[:] = [Sql(loaddata.head(schema, "items", ["@setl_key", "`id`", "`d`"]),
                              2, data=copied.sqls[0].data)]
        with pytest.raises(Exception, match="the target changed values as it loaded them"):
            loader.load_units(batch(1, 100), [PartResult([copied], [], 2)])
        assert target.table(schema, "items") == []
    finally:
        loader.close()


def test_a_target_column_that_would_round_or_stamp_source_values_pauses_before_rows(
        cluster, source, target):
    """A target table made apart from its source: a DECIMAL of a smaller scale kept 1.255
    as 1.26, a DATETIME of fewer fractional digits rounded them, and a TIMESTAMP NOT NULL
    stored the time of the load for the source's NULL, all without an error. The batch
    pauses before writing, naming each column and the ALTER to run; with the target altered
    as it says, every value arrives as the source has it."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.prices (id INT PRIMARY KEY, "
                         "amount DECIMAL(10,3), at DATETIME(6), seen TIMESTAMP NULL "
                         "DEFAULT NULL)")
    t = f"`{schema}`.prices"
    target.execute(f"ALTER TABLE {t} MODIFY amount DECIMAL(10,2), MODIFY at DATETIME, "
                   "MODIFY seen TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP")
    cluster.apply([one_way("roundload", schema, ["prices"], max_retries=0)])
    cluster.set_status("roundload", "START")
    cluster.wait_running("roundload")
    source.execute(f"INSERT INTO {t} VALUES (1, 1.255, '2020-01-01 10:00:00.700000', NULL), "
                   "(2, 2.5, '2020-01-02 00:00:00', '2020-01-03 04:05:06')")
    for column, alter in (("amount", "DECIMAL(10,3)"), ("at", "DATETIME(6)"),
                          ("seen", "TIMESTAMP NULL DEFAULT NULL")):
        wait_for(lambda c=column: f"target table {schema}.prices on target: column {c} " in
                 cluster.pipeline_state("roundload").last_error, 60, f"the pause on {column}")
        assert cluster.channel_status("roundload") == "PAUSE"
        assert target.table(schema, "prices") == []
        target.execute(f"ALTER TABLE {t} MODIFY {column} {alter}")
        cluster.set_status("roundload", "START")
    wait_equal(source, target, schema, ["prices"])
    assert target.rows(f"SELECT amount, at, seen FROM {t} WHERE id = 1") == [
        (Decimal("1.255"), datetime(2020, 1, 1, 10, 0, 0, 700000), None)]
    cluster.set_status("roundload", "STOP")

