"""What Load's own ON DELETE actions (:mod:`node.target.mysql.cascades`) cost a target.

On a sandbox of its own, a target holds PARENTS parents with one child each (``ON DELETE
CASCADE``). A batch deleting every parent is rendered as Load renders it — with the
children's actions (``after``) and without them (``before``: the target's own cascade
alone) — and written in one transaction with foreign_key_checks on, then rolled back;
``--runs`` times each, alternately, the best counting. Two batches:

- ``grouped``: the deletes one after the other (a source's 10k single-row transactions):
  consecutive deletes go as multi-row statements, an action per child table per chunk;
- ``interleaved``: each delete follows an update of another parent's note (an ordered
  table's steps keep source order): a delete a chunk, an action per delete.

Then the gap itself: the parents deleted on the target beforehand (checks off), the batch
``after`` leaves no child, ``before`` all of them.

    python -m bench.cascades [--parents 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from typing import Any

import pymysql
from pymysql.constants import CLIENT

from node.changes import ChangeType, TargetChange
from node.jobs import JobSpec, Unit
from node.target.mysql.facts import read_facts
from node.target.mysql.sessions import SESSION
from node.target.mysql.together import Together
from node.target.mysql.units import render
from shared.sandbox import Sandbox

SCHEMA = "bench_cascades"
DDL = (f"CREATE TABLE {SCHEMA}.parent (id INT PRIMARY KEY, note VARCHAR(20))",
       f"CREATE TABLE {SCHEMA}.child (id INT PRIMARY KEY, p INT NOT NULL, FOREIGN KEY (p) "
       f"REFERENCES {SCHEMA}.parent (id) ON DELETE CASCADE)")


def changes(parents: int, interleaved: bool) -> list[TargetChange]:
    out, seq = [], 0
    address = ("target", SCHEMA, "parent")
    for n in range(1, parents + 1):
        if interleaved:  # another parent's note changes first (it is deleted later)
            other = parents + 1 - n if parents + 1 - n > n else n
            out.append(TargetChange(*address, ChangeType.UPDATE, ("id",), (other,),
                                    {"id": other, "note": f"u{n}"}, seq=seq))
            seq += 1
        out.append(TargetChange(*address, ChangeType.DELETE, ("id",), (n,), None, seq=seq))
        seq += 1
    return out


def units(cursor: Any, batch: list[TargetChange], actions: bool) -> list[Unit]:
    facts = read_facts(cursor, SCHEMA, "parent")
    if not actions:
        facts = dataclasses.replace(facts, children=())
    return render(batch, JobSpec(0, False, {("target", SCHEMA, "parent"): facts},
                                 load_batch_size=1000))


def write(conn: pymysql.Connection, written: list[Unit]) -> float:
    """Seconds to write the units in one transaction (rolled back after)."""
    with conn.cursor() as cursor:
        together = Together(cursor)
        started = time.perf_counter()
        for unit in written:
            for sql in unit.sqls:
                together.add(unit, sql.text)
        together.send()
        took = time.perf_counter() - started
    conn.rollback()
    return took


def fill(conn: pymysql.Connection, parents: int) -> None:
    with conn.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
        cursor.execute(f"CREATE DATABASE {SCHEMA}")
        cursor.execute(f"USE {SCHEMA}")  # (the seq_ tables of the Sequence engine)
        for statement in DDL:
            cursor.execute(statement)
        cursor.execute(f"INSERT INTO {SCHEMA}.parent SELECT seq, 'p' FROM seq_1_to_{parents}")
        cursor.execute(f"INSERT INTO {SCHEMA}.child SELECT seq, seq FROM seq_1_to_{parents}")
    conn.commit()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parents", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        box = Sandbox(folder)
        box.up(owner_pid=os.getpid())
        box.trust_secret()
        try:
            conn = pymysql.connect(**box.connection("target"), autocommit=False,
                                   init_command=SESSION, client_flag=CLIENT.MULTI_STATEMENTS)
            fill(conn, args.parents)
            with conn.cursor() as cursor:
                rendered = {(kind, actions): units(cursor, changes(args.parents, kind ==
                                                                   "interleaved"), actions)
                            for kind in ("grouped", "interleaved") for actions in (False, True)}
            for kind in ("grouped", "interleaved"):
                best: dict[bool, float] = {}
                for _ in range(args.runs):
                    for actions in (False, True):
                        took = write(conn, rendered[kind, actions])
                        best[actions] = min(best.get(actions, took), took)
                statements = {actions: sum(len(u.sqls) for u in rendered[kind, actions])
                              for actions in (False, True)}
                print(f"{kind}: {args.parents} parent deletes, 1 child each: before "
                      f"{best[False]:.3f} s ({statements[False]} statements), after "
                      f"{best[True]:.3f} s ({statements[True]} statements): "
                      f"{(best[True] / best[False] - 1) * 100:+.1f}%")
            with conn.cursor() as cursor:  # the gap: no parent on the target
                cursor.execute("SET SESSION foreign_key_checks = 0")
                cursor.execute(f"DELETE FROM {SCHEMA}.parent")
                cursor.execute("SET SESSION foreign_key_checks = 1")
                for actions in (False, True):  # (one after the other, in one transaction)
                    for unit in rendered["grouped", actions]:
                        for sql in unit.sqls:
                            cursor.execute(sql.text)
                    cursor.execute(f"SELECT COUNT(*) FROM {SCHEMA}.child")
                    print(f"parents missing on the target, {'after' if actions else 'before'}"
                          f": {cursor.fetchone()[0]} children left")
            conn.rollback()
            conn.close()
        finally:
            box.down(purge=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
