"""The free door on real servers: rows never in the binlog copied through retl.retl_buffer,
per instance and central, with composite/string/binary keys, bad requests skipped, and the
race with concurrent updates and deletes ending with the target equal to the source."""

from __future__ import annotations

import random
import threading

from manager import cli
from shared import zk
from shared.positions import Cursor
from shared.retl import encode_key
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.shapes import Shapes
from tests.integration.shapes import channel as shapes_channel

ITEMS = "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(40), qty INT)"
MIXED = ("CREATE TABLE `{schema}`.mixed (a INT, b VARCHAR(20), c VARBINARY(8), d DATE, "
         "v VARCHAR(20), PRIMARY KEY (a, b, c, d))")
CODES = "CREATE TABLE `{schema}`.codes (code VARCHAR(20) PRIMARY KEY, n INT)"
PADS = "CREATE TABLE `{schema}`.pads (k CHAR(4) PRIMARY KEY, c CHAR(6))"
KEYLESS = "CREATE TABLE `{schema}`.kl (a INT NOT NULL, v VARCHAR(20))"
MOVED = ("CREATE TABLE `{schema}`.moved (id INT NOT NULL, code INT NOT NULL, v VARCHAR(20), "
         "PRIMARY KEY (id))")
TAGGED = ("CREATE TABLE `{schema}`.tagged (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL, "
          "n INT, UNIQUE KEY (code))")
FLOATS = "CREATE TABLE `{schema}`.floats (f FLOAT PRIMARY KEY, n INT)"
STAMPS = "CREATE TABLE `{schema}`.stamps (t TIMESTAMP PRIMARY KEY, n INT)"
BUFFER = "INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA, CHANNEL_ID, PIPELINE_ID) "


def without_binlog(db: Database, *statements: str) -> None:
    db.execute("SET SESSION sql_log_bin = 0")
    try:
        db.script(*statements)
    finally:
        db.execute("SET SESSION sql_log_bin = 1")


def start(cluster: Cluster, name: str, schema: str, tables: list[str], **params: object) -> None:
    cluster.apply([one_way(name, schema, tables, **params)])
    cluster.set_status(name, "START")
    cluster.wait_running(name)


def request_rows(db: Database, full_name: str, keys: list[tuple], kind: str = "I",
                 channel: str | None = None, pipeline: str | None = None) -> None:
    db.conn.cursor().executemany(
        BUFFER + "VALUES (%s, %s, %s, %s, %s)",
        [(full_name, kind, encode_key(key), channel, pipeline) for key in keys])


def door(cluster: Cluster, channel: str) -> object:
    return cluster.pipeline_state(channel).free_door


def test_per_instance_backfill_with_composite_binary_keys_and_bad_requests(
        cluster: Cluster, source: Database, target: Database) -> None:
    schema = make_schema(source, target, ITEMS, MIXED)
    without_binlog(source,
                   f"INSERT INTO `{schema}`.items VALUES (1, 'one', 1), (2, 'two', 2), "
                   "(3, 'three', 3)",
                   f"INSERT INTO `{schema}`.mixed VALUES (1, 'x', 0x00FF, '2020-01-02', 'a'), "
                   "(1, 'y', 0x0A0D27, '2021-12-31', 'b'), (2, 'ü😀', '', '1999-09-09', 'c')")
    target.execute(f"INSERT INTO `{schema}`.items VALUES (9, 'only on target', 9)")
    start(cluster, "door-local", schema, ["items", "mixed"])
    source.execute("BEGIN")  # good and bad requests in one source transaction
    request_rows(source, f"{schema}.items", [(1,), (2,), (3,), (4,)])  # 4 does not exist
    request_rows(source, f"{schema}.items", [(9,)], kind="D")
    request_rows(source, f"{schema}.mixed", [(1, "x", b"\x00\xff", "2020-01-02"),
                                             (1, "y", b"\n\r'", "2021-12-31"),
                                             (2, "ü😀", b"", "1999-09-09")])
    source.execute(BUFFER + f"VALUES ('{schema}.nope', 'I', '[1]', NULL, NULL), "
                   f"('{schema}.items', 'I', 'not json', NULL, NULL), "
                   f"('{schema}.items', 'I', '[1, 2]', NULL, NULL), "
                   f"('{schema}.items', 'X', '[1]', NULL, NULL)")
    source.execute("COMMIT")
    wait_equal(source, target, schema, ["items", "mixed"])
    wait_for(lambda: door(cluster, "door-local").requested == 11, 10, "the requests counted")
    stats = door(cluster, "door-local")
    assert (stats.loaded, stats.missing, stats.rejected) == (7, 1, 3)
    # nope's is another channel's (none here): skipped, neither counted nor deleted
    wait_for(lambda: source.rows("SELECT FULL_NAME FROM retl.retl_buffer WHERE FULL_NAME "
                                 "LIKE %s", (f"{schema}.%",)) == [(f"{schema}.nope",)], 10,
             "cleanup")
    log = cluster.nodes[1].output()
    assert "event=free_door_not_ours pipeline=door-local.forward requests=1" in log
    assert "event=free_door_rejected" in log and f"table {schema}.nope" not in log
    source.execute("DELETE FROM retl.retl_buffer WHERE FULL_NAME = %s", (f"{schema}.nope",))
    assert "PK_DATA has 2 value(s); the key of" in log and "PK_DATA is not JSON" in log
    cluster.set_status("door-local", "STOP")


def test_requests_for_a_keyless_table_are_refused_whatever_its_key_columns(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A table with no key of its own replicates by its whole image; key_columns on its pair
    do not make the target keyed. A request read by them was upserted, which on the keyless
    target inserted the row beside its old copy: such requests are rejected, saying why."""
    schema = make_schema(source, target, KEYLESS)
    without_binlog(source, f"INSERT INTO `{schema}`.kl VALUES (1, 'one'), (2, 'two')")
    target.execute(f"INSERT INTO `{schema}`.kl VALUES (1, 'old'), (2, 'two')")
    channel = one_way("door-keyless", schema, ["kl"])
    channel["pipelines"][0]["pairs"][0]["key_columns"] = ["a"]
    cluster.apply([channel])
    cluster.set_status("door-keyless", "START")
    cluster.wait_running("door-keyless")
    request_rows(source, f"{schema}.kl", [(1,)])
    request_rows(source, f"{schema}.kl", [(2,)], kind="D")
    wait_for(lambda: door(cluster, "door-keyless").requested == 2, 30, "the requests counted")
    assert door(cluster, "door-keyless").rejected == 2
    source.execute(f"INSERT INTO `{schema}`.kl VALUES (3, 'streamed')")  # the stream goes on
    wait_for(lambda: (3, "streamed") in target.table(schema, "kl"), 30, "the streamed row")
    assert sorted(target.table(schema, "kl")) == [(1, "old"), (2, "two"), (3, "streamed")]
    assert f"table {schema}.kl has no primary key and no unique key over NOT NULL columns, " \
        "so the free door cannot copy its rows" in cluster.nodes[1].output()
    assert "its pair's key_columns a do not make it keyed" in cluster.nodes[1].output()
    cluster.set_status("door-keyless", "STOP")


def test_requests_after_an_alter_of_the_key_are_read_by_the_new_key(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The door kept a table's key for the life of the pipeline's run: after the source's
    primary key gained a column, a request naming the new key was rejected for the old
    key's arity (and a request read by an old key could take a stream row of the same
    values for its own in the merge). Keys are read in each window, after its low
    watermark."""
    schema = make_schema(source, target, MOVED)
    t = f"`{schema}`.moved"
    without_binlog(source, f"INSERT INTO {t} VALUES (1, 10, 'one'), (2, 20, 'two')")
    start(cluster, "door-rekey", schema, ["moved"])
    request_rows(source, f"{schema}.moved", [(1,)])
    wait_for(lambda: target.table(schema, "moved") == [(1, 10, "one")], 30, "the first request")
    source.execute(f"ALTER TABLE {t} DROP PRIMARY KEY, ADD PRIMARY KEY (id, code)")
    request_rows(source, f"{schema}.moved", [(2, 20)])
    wait_for(lambda: door(cluster, "door-rekey").requested == 2, 30, "the second request")
    assert door(cluster, "door-rekey").rejected == 0
    wait_equal(source, target, schema, ["moved"])
    source.execute(f"UPDATE {t} SET v = 'streamed' WHERE id = 2")
    wait_for(lambda: target.table(schema, "moved") == [(1, 10, "one"), (2, 20, "streamed")], 30,
             "the stream's update by the new key")
    cluster.set_status("door-rekey", "STOP")


def test_backfill_racing_updates_and_deletes_ends_equal(
        cluster: Cluster, source: Database, target: Database) -> None:
    rows = 20_000
    schema = make_schema(source, target, ITEMS)
    for first in range(0, rows, 5000):
        without_binlog(source, f"INSERT INTO `{schema}`.items VALUES " + ", ".join(
            f"({i}, 'cold {i}', 0)" for i in range(first + 1, first + 5001)))
    t = f"`{schema}`.items"
    # rows the racing writer never touches, asked deleted: the source has the first (the
    # target a stale copy: the delete, then the source's row), the target only the others
    without_binlog(source, f"INSERT INTO {t} VALUES " + ", ".join(
        f"({i}, 'kept {i}', 0)" for i in range(rows + 1, rows + 101)))
    without_binlog(target, f"INSERT INTO {t} VALUES " + ", ".join(
        f"({i}, 'stale {i}', 0)" for i in range(rows + 1, rows + 201)))
    start(cluster, "door-race", schema, ["items"], free_door={"source": "target"})
    stop = threading.Event()

    def churn(db: Database, seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            key = rng.randint(1, rows)
            db.execute(rng.choice([f"UPDATE {t} SET qty = qty + 1, name = 'hot' WHERE id = {key}",
                                   f"DELETE FROM {t} WHERE id = {key}",
                                   f"INSERT IGNORE INTO {t} VALUES ({key}, 'reborn', 7)"]))
            stop.wait(0.003)  # a steady few hundred writes a second

    writer = Database(cluster.sandbox, "source")
    thread = threading.Thread(target=churn, args=(writer, 11), daemon=True)
    thread.start()
    try:
        half = rows // 2  # half per instance (through the binlog), half central
        source.execute(f"INSERT INTO retl.retl_buffer (FULL_NAME, TYPE, PK_DATA) SELECT "
                       f"'{schema}.items', 'I', CONCAT('[', id, ']') FROM {t} WHERE id <= {half}")
        request_rows(target, f"{schema}.items", [(i,) for i in range(half + 1, rows + 1)],
                     channel="door-race", pipeline="forward")
        request_rows(source, f"{schema}.items", [(i,) for i in range(rows + 1, rows + 201)],
                     kind="D")
        wait_for(lambda: door(cluster, "door-race").requested >= rows + 200, 120, "backfill")
    finally:
        stop.set()
        thread.join(120)
        writer.close()
    assert not thread.is_alive(), "the racing writer did not stop"
    wait_equal(source, target, schema, ["items"], timeout_s=120)
    names = [row[1] for row in target.table(schema, "items")]
    # rows only the backfill could bring, and rows the racing writer changed, both arrived
    assert sum(name.startswith("cold") for name in names) > rows // 10
    assert sum(name in ("hot", "reborn") for name in names) > 100
    assert sum(name.startswith("kept") for name in names) == 100
    cluster.set_status("door-race", "STOP")


def test_deletes_asked_are_loaded_while_the_stream_changes_a_key_that_looks_alike(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Rows only the target has ('07', '007', …) are asked deleted, one window each, while
    the source updates the row '7' without pause: '7' and '007' are two rows of a VARCHAR
    key, so no delete may be taken for the stream's change of '7' (each was skipped, and the
    target kept the row, when the stream changed '7' inside its window)."""
    schema = make_schema(source, target, CODES)
    t = f"`{schema}`.codes"
    without_binlog(source, f"INSERT INTO {t} VALUES ('7', 0)")
    stale = ["0" * zeros + "7" for zeros in range(1, 20)]
    target.execute(f"INSERT INTO {t} VALUES ('7', 0), "
                   + ", ".join(f"('{code}', -1)" for code in stale))
    start(cluster, "door-alike", schema, ["codes"])
    stop = threading.Event()

    def churn(db: Database) -> None:
        while not stop.is_set():
            db.execute(f"UPDATE {t} SET n = n + 1 WHERE code = '7'")
            stop.wait(0.002)

    writer = Database(cluster.sandbox, "source")
    thread = threading.Thread(target=churn, args=(writer,), daemon=True)
    thread.start()
    try:
        for asked, code in enumerate(stale, 1):  # one request a window
            request_rows(source, f"{schema}.codes", [(code,)], kind="D")
            wait_for(lambda n=asked: door(cluster, "door-alike").requested >= n, 60,
                     f"the delete of {code!r} served")
    finally:
        stop.set()
        thread.join(60)
        writer.close()
    assert not thread.is_alive(), "the racing writer did not stop"
    assert door(cluster, "door-alike").loaded == len(stale)
    wait_equal(source, target, schema, ["codes"])
    assert target.rows(f"SELECT code FROM {t}") == [("7",)]
    assert source.rows(f"SELECT n > 20 FROM {t}") == [(1,)]  # the writer raced the requests
    cluster.set_status("door-alike", "STOP")


def test_char_values_are_read_unpadded_whatever_the_sources_sql_mode(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A source whose global sql_mode pads CHAR values when read (PAD_CHAR_TO_FULL_LENGTH):
    rows backfilled into the target's VARCHAR columns hold no spaces the binlog does not
    give, and the stream's update finds its row by the key as the binlog gives it."""
    schema = make_schema(source, target, PADS)
    t = f"`{schema}`.pads"
    target.execute(f"ALTER TABLE {t} MODIFY k VARCHAR(4), MODIFY c VARCHAR(6)")
    without_binlog(source, f"INSERT INTO {t} VALUES ('ab', 'x'), ('cd', NULL), ('e', 'long')")
    (mode,), = source.rows("SELECT @@global.sql_mode")
    source.execute("SET GLOBAL sql_mode = CONCAT(@@global.sql_mode, ',PAD_CHAR_TO_FULL_LENGTH')")
    try:
        padded = Database(cluster.sandbox, "source")  # a session as the node's readers get
        assert padded.rows(f"SELECT k FROM {t} WHERE k = 'ab'") == [("ab  ",)]
        padded.close()
        start(cluster, "door-pads", schema, ["pads"])
        request_rows(source, f"{schema}.pads", [("ab",), ("cd",), ("e",)])
        wait_for(lambda: door(cluster, "door-pads").loaded == 3, 60, "the backfill loaded")
        source.execute(f"UPDATE {t} SET c = 'y' WHERE k = 'ab'")
        wait_equal(source, target, schema, ["pads"])
    finally:
        source.execute("SET GLOBAL sql_mode = %s", (mode,))
    assert target.rows(f"SELECT k, c FROM {t} ORDER BY k") == [
        ("ab", "y"), ("cd", None), ("e", "long")]
    cluster.set_status("door-pads", "STOP")


def test_the_cli_writes_requests_and_shows_the_counters(
        cluster: Cluster, source: Database, target: Database, capsys) -> None:
    schema = make_schema(source, target, ITEMS)
    without_binlog(source, f"INSERT INTO `{schema}`.items VALUES "
                   + ", ".join(f"({i}, 'cli {i}', {i % 7})" for i in range(1, 2001)))
    start(cluster, "door-cli", schema, ["items"])
    # the CLI reads the sandbox's password file under the node's rules
    manager = ["--manager", cluster.manager_address, "--config", str(cluster.workdir / "node.yaml")]
    assert cli.main([*manager, "retl", "init", "source"]) == 0
    assert cli.main([*manager, "backfill", "door-cli", "--table", f"{schema}.items",
                     "--where", "qty <> 3", "--batch", "300"]) == 0
    out = capsys.readouterr()
    wanted = sum(1 for i in range(1, 2001) if i % 7 != 3)
    assert f"{wanted} request(s) for {schema}.items written to the retl_buffer on source" \
        in out.out
    assert f"{wanted:,} / {wanted:,} rows" in out.err and "ETA" in out.err
    wait_for(lambda: len(target.table(schema, "items")) == wanted, 60, "the backfilled rows")
    assert all(row[2] != 3 for row in target.table(schema, "items"))
    wait_for(lambda: door(cluster, "door-cli").loaded == wanted, 10, "the counters")
    assert cli.main([*manager, "backfill", "status"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "door-cli" in line)
    assert line.split()[1:] == [str(wanted), str(wanted), "0", "0", "0"]
    assert cli.main([*manager, "backfill", "door-cli", "--table", f"{schema}.nope"]) != 0
    assert "no pipeline replicates" in capsys.readouterr().err
    cluster.set_status("door-cli", "STOP")


def test_the_cli_writes_float_and_timestamp_keys_the_node_finds_on_a_source_not_in_utc(
        cluster: Cluster, source: Database, target: Database, capsys) -> None:
    """The CLI read keys as text in the source's own session: a FLOAT 1234567 read 1234570,
    which no row has, and paging past it skipped 1234568; a TIMESTAMP, in a source time zone
    that is not UTC, named another instant than the node looks up (in UTC). Every row
    arrives and no request is missing."""
    schema = make_schema(source, target, FLOATS, STAMPS)
    # values whose six-digit text rounds up (one rounded down read itself again, forever)
    without_binlog(source,
                   f"INSERT INTO `{schema}`.floats VALUES (0.5, 1), (1234567, 2), "
                   "(1234568, 3), (7654327, 4)",
                   f"INSERT INTO `{schema}`.stamps VALUES ('2021-03-04 05:06:07', 1), "
                   "('2021-03-04 06:06:07', 2), ('2021-03-04 07:06:07', 3)")
    start(cluster, "door-cli-types", schema, ["floats", "stamps"])
    manager = ["--manager", cluster.manager_address, "--config", str(cluster.workdir / "node.yaml")]
    zone = source.rows("SELECT @@GLOBAL.time_zone")[0][0]
    source.execute("SET GLOBAL time_zone = '+05:00'")  # the CLI's session, not the rows'
    try:
        for table in ("floats", "stamps"):
            assert cli.main([*manager, "backfill", "door-cli-types", "--table",
                             f"{schema}.{table}", "--batch", "2"]) == 0
    finally:
        source.execute("SET GLOBAL time_zone = %s", (zone,))
    out = capsys.readouterr().out
    assert f"4 request(s) for {schema}.floats" in out and \
        f"3 request(s) for {schema}.stamps" in out
    wait_for(lambda: (state := door(cluster, "door-cli-types")).loaded + state.missing >= 7,
             60, "the requests served")
    state = door(cluster, "door-cli-types")
    assert (state.requested, state.loaded, state.missing) == (7, 7, 0)
    wait_equal(source, target, schema, ["floats", "stamps"], 10)
    cluster.set_status("door-cli-types", "STOP")


def test_requests_keyed_by_a_timestamp_with_a_fraction_name_their_own_rows(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A TIMESTAMP(6) key: a request's key (JSON text) was taken for the zero TIMESTAMP (text
    is what the server gives for the zero alone), so a D deleted the target's zero row — lost
    — and left its own row (a review); an I was noted missing though its row was written."""
    schema = make_schema(source, target,
                         "CREATE TABLE `{schema}`.st6 (t TIMESTAMP(6) PRIMARY KEY, n INT)")
    for db in (source, target):
        db.execute("SET SESSION sql_mode = ''")
        without_binlog(db, f"INSERT INTO `{schema}`.st6 VALUES ('0000-00-00 00:00:00', 0), "
                       "('2021-03-04 05:06:07.500000', 1)")
    without_binlog(target, f"INSERT INTO `{schema}`.st6 VALUES ('2021-03-04 09:09:09.25', 9)")
    target.execute(f"UPDATE `{schema}`.st6 SET n = 10 WHERE n = 1")  # (to be copied again)
    start(cluster, "door-ts6", schema, ["st6"])
    request_rows(source, f"{schema}.st6", [("2021-03-04 09:09:09.250000",),
                                           ("2021-03-04 05:06:07.500000",)], kind="D")
    request_rows(source, f"{schema}.st6", [("2021-03-04 05:06:07.500000",)])
    wait_for(lambda: (state := door(cluster, "door-ts6")).loaded + state.missing >= 3, 60,
             "the requests served")
    wait_equal(source, target, schema, ["st6"], 30)
    assert target.rows(f"SELECT CAST(t AS CHAR), n FROM `{schema}`.st6 ORDER BY t") == [
        ("0000-00-00 00:00:00.000000", 0), ("2021-03-04 05:06:07.500000", 1)]
    state = door(cluster, "door-ts6")
    assert (state.requested, state.loaded, state.missing) == (3, 3, 0)
    cluster.set_status("door-ts6", "STOP")


def test_the_cli_names_the_key_the_node_reads_by_and_refuses_a_keyless_table(
        cluster: Cluster, source: Database, target: Database, capsys) -> None:
    """A pair's key_columns (code) are not the table's primary key (id): the CLI wrote ids,
    which the node looked up as codes and found missing. A keyless table is refused before
    a request is written."""
    schema = make_schema(source, target, TAGGED, KEYLESS)
    without_binlog(source, f"INSERT INTO `{schema}`.tagged VALUES "
                   + ", ".join(f"({i}, 'c{51 - i}', {i})" for i in range(1, 51)),
                   f"INSERT INTO `{schema}`.kl VALUES (1, 'one')")
    channel = one_way("door-cli-keys", schema, ["tagged", "kl"])
    channel["pipelines"][0]["pairs"][0]["key_columns"] = ["code"]
    channel["pipelines"][0]["pairs"][1]["key_columns"] = ["a"]
    cluster.apply([channel])
    cluster.set_status("door-cli-keys", "START")
    cluster.wait_running("door-cli-keys")
    manager = ["--manager", cluster.manager_address, "--config", str(cluster.workdir / "node.yaml")]
    assert cli.main([*manager, "backfill", "door-cli-keys", "--table", f"{schema}.tagged",
                     "--batch", "20"]) == 0
    wait_equal(source, target, schema, ["tagged"])
    wait_for(lambda: door(cluster, "door-cli-keys").loaded == 50, 10, "the counters")
    capsys.readouterr()
    assert cli.main([*manager, "backfill", "door-cli-keys", "--table", f"{schema}.kl"]) != 0
    assert f"setl: channel door-cli-keys pipeline forward: table {schema}.kl has no primary " \
        "key and no unique key over NOT NULL columns, so the free door cannot copy its rows" \
        in capsys.readouterr().err
    assert source.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE FULL_NAME = %s",
                       (f"{schema}.kl",)) == [(0,)]
    assert target.table(schema, "kl") == []
    cluster.set_status("door-cli-keys", "STOP")


def test_a_request_another_pipeline_served_first_is_still_served_after_a_kill_9(
        sandbox, tmp_path, zk_client) -> None:
    """Two pipelines read one source. A serves a per-instance request and deletes its buffer
    row while B has loaded the batch that carried the request but cannot load the window
    that serves it (its target refuses the write, so B retries); then B's node is killed.
    Once the target takes writes again, B serves the request from its own copy of it, not
    from the buffer row that is gone. A third channel on the same node streams the
    keyless, unique-swap and sum tables through the kill: equal as multisets at the end."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    shapes = Shapes(sandbox, source, target, seed=23)
    cluster = Cluster(sandbox, tmp_path, "door-pending")
    try:
        schema = make_schema(source, target, ITEMS)
        other = f"{schema}_b"  # B's copy, on the same target server
        target.script(f"CREATE DATABASE `{other}`", ITEMS.format(schema=other))
        without_binlog(source, f"INSERT INTO `{schema}`.items VALUES (1, 'served', 7)")
        target.execute(f"INSERT INTO `{other}`.items VALUES (1, 'stale', 0)")
        refusals = [f"CREATE TRIGGER `{other}`.no_{kind} BEFORE {kind} ON `{other}`.items "
                    "FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'not now'"
                    for kind in ("INSERT", "UPDATE", "DELETE")]
        target.script(*refusals)
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([one_way("dp-a", schema, ["items"]), {
            "name": "dp-b", "pipelines": [{
                "name": "forward", "source": "source", "target": "target", "max_retries": 1000,
                "fire_target_triggers": True,  # its refusing triggers fire
                "pairs": [{"source": f"{schema}.items", "target": f"{other}.items"}]}]},
            shapes_channel("dp-shapes", shapes.schema, batch_timeout_ms=20)])
        for channel in ("dp-a", "dp-b", "dp-shapes"):
            cluster.set_status(channel, "START")
            cluster.wait_running(channel)
        shapes.start()
        # where the request begins: a position past it is past the request (the first
        # transaction after it; A's watermarks may follow at once, so not its end)
        file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
        request_rows(source, f"{schema}.items", [(1,)])
        wait_equal(source, target, schema, ["items"])  # A served it...
        wait_for(lambda: source.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE FULL_NAME "
                                     "= %s", (f"{schema}.items",)) == [(0,)], 30,
                 "A to delete the buffer row")

        def b_passed_the_request() -> bool:  # ...and B loaded the batch that carried it
            rows = target.rows("SELECT binlog_file, binlog_pos FROM retl.retl_position "
                               "WHERE pipeline_id = 'dp-b.forward'")
            return bool(rows) and (rows[0][0], rows[0][1]) > (file, pos)

        wait_for(b_passed_the_request, 30, "B's position past the request")
        cursor = zk.ZkPaths(cluster.root).cursor("dp-b.forward")  # (no replay re-reads it)
        wait_for(lambda: (lambda at: (at.position.file, at.position.pos) > (file, pos))(
            Cursor.from_json(zk_client.get(cursor)[0])), 30, "B's cursor past the request")
        wait_for(lambda: "not now" in cluster.nodes[1].output(), 30, "B's window refused")
        shapes.wait_transactions(shapes.transactions + 50)
        cluster.nodes[1].kill()
        target.script(*(f"DROP TRIGGER `{other}`.no_{kind}"
                        for kind in ("INSERT", "UPDATE", "DELETE")))
        assert target.table(other, "items") == [(1, "stale", 0)]
        cluster.start_node(1)
        wait_for(lambda: target.table(other, "items") == [(1, "served", 7)], 90,
                 "B to serve the request after its restart")
        wait_for(lambda: source.rows("SELECT COUNT(*) FROM retl.retl_pending WHERE "
                                     "PIPELINE_ID IN ('dp-a.forward', 'dp-b.forward')")
                 == [(0,)], 30, "the pending copies deleted once served")
        shapes.wait_transactions(shapes.transactions + 50)
        shapes.finish(source)
    finally:
        shapes.stop()
        cluster.stop()
        source.close()
        target.close()
