"""Random insert/update/delete/key-change sequences on a real source, replicated through a
running channel (Select → Spark E/T → merge → Load), and the target compared row by row.

The table has a unique secondary key over a small domain of values, so deletes that free a
value, updates that pass a value from row to row and primary-key changes collide inside one
batch the way real workloads do. Fixed seeds make a failure repeatable."""

from __future__ import annotations

import random

import pymysql
import pytest

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal

ITEMS = ("CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, code INT NULL, name VARCHAR(20), "
         "qty INT, UNIQUE KEY by_code (code))")
OPERATIONS = 1500
KEYS = 60  # a small key space: keys are reused, deleted and born again
CODES = 40


def random_statement(rng: random.Random, table: str) -> str:
    key, other, code = rng.randrange(KEYS), rng.randrange(KEYS), rng.randrange(CODES)
    code_sql = "NULL" if rng.random() < 0.1 else str(code)
    match rng.choices(["insert", "update", "code", "key", "delete", "range"],
                      [30, 25, 15, 10, 15, 5])[0]:
        case "insert":
            return (f"INSERT INTO {table} VALUES ({key}, {code_sql}, 'n{rng.randrange(999)}', "
                    f"{rng.randrange(100)})")
        case "update":
            return (f"UPDATE {table} SET qty = qty + 1, name = 'u{rng.randrange(999)}' "
                    f"WHERE id = {key}")
        case "code":
            return f"UPDATE {table} SET code = {code_sql} WHERE id = {key}"
        case "key":
            return f"UPDATE {table} SET id = {other} WHERE id = {key}"
        case "delete":
            return f"DELETE FROM {table} WHERE id = {key}"
        case _:
            return f"DELETE FROM {table} WHERE id BETWEEN {key} AND {key + 3}"


def run_random_workload(source: Database, table: str, seed: int) -> int:
    """Random statements, alone or in transactions of up to 20; return how many succeeded."""
    rng = random.Random(seed)
    done = 0
    while done < OPERATIONS:
        in_transaction = rng.random() < 0.4
        if in_transaction:
            source.execute("BEGIN")
        for _ in range(rng.randint(2, 20) if in_transaction else 1):
            try:
                source.execute(random_statement(rng, table))
            except pymysql.err.IntegrityError:
                pass  # a taken key or code: the statement fails, the transaction goes on
            done += 1
        if in_transaction:
            source.execute("COMMIT" if rng.random() < 0.9 else "ROLLBACK")
    return done


@pytest.mark.parametrize("seed", [7, 2024])
def test_random_changes_replicate_exactly(cluster: Cluster, source: Database, target: Database,
                                          seed: int) -> None:
    schema = make_schema(source, target, ITEMS)
    name = f"random-{seed}"
    # small batches and a short timeout: many batches, each merging several transactions
    cluster.apply([one_way(name, schema, ["items"], batch_size=50, batch_timeout_ms=20)])
    cluster.set_status(name, "START")
    cluster.wait_running(name)
    run_random_workload(source, f"`{schema}`.items", seed)
    wait_equal(source, target, schema, ["items"], timeout_s=90)
    assert source.table(schema, "items"), "the workload left rows to compare"
    cluster.set_status(name, "STOP")
