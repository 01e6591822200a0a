"""Transform capabilities through `setl apply` and a running node on real servers."""

from __future__ import annotations

from tests.devcluster import Cluster, Database, make_schema, wait_for

PEOPLE = ("CREATE TABLE `{schema}`.people (id INT PRIMARY KEY, first VARCHAR(20), "
          "last VARCHAR(20), address VARCHAR(60), email VARCHAR(60), name VARCHAR(20))")
PEOPLE_COPY = ("CREATE TABLE `{schema}`.people_copy (id INT PRIMARY KEY, full_name VARCHAR(41), "
               "city VARCHAR(30), street VARCHAR(30), email VARCHAR(80), name VARCHAR(20), "
               "origin VARCHAR(10), shout VARCHAR(30))")


def run(cluster: Cluster, name: str, schema: str, pair: dict) -> None:
    cluster.apply([{"name": name, "pipelines": [{"name": "forward", "source": "source",
                                                  "target": "target", "pairs": [pair]}]}])
    cluster.set_status(name, "START")
    cluster.wait_running(name)


def test_processor_virtual_columns_and_column_merge_split(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, PEOPLE)
    target.execute(PEOPLE_COPY.format(schema=schema))
    run(cluster, "reshape", schema, {
        "source": f"{schema}.people", "target": f"{schema}.people_copy",
        "processor": "setl_examples:skip_test_rows",
        "columns": {"exclude": ["first", "last", "address"]},
        "virtual_columns": [
            {"name": "full_name", "expression": "concat_ws(' ', first, last)"},
            {"name": "city", "expression": "trim(split_part(address, ',', 0))"},
            {"name": "street", "expression": "trim(split_part(address, ',', 1))"},
            {"name": "origin", "value": "eu-1"},
            {"name": "shout", "expression": "upper(name) + '!' if name else null"}]})
    t = f"`{schema}`.people"
    source.script(
        f"INSERT INTO {t} VALUES (1, 'Ada', 'Lovelace', 'London, 12 Baker St', 'a@x.org', "
        "'ada'), (2, 'Test', 'Row', 'Nowhere, 0', 't@x.org', 'test_2'), "
        "(3, 'Alan', NULL, NULL, NULL, NULL)",
        f"UPDATE {t} SET address = 'Paris , 5 rue Y' WHERE id = 1",
        f"DELETE FROM {t} WHERE id = 3")
    wait_for(lambda: target.rows(f"SELECT city FROM `{schema}`.people_copy WHERE id = 1")
             == [("Paris",)], 30, "the update")
    wait_for(lambda: len(target.table(schema, "people_copy")) == 1, 30, "the delete")
    assert target.table(schema, "people_copy") == [
        (1, "Ada Lovelace", "Paris", "5 rue Y", "a@x.org", "ada", "eu-1", "ADA!")]
    cluster.set_status("reshape", "STOP")


def test_a_failing_virtual_column_pauses_the_channel_with_the_row_named(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, PEOPLE)
    target.execute(f"ALTER TABLE `{schema}`.people ADD COLUMN n INT")
    cluster.apply([{"name": "bad-row", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "max_retries": 0,
        "pairs": [{"source": f"{schema}.people", "target": f"{schema}.people",
                   "processor": "setl_examples:mask_email",
                   "virtual_columns": [{"name": "n", "expression": "int(name)"}]}]}]}])
    cluster.set_status("bad-row", "START")
    cluster.wait_running("bad-row")
    source.execute(f"INSERT INTO `{schema}`.people (id, email, name) VALUES (42, 'x@y.z', '7')")
    wait_for(lambda: target.table(schema, "people"), 30, "the good row")
    assert target.rows(f"SELECT email, n FROM `{schema}`.people")[0][0].endswith("@y.z")
    assert target.rows(f"SELECT n FROM `{schema}`.people") == [(7,)]
    source.execute(f"INSERT INTO `{schema}`.people (id, name) VALUES (43, 'seven')")
    wait_for(lambda: cluster.channel_status("bad-row") == "PAUSE", 60, "the pause")
    error = cluster.pipeline_state("bad-row").last_error
    assert "virtual column n failed on key (43,): ValueError" in error, error
    assert f"pair source:{schema}.people" in error, error
    assert len(target.table(schema, "people")) == 1
    cluster.set_status("bad-row", "STOP")


CUSTOMERS = "CREATE TABLE `{schema}`.customers (id INT PRIMARY KEY, name VARCHAR(20))"
PROFILES = ("CREATE TABLE `{schema}`.profiles (pid INT PRIMARY KEY, "
            "customer_id INT NOT NULL UNIQUE, city VARCHAR(20), tier VARCHAR(10))")
WIDE = ("CREATE TABLE `{schema}`.customer_wide (id INT PRIMARY KEY, name VARCHAR(20), "
        "city VARCHAR(20), tier VARCHAR(10))")


def test_table_merge_n_to_1_builds_one_wide_row(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, CUSTOMERS, PROFILES)
    target.execute(WIDE.format(schema=schema))
    # a profile written before replication starts: only a lookup can bring it
    source.execute(f"INSERT INTO `{schema}`.profiles VALUES (100, 1, 'Oslo', 'gold')")
    wide = f"{schema}.customer_wide"
    cluster.apply([{"name": "wide", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": [
            {"source": f"{schema}.customers", "target": wide,
             "joins": [{"table": f"{schema}.profiles", "by": "id", "key": "customer_id",
                        "columns": ["city", "tier"], "missing": "keep"}]},
            {"source": f"{schema}.profiles", "target": wide, "merge_part": True,
             "key_columns": ["customer_id"], "columns": {"include": ["city", "tier"]},
             "column_pairs": [{"source": "customer_id", "target": "id"}]}]}]}])
    cluster.set_status("wide", "START")
    cluster.wait_running("wide")
    c, p = f"`{schema}`.customers", f"`{schema}`.profiles"
    source.script(f"INSERT INTO {c} VALUES (1, 'ann'), (2, 'bob')",
                  f"INSERT INTO {p} VALUES (200, 2, 'Rome', 'silver')",
                  f"UPDATE {p} SET tier = 'gold' WHERE pid = 200",
                  f"UPDATE {c} SET name = 'Ann' WHERE id = 1",
                  f"INSERT INTO {c} VALUES (3, 'cy')")
    wait_for(lambda: len(target.table(schema, "customer_wide")) == 3, 30, "three wide rows")
    wait_for(lambda: target.table(schema, "customer_wide") == [
        (1, "Ann", "Oslo", "gold"), (2, "bob", "Rome", "gold"), (3, "cy", None, None)],
        30, "the wide rows")
    source.execute(f"DELETE FROM {p} WHERE pid = 100")  # a part goes: its columns clear
    wait_for(lambda: target.table(schema, "customer_wide")[0] == (1, "Ann", None, None), 30,
             "the cleared part")
    # a customer and its profile deleted together: the clear kept the wide row, half
    source.script("BEGIN", f"DELETE FROM {c} WHERE id = 2", f"DELETE FROM {p} WHERE pid = 200",
                  "COMMIT")
    wait_for(lambda: [r[0] for r in target.table(schema, "customer_wide")] == [1, 3], 30,
             "customer 2 gone whole")
    # a profile moved to another customer: the old customer's wide row was deleted whole
    source.execute(f"INSERT INTO {p} VALUES (101, 1, 'Bergen', 'bronze')")
    wait_for(lambda: target.table(schema, "customer_wide")[0] == (1, "Ann", "Bergen",
                                                                    "bronze"), 30, "a profile")
    source.execute(f"UPDATE {p} SET customer_id = 3 WHERE pid = 101")
    wait_for(lambda: target.table(schema, "customer_wide") == [
        (1, "Ann", None, None), (3, "cy", "Bergen", "bronze")], 30, "the profile moved")
    # a part cleared after its customer went (another batch): the clear made the row again
    source.execute(f"DELETE FROM {c} WHERE id = 3")
    wait_for(lambda: [r[0] for r in target.table(schema, "customer_wide")] == [1], 30,
             "customer 3 gone")
    source.execute(f"DELETE FROM {p} WHERE pid = 101")
    source.execute(f"UPDATE {c} SET name = 'ANN' WHERE id = 1")  # after it in the binlog
    wait_for(lambda: target.table(schema, "customer_wide")[0][1] == "ANN", 30, "the rename")
    assert target.table(schema, "customer_wide") == [(1, "ANN", None, None)]
    cluster.set_status("wide", "STOP")


def test_a_wide_row_part_gaining_a_column_another_part_writes_pauses_before_its_rows(
        cluster: Cluster, source: Database, target: Database) -> None:
    """profiles gains a name column, which customers writes into the wide row: each part's
    change would have overwritten the other's name, the row holding whichever came last."""
    schema = make_schema(
        source, target, CUSTOMERS,
        "CREATE TABLE `{schema}`.profiles (customer_id INT PRIMARY KEY, city VARCHAR(20))")
    target.execute(f"CREATE TABLE `{schema}`.wide (id INT PRIMARY KEY, name VARCHAR(20), "
                   "city VARCHAR(20))")
    wide = f"{schema}.wide"
    cluster.apply([{"name": "wide-meet", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": [
            {"source": f"{schema}.customers", "target": wide},
            {"source": f"{schema}.profiles", "target": wide, "merge_part": True,
             "key_columns": ["customer_id"],
             "column_pairs": [{"source": "customer_id", "target": "id"}]}]}]}])
    cluster.set_status("wide-meet", "START")
    cluster.wait_running("wide-meet")
    c, p = f"`{schema}`.customers", f"`{schema}`.profiles"
    source.script(f"INSERT INTO {c} VALUES (1, 'ann')", f"INSERT INTO {p} VALUES (1, 'Oslo')")
    wait_for(lambda: target.table(schema, "wide") == [(1, "ann", "Oslo")], 30, "the wide row")
    source.script(f"ALTER TABLE {p} ADD COLUMN name VARCHAR(20)",
                  f"INSERT INTO {p} VALUES (2, 'Rome', 'from-profiles')",
                  f"UPDATE {p} SET name = 'from-profiles' WHERE customer_id = 1")
    wait_for(lambda: cluster.channel_status("wide-meet") == "PAUSE", 60, "the pause")
    error = cluster.pipeline_state("wide-meet").last_error
    assert f"{schema}.profiles (pair source:{schema}.profiles) and {schema}.customers " \
        f"(pair source:{schema}.customers) both write column(s) name of the wide rows of " \
        f"{wide}" in error, error
    assert target.table(schema, "wide") == [(1, "ann", "Oslo")]
    cluster.set_status("wide-meet", "STOP")


def test_a_join_finds_its_row_as_the_server_compares_the_key(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Looked-up rows were matched again in Python by the value the server returned: a key
    the column's collation takes for the asked one ('abc' for 'ABC'), or a number asked of
    a text key (42 for '42'), found no row, and the change was dropped without a word."""
    schema = make_schema(
        source, target,
        "CREATE TABLE `{schema}`.orders (id INT PRIMARY KEY, code VARCHAR(9), ref INT)",
        "CREATE TABLE `{schema}`.labels (k VARCHAR(9) COLLATE utf8mb4_general_ci PRIMARY "
        "KEY, label VARCHAR(20))",
        "CREATE TABLE `{schema}`.notes (r VARCHAR(9) PRIMARY KEY, note VARCHAR(20))")
    target.execute(f"CREATE TABLE `{schema}`.orders_wide (id INT PRIMARY KEY, code VARCHAR(9), "
                   "ref INT, label VARCHAR(20), note VARCHAR(20))")
    source.script(f"INSERT INTO `{schema}`.labels VALUES ('abc', 'Alpha')",
                  f"INSERT INTO `{schema}`.notes VALUES ('42', 'forty-two')")
    cluster.apply([{"name": "joined", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": [
            {"source": f"{schema}.orders", "target": f"{schema}.orders_wide",
             "joins": [{"table": f"{schema}.labels", "by": "code", "key": "k",
                        "columns": ["label"]},
                       {"table": f"{schema}.notes", "by": "ref", "key": "r",
                        "columns": ["note"]}]}]}]}])
    cluster.set_status("joined", "START")
    cluster.wait_running("joined")
    source.execute(f"INSERT INTO `{schema}`.orders VALUES (1, 'ABC', 42), (2, 'x', 1)")
    wait_for(lambda: target.table(schema, "orders_wide") == [
        (1, "ABC", 42, "Alpha", "forty-two")], 30, "the order with both joins")
    cluster.set_status("joined", "STOP")


def test_table_split_1_to_n_gives_each_target_its_columns(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, PEOPLE)
    target.execute(f"CREATE TABLE `{schema}`.names (id INT PRIMARY KEY, first VARCHAR(20), "
                   "last VARCHAR(20))")
    target.execute(f"CREATE TABLE `{schema}`.contacts (id INT PRIMARY KEY, email VARCHAR(60), "
                   "address VARCHAR(60))")
    cluster.apply([{"name": "split", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": [
            {"source": f"{schema}.people", "target": f"{schema}.names", "fan_out": True,
             "columns": {"include": ["first", "last"]}},
            {"source": f"{schema}.people", "target": f"{schema}.contacts", "fan_out": True,
             "columns": {"include": ["email", "address"]}}]}]}])
    cluster.set_status("split", "START")
    cluster.wait_running("split")
    t = f"`{schema}`.people"
    source.script(f"INSERT INTO {t} VALUES (1, 'A', 'B', 'addr', 'a@b', 'n'), "
                  "(2, 'C', 'D', NULL, 'c@d', 'm')",
                  f"UPDATE {t} SET email = 'new@b', last = 'BB' WHERE id = 1",
                  f"DELETE FROM {t} WHERE id = 2")
    wait_for(lambda: target.table(schema, "contacts") == [(1, "new@b", "addr")], 30,
             "the contacts part")
    assert target.table(schema, "names") == [(1, "A", "BB")]
    cluster.set_status("split", "STOP")


def test_column_groups_write_changed_columns_and_look_up_missing_group_columns(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.docs (id INT PRIMARY KEY, "
                         "title VARCHAR(20), note VARCHAR(20), photo BLOB, photo_type CHAR(4))")
    run(cluster, "groups", schema, {
        "source": f"{schema}.docs", "target": f"{schema}.docs",
        "processor": "setl_examples:without_photo",
        "column_groups": [["photo", "photo_type"]]})
    t = f"`{schema}`.docs"
    source.execute(f"INSERT INTO {t} VALUES (1, 'a', 'n', 0x89504E47, 'png'), "
                   "(2, 'b', 'n', NULL, NULL)")
    wait_for(lambda: len(target.table(schema, "docs")) == 2, 30, "the inserts")
    assert target.table(schema, "docs") == [(1, "a", "n", b"\x89PNG", "png"),
                                            (2, "b", "n", None, None)]
    target.execute(f"UPDATE {t} SET note = 'kept on target'")  # columns nobody changes
    source.script(f"UPDATE {t} SET title = 'A' WHERE id = 1",
                  f"UPDATE {t} SET photo = 0xFFD8FF, photo_type = 'jpg' WHERE id = 2")
    wait_for(lambda: target.table(schema, "docs") == [
        (1, "A", "kept on target", b"\x89PNG", "png"),
        (2, "b", "kept on target", b"\xff\xd8\xff", "jpg")], 30, "the group updates")
    cluster.set_status("groups", "STOP")


def test_column_groups_make_a_row_the_target_lacks_whole(
        cluster: Cluster, source: Database, target: Database) -> None:
    """An update of a row the target never got (written before 'start: latest'; a snapshot
    copy the update replaced in its window) wrote the key and the changed columns only: the
    row was made with the others NULL, for good."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.docs (id INT PRIMARY KEY, "
                         "title VARCHAR(20), note VARCHAR(20), photo BLOB, photo_type CHAR(4))")
    t = f"`{schema}`.docs"
    source.execute(f"INSERT INTO {t} VALUES (1, 'a', 'n', 0x89504E47, 'png'), "
                   "(2, 'b', 'm', NULL, NULL)")  # before the channel starts: never copied
    run(cluster, "lacking", schema, {"source": f"{schema}.docs", "target": f"{schema}.docs",
                                     "column_groups": [["photo", "photo_type"]]})
    source.script(f"UPDATE {t} SET title = 'A' WHERE id = 1",
                  f"UPDATE {t} SET photo_type = 'gif' WHERE id = 2")
    wait_for(lambda: target.table(schema, "docs") == [
        (1, "A", "n", b"\x89PNG", "png"), (2, "b", "m", None, "gif")], 30, "whole rows")
    target.execute(f"UPDATE {t} SET note = 'kept on target'")  # a row the target has keeps
    source.execute(f"UPDATE {t} SET title = 'AA' WHERE id = 1")  # its unchanged columns
    wait_for(lambda: target.table(schema, "docs") == [
        (1, "AA", "kept on target", b"\x89PNG", "png"), (2, "b", "kept on target", None, "gif")],
        30, "the group update")
    cluster.set_status("lacking", "STOP")


def test_an_update_whose_joined_row_is_missing_takes_the_row_out_of_the_target(
        cluster: Cluster, source: Database, target: Database) -> None:
    """With 'missing: drop' the update was dropped: the target kept the order with its old
    customer's tier."""
    schema = make_schema(source, target, CUSTOMERS,
                         "CREATE TABLE `{schema}`.orders (id INT PRIMARY KEY, customer_id INT)")
    target.execute(f"CREATE TABLE `{schema}`.orders_wide (id INT PRIMARY KEY, "
                   "customer_id INT, name VARCHAR(20))")
    source.execute(f"INSERT INTO `{schema}`.customers VALUES (1, 'ann')")
    run(cluster, "dropped", schema, {
        "source": f"{schema}.orders", "target": f"{schema}.orders_wide",
        "joins": [{"table": f"{schema}.customers", "by": "customer_id", "key": "id",
                   "columns": ["name"]}]})
    o = f"`{schema}`.orders"
    source.execute(f"INSERT INTO {o} VALUES (10, 1), (11, 1), (12, 2)")  # 12: no customer 2
    wait_for(lambda: target.table(schema, "orders_wide") == [(10, 1, "ann"), (11, 1, "ann")],
             30, "the joined orders")
    source.script(f"UPDATE {o} SET customer_id = NULL WHERE id = 10",
                  f"UPDATE {o} SET customer_id = 2 WHERE id = 11",
                  f"INSERT INTO {o} VALUES (13, 1)")
    wait_for(lambda: target.table(schema, "orders_wide") == [(13, 1, "ann")], 30,
             "the orders that left the join gone")
    cluster.set_status("dropped", "STOP")


STAMP = "TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)"


def test_a_column_the_target_stamps_on_update_keeps_the_source_s_value(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A target column ON UPDATE CURRENT_TIMESTAMP (a table's first TIMESTAMP before MariaDB
    10.10) took the target's clock where a statement changed the row without assigning it:
    a big value's appended pieces, a column-group update, a wide row's other part and its
    clear."""
    schema = make_schema(source, target,
                         f"CREATE TABLE `{{schema}}`.docs (id INT PRIMARY KEY, body LONGTEXT, "
                         f"kind CHAR(4), v INT, at {STAMP})",
                         f"CREATE TABLE `{{schema}}`.customers (id INT PRIMARY KEY, name "
                         f"VARCHAR(20), at {STAMP})", PROFILES)
    target.execute(f"CREATE TABLE `{schema}`.customer_wide (id INT PRIMARY KEY, name "
                   f"VARCHAR(20), at {STAMP}, city VARCHAR(20))")
    wide = f"{schema}.customer_wide"
    cluster.apply([{"name": "stamped", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": [
            {"source": f"{schema}.docs", "target": f"{schema}.docs",
             "column_groups": [["body", "kind"]]},
            {"source": f"{schema}.customers", "target": wide},
            {"source": f"{schema}.profiles", "target": wide, "merge_part": True,
             "key_columns": ["customer_id"], "columns": {"include": ["city"]},
             "column_pairs": [{"source": "customer_id", "target": "id"}]}]}]}])
    cluster.set_status("stamped", "START")
    cluster.wait_running("stamped")
    d, c, p = (f"`{schema}`.{t}" for t in ("docs", "customers", "profiles"))
    then = "'2020-01-01 00:00:00.000001'"
    source.script(f"INSERT INTO {d} VALUES (1, REPEAT('x', 1100000), 'txt', 1, {then}), "
                  f"(2, 'small', 'txt', 1, {then})",
                  f"UPDATE {d} SET v = 2, at = at WHERE id = 2",  # a column-group update
                  f"INSERT INTO {c} VALUES (1, 'ann', {then})",
                  f"INSERT INTO {p} VALUES (10, 1, 'Oslo', 'gold')")  # the other part
    docs = f"SELECT id, v, at, LENGTH(body), MD5(body) FROM {d} ORDER BY id"
    wait_for(lambda: target.rows(f"SELECT city FROM `{schema}`.customer_wide") == [("Oslo",)]
             and [r[1] for r in target.rows(docs)] == [1, 2], 60, "every change")
    assert target.rows(docs) == source.rows(docs)
    stamped = f"SELECT id, name, at FROM `{schema}`.customer_wide"
    assert target.rows(stamped) == source.rows(f"SELECT id, name, at FROM {c}")
    source.execute(f"DELETE FROM {p} WHERE pid = 10")  # the part cleared
    wait_for(lambda: target.rows(f"SELECT city FROM `{schema}`.customer_wide") == [(None,)],
             60, "the cleared part")
    assert target.rows(stamped) == source.rows(f"SELECT id, name, at FROM {c}")
    cluster.set_status("stamped", "STOP")
