"""Shard routing on real servers: one source table over 4 databases × 2 tables on two target
MariaDB servers, modulo balance, rows moving between shards, deletes by the before image."""

from __future__ import annotations

import uuid

from tests.devcluster import Cluster, Database, wait_for

ORDERS = "CREATE TABLE `{schema}`.{table} (id INT PRIMARY KEY, uid INT, note VARCHAR(20))"


def test_rows_are_routed_over_two_servers_and_move_with_their_shard_value(
        cluster: Cluster, source: Database, target: Database) -> None:
    cluster.sandbox.up(second_target=True)
    target2 = Database(cluster.sandbox, "target2")
    base = f"t_{uuid.uuid4().hex[:8]}"
    source.execute(f"CREATE DATABASE `{base}`")
    source.execute(ORDERS.format(schema=base, table="orders"))
    for index in range(4):
        db = target if index < 2 else target2
        db.execute(f"CREATE DATABASE `{base}_{index}`")
        for table in ("orders_0", "orders_1"):
            db.execute(ORDERS.format(schema=f"{base}_{index}", table=table))
    secret = f"file:{cluster.sandbox.secret_file}"
    servers = cluster.sandbox.servers()
    sources = [{"name": name, "host": "127.0.0.1", "port": servers[name].port, "user": "setl",
                "password": secret} for name in ("source", "target", "target2")]
    rule = {"column": "uid", "algorithm": "modulo"}
    pairs = [{"source": f"{base}.orders", "shard": rule,
              "target": {"namespace": f"{base}_[0-1]", "table": "orders_[0-1]"}},
             {"source": f"{base}.orders", "shard": rule, "target": {
                 "datasource": "target2", "namespace": f"{base}_[2-3]",
                 "table": "orders_[0-1]"}}]

    def sharded(pairs: list[dict]) -> list[dict]:
        return [{"name": "sharded", "pipelines": [{
            "name": "forward", "source": "source", "target": "target", "pairs": pairs}]}]

    cluster.apply(sharded(pairs), sources)
    cluster.set_status("sharded", "START")
    cluster.wait_running("sharded")
    t = f"`{base}`.orders"
    source.execute(f"INSERT INTO {t} VALUES " + ", ".join(f"({i}, {i * 3}, 'n{i}')"
                                                          for i in range(1, 41)))
    source.script(f"UPDATE {t} SET uid = 5 WHERE id = 1",  # slot 3 → slot 5: another server
                  f"UPDATE {t} SET note = 'same slot' WHERE id = 2",
                  f"DELETE FROM {t} WHERE id = 3")

    def placed() -> dict[int, tuple[int, str]]:
        found = {}
        for index in range(4):
            db = target if index < 2 else target2
            for table in (0, 1):
                for row in db.table(f"{base}_{index}", f"orders_{table}"):
                    assert row[0] not in found, f"row {row[0]} is in two shards"
                    found[row[0]] = (index * 2 + table, row[2])
        return found

    wait_for(lambda: len(placed()) == 39 and placed()[1][0] == 5, 60, "39 rows in place")
    expected = {i: (i * 3 % 8, f"n{i}") for i in range(1, 41) if i != 3}
    expected[1] = (5, "n1")
    expected[2] = (6, "same slot")
    assert placed() == expected
    # the written rows would stay where the old rule put them: a new rule is refused
    quotient = {"column": "uid", "algorithm": "quotient", "table_balance_size": 10}
    [error] = cluster.apply_errors(sharded([{**pair, "shard": quotient} for pair in pairs]),
                                   sources)
    assert f"the shard route of {base}.orders changes (algorithm modulo → quotient, " \
        "table_balance_size 1 → 10) and keeps slots it has written" in error, error
    [error] = cluster.apply_errors(sharded(pairs[:1]), sources)
    assert "(8 slots → 4)" in error, error
    target2.close()
    cluster.set_status("sharded", "STOP")
