"""A snapshot copy to a target whose max_allowed_packet is smaller than the source's, on
real MariaDB servers (node.extract.copylines). The source reads a chunk's lines under its
own packet (``group_concat_max_len``): a 5 MiB BLOB's VALUES tuple (10 MiB of hex) fit the
source's 32 MiB, went to a target without ``local_infile`` in a REPLACE over its 8 MiB, was
refused ("packet too big", the connection gone) at every retry, and the copy never ended. So
did a long tuple sent after short ones in one statement. Such a chunk is read as rows now
(Load cuts the value into pieces), a statement is cut before a long tuple: the copy ends
``done``, every cell equal. LOAD DATA lines stream a packet at a time: any line goes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_for
from tests.integration.test_server_settings import global_setting

MIB = 1 << 20
KIB = 1 << 10
SOURCE_PACKET = 32 * MIB
TARGET_PACKET = 8 * MIB
COLUMNS = ("px", "name")
ROWS = (  # id, px MEDIUMBLOB, name VARCHAR(20); chunks of two rows
    f"(1, REPEAT(x'01fe5c00', {100 * KIB}), 'short before long')",  # 800 KiB of hex, then
    f"(2, REPEAT(x'0a0d095c', {998 * KIB}), 'long after short')",  # 7.8 MiB: over 8 together
    f"(3, REPEAT(x'5c00ab27', {5 * MIB // 4}), 'five mib')",  # 10 MiB of hex: as rows
    "(4, x'00ff', 'small')",
    "(5, '', 'empty')",
    "(6, NULL, NULL)",
    "(7, x'27', 'quote')",
    "(8, x'5c', 'backslash')")
# 18 MiB of hex, under the source's packet, and 9 MiB unhexed, over the target's: a LOAD DATA
# line carries it (no statement can: the target's CONCAT of its pieces is refused)
HUGE = f"(9, REPEAT(x'5c0a', {9 * MIB // 2}), 'nine mib')"


@pytest.fixture(scope="module", autouse=True)
def packets(source: Database, target: Database) -> Iterator[None]:
    """Both servers' max_allowed_packet at 8 MiB while the module runs (connections made
    from then on take it: the module's node starts after; the start check passes); put
    back after."""
    before = {db: db.rows("SELECT @@GLOBAL.max_allowed_packet")[0][0]
              for db in (source, target)}
    for db in (source, target):
        db.execute(f"SET GLOBAL max_allowed_packet = {TARGET_PACKET}")
    yield
    for db, packet in before.items():
        db.execute(f"SET GLOBAL max_allowed_packet = {packet}")


def cells(db: Database, schema: str) -> list[tuple[object, ...]]:
    sums = ", ".join(f"LENGTH(`{name}`), SHA2(`{name}`, 256)" for name in COLUMNS)
    return db.rows(f"SELECT id, {sums} FROM `{schema}`.`wide` ORDER BY id")


def copied(cluster: Cluster, source: Database, target: Database, name: str,
           rows: tuple[str, ...]) -> tuple[int, int]:
    """The table filled on the source; the channel started (both packets at 8 MiB), the
    source's raised to 32 MiB (the start check is behind: the chunks' reads take it), and
    the table copied by ``setl snapshot``: done, equal. The chunks read, and those read as
    lines."""
    from manager import cli

    schema = make_schema(source, target,
                         "CREATE TABLE `{schema}`.`wide` (id INT PRIMARY KEY, px MEDIUMBLOB, "
                         "name VARCHAR(20)) DEFAULT CHARSET=utf8mb4")
    with global_setting(source, "max_allowed_packet", SOURCE_PACKET):
        filling = Database(cluster.sandbox, "source")  # (a session of the larger packet)
        for row in rows:
            filling.execute(f"INSERT INTO `{schema}`.`wide` VALUES {row}")
        filling.close()
    assert [row[1] for row in cells(source, schema)][:3] == [400 * KIB, 3992 * KIB, 5 * MIB]
    assert rows == ROWS or cells(source, schema)[-1][1] == 9 * MIB
    cluster.apply([one_way(name, schema, ["wide"], snapshot_chunk_size=2)])
    cluster.set_status(name, "START")
    cluster.wait_running(name)
    with global_setting(source, "max_allowed_packet", SOURCE_PACKET):
        assert cli.main(["--manager", cluster.manager_address, "snapshot", name, "--table",
                         f"{schema}.wide"]) == 0

        def done() -> bool:
            copies = list(cluster.pipeline_state(name).snapshots)
            return bool(copies) and all(copy.state == "done" for copy in copies)

        wait_for(done, 150, f"{name}: the copy done (a statement over the target's packet "
                 "was refused at every retry)")
    assert cells(target, schema) == cells(source, schema)
    windows = [line for line in cluster.nodes[1].output().splitlines()
               if "event=snapshot_window " in line and f"pipeline={name}.forward " in line]
    cluster.set_status(name, "STOP")
    return (sum(len(line.split(" chunks=", 1)[1].split(" ", 1)[0].split(","))
                for line in windows),
            sum(int(line.rsplit("as_lines=", 1)[1]) for line in windows))


def test_values_tuples_over_the_targets_packet_copy_as_rows(
        cluster: Cluster, source: Database, target: Database) -> None:
    """The 5 MiB value's chunk read as rows, the others as lines (the first cut in two
    statements)."""
    with global_setting(target, "local_infile", 0):
        chunks, lines = copied(cluster, source, target, "packettuples", ROWS)
    assert 2 <= lines < chunks, (chunks, lines)


def test_load_data_lines_over_the_targets_packet_stream(
        cluster: Cluster, source: Database, target: Database) -> None:
    """LOAD DATA LOCAL streams its lines a packet at a time: every chunk goes as lines, the
    9 MiB value's 18 MiB of hex too (unhexed on the target past its packet)."""
    chunks, lines = copied(cluster, source, target, "packetlines", (*ROWS, HUGE))
    assert lines == chunks, (chunks, lines)


def test_a_value_longer_than_the_targets_packet_pauses_at_once(
        cluster: Cluster, source: Database, target: Database) -> None:
    """A 9 MiB value streamed to the 8 MiB target: its pieces fit, but the target builds the
    value whole and CONCAT refuses it past the packet (Load retried it forever): the
    pipeline pauses at once, nothing of the transaction written, saying what to raise."""
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.`wide` (id INT PRIMARY KEY, "
                         "px MEDIUMBLOB)")
    cluster.apply([one_way("packethuge", schema, ["wide"], max_retries=3)])
    cluster.set_status("packethuge", "START")
    cluster.wait_running("packethuge")
    with global_setting(source, "max_allowed_packet", SOURCE_PACKET):
        writing = Database(cluster.sandbox, "source")  # (a session of the larger packet)
        writing.script("BEGIN", f"INSERT INTO `{schema}`.`wide` VALUES (1, x'01')",
                       f"INSERT INTO `{schema}`.`wide` VALUES (2, REPEAT(x'5c0a', {9 * MIB // 2}))",
                       "COMMIT")
        writing.close()
    wait_for(lambda: cluster.channel_status("packethuge") == "PAUSE", 120, "the pause")
    error = cluster.pipeline_state("packethuge").last_error
    assert f"a row's value of `px` takes {9 * MIB:,} bytes, over the target's " \
        f"max_allowed_packet ({TARGET_PACKET:,} bytes)" in error, error
    log = [line for line in cluster.nodes[1].output().splitlines()
           if "pipeline=packethuge.forward" in line]
    assert not [line for line in log if "event=pipeline_failed" in line], log  # no retry
    assert target.table(schema, "wide") == []
