"""Tables without a primary key: keyed by a unique key over NOT NULL columns when they have
one; else keyless, replicated with no configuration in source order, each row found by its
whole before image, so duplicate rows and NULLs survive (``key_columns`` change nothing)."""

from __future__ import annotations

from collections import Counter

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for

LOGS = "CREATE TABLE `{schema}`.logs (at INT, message VARCHAR(50))"
CODES = ("CREATE TABLE `{schema}`.codes (code VARCHAR(10) NOT NULL, label VARCHAR(20), "
         "alias INT NULL, UNIQUE KEY (alias), UNIQUE KEY by_code (code))")


def running(cluster: Cluster, name: str, schema: str, tables: list[str]) -> None:
    """A one-way channel of ``tables`` applied, started and running."""
    cluster.apply([one_way(name, schema, tables)])
    cluster.set_status(name, "START")
    cluster.wait_running(name)


def same_rows(source: Database, target: Database, schema: str, table: str) -> bool:
    return Counter(source.table(schema, table)) == Counter(target.table(schema, table))


def test_a_keyless_table_replicates_with_duplicates_and_nulls_without_configuration(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, LOGS)
    # a copy by key of a keyless table is refused at apply, with the fix
    [error] = cluster.apply_errors([one_way("keyless-copy", schema, ["logs"],
                                            start="snapshot")])
    assert f"table {schema}.logs" in error and "'start: snapshot' cannot copy it in chunks " \
        "by key" in error and "give it a primary key" in error
    keyed = one_way("keyed-by-config", schema, ["logs"])
    keyed["pipelines"][0]["pairs"][0]["key_columns"] = ["at"]  # repeated and NULL: no harm
    # key_columns do not make it copyable: the node's copy would refuse it after the start
    keyed_copy = one_way("keyless-copy", schema, ["logs"], start="snapshot")
    keyed_copy["pipelines"][0]["pairs"][0]["key_columns"] = ["at"]
    [error] = cluster.apply_errors([keyed_copy])
    assert f"table {schema}.logs" in error and "key_columns at do not make it keyed" in error
    for channel in (one_way("keyless", schema, ["logs"]), keyed):
        name = channel["name"]
        target.execute(f"DELETE FROM `{schema}`.logs")
        source.execute(f"DELETE FROM `{schema}`.logs")
        cluster.apply([channel])
        cluster.set_status(name, "START")
        cluster.wait_running(name)
        t = f"`{schema}`.logs"
        source.script(f"INSERT INTO {t} VALUES (1, 'one'), (1, 'one'), (1, 'one'), "
                      "(NULL, NULL), (NULL, NULL), (2, 'two')",
                      f"UPDATE {t} SET message = 'ONE' WHERE at = 1 LIMIT 1",
                      f"UPDATE {t} SET at = 3 WHERE at IS NULL LIMIT 1",
                      f"DELETE FROM {t} WHERE at = 1 AND message = BINARY 'one' LIMIT 1",
                      f"UPDATE {t} SET message = 'TWO' WHERE at = 2")
        wait_for(lambda: same_rows(source, target, schema, "logs"), 60, f"{name}: same rows")
        assert Counter(target.table(schema, "logs")) == Counter(
            {(1, "one"): 1, (1, "ONE"): 1, (None, None): 1, (3, None): 1, (2, "TWO"): 1})
        cluster.set_status(name, "STOP")
        wait_for(lambda n=name: cluster.pipeline_state(n).state == "not running", 15, "stop")


def test_a_table_with_a_not_null_unique_key_replicates_by_it(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, CODES)
    running(cluster, "unique-key", schema, ["codes"])
    t = f"`{schema}`.codes"
    source.script(f"INSERT INTO {t} VALUES ('a', 'first', NULL), ('b', 'second', 2), "
                  "('c', 'third', NULL)",
                  f"UPDATE {t} SET label = 'changed' WHERE code = 'a'",
                  f"UPDATE {t} SET code = 'z' WHERE code = 'b'",
                  f"DELETE FROM {t} WHERE code = 'c'")
    wait_equal(source, target, schema, ["codes"])
    assert sorted(target.table(schema, "codes")) == [("a", "changed", None), ("z", "second", 2)]
    cluster.set_status("unique-key", "STOP")


def test_key_columns_that_are_no_unique_key_of_a_keyed_table_are_refused(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Orders keyed by id, found by key_columns [customer_id]: two orders of one customer
    became one target row, and a delete of either deleted it. Refused at apply, naming the
    table's key; a unique NOT NULL key of it is fine."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.lines (id INT PRIMARY KEY, "
                         "customer_id INT NOT NULL, code INT NOT NULL, UNIQUE KEY (code))")
    by_customer = one_way("by-customer", schema, ["lines"])
    by_customer["pipelines"][0]["pairs"][0]["key_columns"] = ["customer_id"]
    [error] = cluster.apply_errors([by_customer])
    assert f"table {schema}.lines" in error and "finds rows by key_columns customer_id, " \
        "which hold no unique key of it (its key is id)" in error
    by_customer["pipelines"][0]["pairs"][0]["key_columns"] = ["code"]
    assert cluster.apply_errors([by_customer]) == []


def test_key_columns_that_admit_null_are_refused_where_rows_are_found_by_them(
        cluster: Cluster, source: Database, target: Database) -> None:
    # codes is keyed by code; a pair that finds its rows by alias (NULL in two rows) would
    # take them for one row and never match their deletes
    schema = make_schema(source, target, CODES)
    by_alias = one_way("by-alias", schema, ["codes"])
    by_alias["pipelines"][0]["pairs"][0]["key_columns"] = ["ALIAS"]
    [error] = cluster.apply_errors([by_alias])
    assert f"table {schema}.codes" in error and "key_columns ALIAS that admit NULL" in error
    by_code = one_way("by-code", schema, ["codes"])
    by_code["pipelines"][0]["pairs"][0]["key_columns"] = ["code"]
    cluster.apply([by_code])
    cluster.set_status("by-code", "START")
    cluster.wait_running("by-code")
    t = f"`{schema}`.codes"
    source.script(f"INSERT INTO {t} VALUES ('a', 'first', NULL), ('b', 'second', NULL)",
                  f"DELETE FROM {t} WHERE code = 'a'")
    wait_equal(source, target, schema, ["codes"])
    assert target.table(schema, "codes") == [("b", "second", None)]
    cluster.set_status("by-code", "STOP")
    wait_for(lambda: cluster.pipeline_state("by-code").state == "not running", 15, "stop")
    # a key column made NULL-admitting after the apply, the table keyed by a new primary
    # key: the node refuses the start
    source.execute(f"ALTER TABLE {t} ADD n INT AUTO_INCREMENT PRIMARY KEY, "
                   "MODIFY code VARCHAR(10) NULL")
    cluster.set_status("by-code", "START")
    wait_for(lambda: "key_columns code that admit NULL" in
             cluster.pipeline_state("by-code").last_error, 60, "the start refused")
    cluster.set_status("by-code", "STOP")


def test_a_keyless_table_created_after_the_start_replicates_from_its_first_row(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, LOGS)
    channel = one_way("late-keyless", schema, [])
    channel["pipelines"][0]["pairs"] = [{"source": {"namespace": schema, "table": "re:logs_.*"},
                                         "target": f"{schema}.logs"}]
    cluster.apply([channel])
    cluster.set_status("late-keyless", "START")
    cluster.wait_running("late-keyless")
    source.script(LOGS.format(schema=schema).replace(".logs", ".logs_1"),  # keyed by nothing
                  f"INSERT INTO `{schema}`.logs_1 VALUES (1, 'a'), (1, 'a'), (NULL, 'b')",
                  f"DELETE FROM `{schema}`.logs_1 WHERE at = 1 LIMIT 1")
    wait_for(lambda: Counter(target.table(schema, "logs")) == Counter(
        source.table(schema, "logs_1")), 60, "the new table's rows on the target")
    assert cluster.channel_status("late-keyless") == "START"
    cluster.set_status("late-keyless", "STOP")


def test_binary_keys_ending_in_zero_bytes_are_found_on_the_target(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The binlog gives a BINARY(n) value without the zero bytes that pad it; a delete or a
    key change found by it must still find the row (one UUID in 256 ends in 00)."""
    schema = make_schema(source, target,
                         "CREATE TABLE `{schema}`.bk (k BINARY(4) PRIMARY KEY, v INT)",
                         "CREATE TABLE `{schema}`.bl (k BINARY(4), v INT)")  # keyless
    running(cluster, "binary-keys", schema, ["bk", "bl"])
    rows = "(X'61620000', 1), (X'65660000', 2), (X'00000000', 3), (X'01000001', 4)"
    source.script(f"INSERT INTO `{schema}`.bk VALUES {rows}",
                  f"INSERT INTO `{schema}`.bl VALUES {rows}, {rows}")
    wait_equal(source, target, schema, ["bk"])
    for table in ("bk", "bl"):
        t = f"`{schema}`.{table}"
        source.script(f"DELETE FROM {t} WHERE k = X'61620000' LIMIT 1",
                      f"UPDATE {t} SET k = X'67680000' WHERE k = X'65660000' LIMIT 1",
                      f"UPDATE {t} SET v = 5 WHERE k = X'00000000' LIMIT 1")
    wait_for(lambda: all(Counter(source.table(schema, t)) == Counter(target.table(schema, t))
                         for t in ("bk", "bl")), 60, "the same rows")
    assert sorted(target.table(schema, "bk")) == [
        (b"\x00\x00\x00\x00", 5), (b"\x01\x00\x00\x01", 4), (b"gh\x00\x00", 2)]
    cluster.set_status("binary-keys", "STOP")


def test_a_target_table_without_a_key_to_meet_in_stops_the_pipeline_naming_it(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The source's rows are keyed by id; the target table has no unique index on it: an
    update written as an upsert would add a row beside the old one."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.kt (id INT PRIMARY KEY, "
                         "v INT)")
    target.execute(f"DROP TABLE `{schema}`.kt")
    target.execute(f"CREATE TABLE `{schema}`.kt (n INT AUTO_INCREMENT PRIMARY KEY, id INT, "
                   "v INT)")
    running(cluster, "unkeyed-target", schema, ["kt"])
    source.script(f"INSERT INTO `{schema}`.kt VALUES (1, 0)",
                  f"UPDATE `{schema}`.kt SET v = 1 WHERE id = 1")
    wait_for(lambda: "has no primary key or unique key over (id)" in
             cluster.pipeline_state("unkeyed-target").last_error, 90, "the pipeline stopped")
    assert target.rows(f"SELECT id, v FROM `{schema}`.kt") == []
    cluster.set_status("unkeyed-target", "STOP")


def test_a_keyless_update_keeps_a_column_the_target_would_stamp_on_update(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A keyless row's update sets every column: one left out because it did not change
    would take the target's own time from ON UPDATE CURRENT_TIMESTAMP."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.stamps (n INT, at "
                         "TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE "
                         "CURRENT_TIMESTAMP(6))")
    running(cluster, "keyless-stamps", schema, ["stamps"])
    t = f"`{schema}`.stamps"
    source.script(f"INSERT INTO {t} VALUES (1, '2020-01-01 00:00:00'), "
                  "(1, '2020-01-01 00:00:00')",
                  f"UPDATE {t} SET n = 2, at = at LIMIT 1")
    wait_for(lambda: sorted(row[0] for row in target.table(schema, "stamps")) == [1, 2], 60,
             "the update on the target")
    assert Counter(target.table(schema, "stamps")) == Counter(source.table(schema, "stamps"))
    cluster.set_status("keyless-stamps", "STOP")


def test_a_key_column_whose_name_holds_a_comma_is_one_column(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Index columns are read one per row: a name joined with others by commas and split
    again became two columns that do not exist."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.commas (`a,b` INT NOT NULL, "
                         "v INT, UNIQUE KEY by_ab (`a,b`))")
    running(cluster, "comma-key", schema, ["commas"])
    t = f"`{schema}`.commas"
    source.script(f"INSERT INTO {t} VALUES (1, 10), (2, 20), (3, 30)",
                  f"UPDATE {t} SET `a,b` = 4 WHERE `a,b` = 1",
                  f"UPDATE {t} SET v = 21 WHERE `a,b` = 2", f"DELETE FROM {t} WHERE `a,b` = 3")
    wait_equal(source, target, schema, ["commas"])
    assert sorted(target.table(schema, "commas")) == [(2, 21), (4, 10)]
    cluster.set_status("comma-key", "STOP")



def test_a_system_versioned_table_stops_the_pipeline_before_its_rows(
        cluster: Cluster, source: Database, target: Database) -> None:
    """MariaDB logs a versioned table's DELETE as an UPDATE of row_end and each UPDATE's old
    version as an INSERT: replicated, the target kept deleted rows and gained every old
    version. Made after the start, it stops the pipeline before its first rows; at a start,
    it is refused."""
    schema = make_schema(source, target, LOGS)
    channel = one_way("versioned", schema, [])
    channel["pipelines"][0]["pairs"] = [{"source": {"namespace": schema, "table": "re:h_.*"},
                                         "target": {"namespace": schema, "table": "{table}"}}]
    target.execute(f"CREATE TABLE `{schema}`.h_1 (id INT PRIMARY KEY, v INT)")
    cluster.apply([channel])
    cluster.set_status("versioned", "START")
    cluster.wait_running("versioned")
    source.script(f"CREATE TABLE `{schema}`.h_1 (id INT PRIMARY KEY, v INT) WITH SYSTEM "
                  "VERSIONING", f"INSERT INTO `{schema}`.h_1 VALUES (1, 1)",
                  f"DELETE FROM `{schema}`.h_1 WHERE id = 1")
    said = f"{schema}.h_1 is a system-versioned table (WITH SYSTEM VERSIONING), which setl " \
           "does not replicate"
    wait_for(lambda: said in cluster.pipeline_state("versioned").last_error, 60,
             "the pipeline to stop")
    assert target.table(schema, "h_1") == []
    cluster.set_status("versioned", "STOP")
    again = one_way("versioned-again", schema, [])  # the table there at the start
    again["pipelines"][0]["pairs"] = channel["pipelines"][0]["pairs"]
    cluster.apply([again])
    cluster.set_status("versioned-again", "START")
    wait_for(lambda: said in cluster.pipeline_state("versioned-again").last_error, 60,
             "the start refused")
    assert target.table(schema, "h_1") == []
    cluster.set_status("versioned-again", "STOP")
