"""A subscription's values as the source holds them, read with `setl subscribe -o json`, and
how far a run of it moves the subscription (--count, --no-ack, --from)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.devcluster import BIN, Cluster, Database, make_schema
from tests.integration.test_subscription import _cli, _subscribe, feed_channel, sources

pytestmark = pytest.mark.integration


def test_typed_values_as_the_source_holds_them(cluster: Cluster, source: Database,
                                               target: Database) -> None:
    """Every type a reader may get wrong, as `setl subscribe -o json` prints it (before
    and after images); a run acknowledges what it printed, so the next one goes on after
    it; --no-ack moves nothing; --from moves it back (to a file position or a GTID)."""
    schema = make_schema(source, target, (
        "CREATE TABLE `{schema}`.t (id INT PRIMARY KEY, ub BIGINT UNSIGNED, "
        "d DECIMAL(65,30), tm TIME(3), zd DATE, dt DATETIME(6), ts TIMESTAMP NULL, "
        "bn BINARY(4), vb VARBINARY(8), js JSON, en ENUM('x','y'), st SET('a','b','c'), "
        "bt BIT(5), f FLOAT, db DOUBLE, yr YEAR, tx VARCHAR(20) CHARACTER SET utf8mb4, "
        "l1 VARCHAR(20) CHARACTER SET latin1, dt3 DATETIME(3), dz6 DATETIME(6), "
        "zts TIMESTAMP(6) NULL, ct VARCHAR(20) CHARACTER SET latin1)"))
    cluster.apply([feed_channel("typed", "feed-t", schema, ["t"])],
                  sources(cluster, "feed-t"))
    cluster.set_status("typed", "START")
    cluster.wait_running("typed")
    source.execute("SET SESSION sql_mode = ''")
    file, pos = source.rows("SHOW MASTER STATUS")[0][:2]  # before the first insert
    source.execute(
        f"INSERT INTO `{schema}`.t VALUES (1, 18446744073709551615, "
        "-12345678901234567890123456789012345.123456789012345678901234567890, "
        "'-838:59:58.5', '0000-00-00', '2024-02-29 23:59:59.000001', "
        "'2038-01-19 03:14:07', x'0102', x'00ff', '{\"k\": [1, 2.5]}', 'y', 'a,c', "
        "b'10101', 1.5, 2.25, 2155, 'żółw 🐢', 'café', '2024-01-02 10:00:00.120', "
        "'2024-01-02 10:00:00', '0000-00-00 00:00:00', _latin1 x'617F6281')")
    first = _subscribe(cluster, "typed", "--count", "1")
    assert [txn["changes"][0]["op"] for txn in first] == ["I"]
    after = first[0]["changes"][0]["after"]
    assert after == {
        "id": 1, "ub": 18446744073709551615,
        "d": "-12345678901234567890123456789012345.123456789012345678901234567890",
        "tm": "-838:59:58.500", "zd": "0000-00-00", "dt": "2024-02-29 23:59:59.000001",
        "ts": "2038-01-19 03:14:07", "bn": "01020000", "vb": "00FF",
        "js": '{"k": [1, 2.5]}', "en": "y", "st": "a,c", "bt": 21, "f": 1.5, "db": 2.25,
        "yr": 2155, "tx": "żółw 🐢", "l1": "café",
        # a moment with its column's fractional digits, as the source shows it; a DEL and
        # latin1's C1 control parse back from the line (the terminal guard rewrote them)
        "dt3": "2024-01-02 10:00:00.120", "dz6": "2024-01-02 10:00:00.000000",
        "zts": "0000-00-00 00:00:00.000000", "ct": "a\x7fb\x81"}, after
    # printed and acknowledged: the next reader begins after it
    source.execute(f"UPDATE `{schema}`.t SET ub = 0, tx = NULL WHERE id = 1")
    source.execute(f"DELETE FROM `{schema}`.t WHERE id = 1")
    rest = _subscribe(cluster, "typed", "--count", "2")
    assert [txn["changes"][0]["op"] for txn in rest] == ["U", "D"]
    update, delete = rest[0]["changes"][0], rest[1]["changes"][0]
    assert update["before"]["ub"] == 18446744073709551615 and update["after"]["ub"] == 0
    assert update["before"]["tx"] == "żółw 🐢" and update["after"]["tx"] is None
    assert update["keys"] == ["id"] and delete["before"]["d"] == after["d"]
    assert first[0]["id"] < rest[0]["id"] < rest[1]["id"]
    # --no-ack moves nothing: the same transaction comes again
    source.execute(f"INSERT INTO `{schema}`.t (id) VALUES (2)")
    peek = _subscribe(cluster, "typed", "--count", "1", "--no-ack")
    again = _subscribe(cluster, "typed", "--count", "1")
    assert peek == again and peek[0]["changes"][0]["after"]["id"] == 2
    # --from moves the subscription back (stop, position set, start): all of it again
    replayed = _subscribe(cluster, "typed", "--from", f"{file}:{pos}", "--count", "4")
    assert [txn["id"] for txn in replayed] == [first[0]["id"], rest[0]["id"], rest[1]["id"],
                                                again[0]["id"]]
    assert cluster.channel_status("typed") == "START"
    # --from a GTID position: what committed after the first transaction
    assert first[0]["gtid"]
    by_gtid = _subscribe(cluster, "typed", "--from", first[0]["gtid"], "--count", "3")
    assert [txn["id"] for txn in by_gtid] == [rest[0]["id"], rest[1]["id"], again[0]["id"]]
    # one transaction far larger than gRPC's default message (4 MiB) comes whole
    source.execute(f"INSERT INTO `{schema}`.t (id, d, js) SELECT seq, seq, "
                   "JSON_OBJECT('pad', REPEAT('x', 150)) FROM mysql.seq_1000_to_30999")
    [big] = _subscribe(cluster, "typed", "--count", "1")
    assert len(big["changes"]) == 30000 and big["changes"][-1]["after"]["id"] == 30999
    assert len(json.dumps(big)) > 6_000_000
    # shown with what it acknowledged; a running subscription is not deleted, a stopped one
    # goes with its position
    [shown] = json.loads(_cli(cluster, "subscription", "show", "typed", "-o", "json"))
    assert shown["acked"] == f"{big['file']}:{big['pos']}" or big["file"] in shown["acked"]
    [where] = json.loads(_cli(cluster, "-o", "json", "position", "show", "typed"))["pipelines"]
    assert where["cursor"] == where["targets"][0]["position"], where  # no stale cursor
    assert where["cursor"]["file"] == big["file"]
    running = subprocess.run([str(BIN / "setl"), "--manager", cluster.manager_address,
                              "subscription", "delete", "typed"], capture_output=True,
                             text=True, timeout=60, check=False)
    assert running.returncode != 0 and "stop it first" in running.stderr
    cluster.set_status("typed", "STOP")
    _cli(cluster, "subscription", "delete", "typed")
    assert "typed" not in [found["subscription"] for found in
                           json.loads(_cli(cluster, "subscription", "list", "-o", "json"))]
