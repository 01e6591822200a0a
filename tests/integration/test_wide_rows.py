"""Rows near the target's max_allowed_packet (both servers at 4 MiB here, so the start check
passes): a keyed row of several values, none over BIG_VALUE, whose statement would not fit
writes its largest values a piece at a time and loads byte for byte; a keyless row that
would not fit stops the pipeline at once, before anything of its batch is written, saying
the table, the sizes and what to raise."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for

PACKET = 4 << 20
VALUE = 98_304  # times 16 bytes: 1.5 MiB a value, 3 MiB written as hex; a row 7.5 MiB
WIDE = ("CREATE TABLE `{schema}`.w (id INT PRIMARY KEY, c1 LONGBLOB, c2 LONGBLOB, "
        "c3 LONGBLOB, c4 LONGBLOB, c5 LONGBLOB)")
KEYLESS = "CREATE TABLE `{schema}`.k (id INT, v LONGBLOB)"


@pytest.fixture(scope="module", autouse=True)
def small_packets(source: Database, target: Database) -> Iterator[None]:
    """Both servers' max_allowed_packet at 4 MiB while the module runs (connections made
    from then on take it), put back after."""
    before = {db: db.rows("SELECT @@GLOBAL.max_allowed_packet")[0][0]
              for db in (source, target)}
    for db in (source, target):
        db.execute(f"SET GLOBAL max_allowed_packet = {PACKET}")
    yield
    for db, packet in before.items():
        db.execute(f"SET GLOBAL max_allowed_packet = {packet}")


def digest(db: Database, schema: str, table: str, columns: str) -> list[tuple[object, ...]]:
    return db.rows(f"SELECT id, {', '.join(f'LENGTH({c}), MD5({c})' for c in columns.split())}"
                   f" FROM `{schema}`.`{table}` ORDER BY id")


def test_a_keyed_row_over_the_packet_loads_its_largest_values_in_pieces(
        cluster: Cluster, source: Database, target: Database) -> None:
    """Filled a column a statement (each under the packet), the row grows to 7.5 MiB, its
    INSERT … ON DUPLICATE KEY UPDATE 15 MiB of text: the target dropped the connection
    ("Got a packet bigger than max_allowed_packet") on every try, and the pipeline paused."""
    schema = make_schema(source, target, WIDE)
    t = f"`{schema}`.w"
    cluster.apply([one_way("wide", schema, ["w"], max_retries=0)])
    cluster.set_status("wide", "START")
    cluster.wait_running("wide")
    source.execute(f"INSERT INTO {t} (id, c1) VALUES (1, REPEAT(UNHEX(MD5('c1')), {VALUE}))")
    for column in ("c2", "c3", "c4", "c5"):
        source.execute(f"UPDATE {t} SET {column} = REPEAT(UNHEX(MD5('{column}')), {VALUE}) "
                       "WHERE id = 1")
    source.execute("BEGIN")  # a transaction of a wide row beside small ones
    source.execute(f"INSERT INTO {t} VALUES (2, 'two', NULL, '', NULL, NULL), (3, "
                   f"REPEAT(UNHEX(MD5(3)), {VALUE}), REPEAT(UNHEX(MD5(4)), {VALUE}), "
                   f"REPEAT(UNHEX(MD5(5)), {VALUE}), 'x', REPEAT(UNHEX(MD5(6)), {VALUE}))")
    source.execute(f"UPDATE {t} SET c1 = 'short' WHERE id = 1")
    source.execute("COMMIT")
    wanted = digest(source, schema, "w", "c1 c2 c3 c4 c5")
    assert [(row[0], *row[1::2]) for row in wanted] == [(1, 5, VALUE * 16, VALUE * 16, VALUE * 16,
                                               VALUE * 16),
                                              (2, 3, None, 0, None, None),
                                              (3, VALUE * 16, VALUE * 16, VALUE * 16, 1,
                                               VALUE * 16)]

    def loaded() -> bool:
        assert cluster.channel_status("wide") == "START", \
            cluster.pipeline_state("wide").last_error
        return digest(target, schema, "w", "c1 c2 c3 c4 c5") == wanted

    wait_for(loaded, 180, "the wide rows on the target, byte for byte")
    source.execute(f"UPDATE {t} SET c1 = REPEAT(UNHEX(MD5(7)), {VALUE}) WHERE id = 1")
    wanted = digest(source, schema, "w", "c1 c2 c3 c4 c5")
    wait_for(loaded, 120, "the wide row's update on the target")
    wait_equal(source, target, schema, ["w"], 60)
    cluster.set_status("wide", "STOP")


def test_a_keyless_row_over_the_packet_stops_the_pipeline_saying_what_to_raise(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A keyless row has no key to append a value to: its INSERT of 6 MiB of text cannot be
    cut. The pipeline pauses at once with the table, the sizes and the fix, and nothing of
    the transaction (a small row before it) is on the target; raised, it loads."""
    schema = make_schema(source, target, KEYLESS)
    t = f"`{schema}`.k"
    cluster.apply([one_way("keyless", schema, ["k"], max_retries=3)])
    cluster.set_status("keyless", "START")
    cluster.wait_running("keyless")
    source.execute(f"INSERT INTO {t} VALUES (0, 'before')")
    wait_for(lambda: target.table(schema, "k") == [(0, b"before")], 60, "the first row")
    source.script("BEGIN", f"INSERT INTO {t} VALUES (1, 'small')",
                  f"INSERT INTO {t} VALUES (2, REPEAT(UNHEX(MD5(2)), {2 * VALUE}))", "COMMIT")
    wait_for(lambda: cluster.channel_status("keyless") == "PAUSE", 120, "the pause")
    error = cluster.pipeline_state("keyless").last_error
    assert f"table {schema}.k (keyless): a row's INSERT takes 6,291,605 bytes, over the " \
        f"target's max_allowed_packet ({PACKET:,} bytes); a keyless row goes in one " \
        "statement" in error, error
    assert "Raise the target's max_allowed_packet to at least 7340032 (SET GLOBAL " \
        "max_allowed_packet = 7340032; and in my.cnf), then resume the channel" in error
    log = [line for line in cluster.nodes[1].output().splitlines()
           if "pipeline=keyless.forward" in line]
    assert not [line for line in log if "event=pipeline_failed" in line], log  # at once:
    assert [line for line in log if "event=pipeline_paused" in line]  # no retry sent it
    assert target.table(schema, "k") == [(0, b"before")]  # none of the transaction
    target.execute(f"SET GLOBAL max_allowed_packet = {4 * PACKET}")
    try:
        cluster.set_status("keyless", "START")
        wait_equal(source, target, schema, ["k"], 120)
    finally:
        target.execute(f"SET GLOBAL max_allowed_packet = {PACKET}")
    cluster.set_status("keyless", "STOP")
