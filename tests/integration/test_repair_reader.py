"""`setl verify --repair`'s D requests on real servers, watched by a reader of the target: a
D is served in a window with the key's row read, so a row the source inserted after the
check that asked for the D is written back in the D's own transaction — the reader never
sees a part of a source transaction, nor the row gone after it was there."""

from __future__ import annotations

import threading
from typing import Any

from node.verify import repair as mend
from node.verify import run
from shared.sandbox import Sandbox
from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from tests.integration.test_verify import start
from tests.integration.test_verify_writers import in_process_verify

HOT = "CREATE TABLE `{schema}`.hot (id INT PRIMARY KEY, v INT, note VARCHAR(30))"
K = 5000  # the key the target holds stray and the source inserts after the check


class Reader(threading.Thread):
    """Reads the target as fast as it can, each read one consistent snapshot: the counter
    row (id 1) counts the source's 'real' rows, and K, once seen, stays."""

    def __init__(self, sandbox: Sandbox, table: str) -> None:
        super().__init__(daemon=True)
        self.sandbox, self.table = sandbox, table
        self.stop, self.saw_k = threading.Event(), threading.Event()
        self.reads = 0
        self.broken: list[str] = []

    def run(self) -> None:
        db = Database(self.sandbox, "target")
        try:
            while not self.stop.is_set():
                db.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                [(counter,)] = db.rows(f"SELECT v FROM {self.table} WHERE id = 1")
                [(real,)] = db.rows(f"SELECT COUNT(*) FROM {self.table} WHERE note = 'real'")
                k = db.rows(f"SELECT note FROM {self.table} WHERE id = {K}")
                db.execute("COMMIT")
                if counter != real:
                    self.broken.append(f"a part of a source transaction: counter {counter}, "
                                       f"{real} real row(s), K {k}")
                if self.saw_k.is_set() and not k:
                    self.broken.append("K gone after the source's row K was read")
                if k == [("real",)]:
                    self.saw_k.set()
                self.reads += 1
        finally:
            db.close()

    def read_more(self, reads: int) -> None:
        """Wait for ``reads`` more reads."""
        until = self.reads + reads
        wait_for(lambda: self.reads >= until or not self.is_alive(), 30, "the reader")


def test_a_repair_d_of_a_key_the_source_inserted_after_the_check_keeps_its_row(
        cluster: Cluster, source: Database, target: Database, monkeypatch: Any) -> None:
    """The target holds a stray row K, which verify confirms extra; a source transaction T
    (insert K, count it on the counter row) commits after the check and before the repair
    writes its D request of K (by a wrapper of the request writer; in production, any commit
    in that gap). The stream applies T, then the D is served: it deletes K and writes the
    source's K right after, in one transaction. The reader sees T whole and K never gone,
    and the target ends equal to the source."""
    schema = make_schema(source, target, HOT)
    channel = one_way("repair-reader", schema, ["hot"], free_door={"source": "target"})
    start(cluster, channel)
    table = f"`{schema}`.hot"
    source.execute(f"INSERT INTO {table} VALUES (1, 0, 'counter'), (2, 2, 'cold')")
    wait_equal(source, target, schema, ["hot"])
    target.execute("SET SESSION sql_log_bin = 0")  # the damage: a stray row K on the target
    target.execute(f"INSERT INTO {table} VALUES ({K}, 0, 'stray')")
    target.execute("SET SESSION sql_log_bin = 1")

    reader = Reader(cluster.sandbox, table)
    write, written = mend.write, []

    def t_then_write(buffer: Any, full_name: str, requests: list[Any]) -> list[range]:
        if not written:  # round 1: T commits after the check confirmed K extra
            assert [kind for kind, _ in requests] == ["D"], requests
            source.execute("BEGIN")
            source.execute(f"INSERT INTO {table} VALUES ({K}, {K}, 'real')")
            source.execute(f"UPDATE {table} SET v = v + 1 WHERE id = 1")
            source.execute("COMMIT")
            wait_for(reader.saw_k.is_set, 30, "the reader to see T on the target")
        written.append(requests)
        return write(buffer, full_name, requests)

    monkeypatch.setattr(mend, "write", t_then_write)
    reader.start()
    try:
        report = in_process_verify(cluster.sandbox, channel, "repair-reader.forward",
                                   run.Options(chunk_size=100, repair=True))
        wait_equal(source, target, schema, ["hot"])
        reader.read_more(20)
    finally:
        reader.stop.set()
        reader.join(30)
    assert reader.broken == [], sorted(set(reader.broken))
    assert len(written) == 1  # the D's round mended it: no second round
    [verdict] = report.tables
    assert verdict.remaining == 0, verdict
    assert target.rows(f"SELECT * FROM {table} WHERE id = {K}") == [(K, K, "real")]
    cluster.set_status("repair-reader", "STOP")
