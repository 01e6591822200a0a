"""A snapshot copy of values long and dense in the characters a line escapes, on real
servers (node.extract.copylines). The source escaped each text field with nested REPLACE()s,
and MariaDB's REPLACE is quadratic in its matches: a chunk holding 1 MiB of zero bytes took
the source about 27 minutes, its window timed out at 60 s and was queued again, forever (the
copy stayed 'copying' with no row). The VALUES tuples of a target without ``local_infile``
escaped line breaks the same way. Long columns go as hex now: each copy is done in
seconds, byte for byte equal (a value whose hex passes max_allowed_packet too: its chunk is
read as rows, not copied as NULL)."""

from __future__ import annotations

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_for
from tests.integration.test_server_settings import global_setting

MIB = 1 << 20
COLUMNS = ("px", "body", "short", "name")
ROWS = (  # id, px MEDIUMBLOB, body MEDIUMTEXT, short VARCHAR(255) (escaped, 1020 bytes)
    f"(1, REPEAT(x'00', {MIB}), REPEAT('\\n', {MIB}), REPEAT('\\\\', 255), 'zeros')",
    f"(2, REPEAT('\\\\', {MIB}), REPEAT('\\r\\n\\t', {MIB // 3}), REPEAT('\\t', 255), 'more')",
    f"(3, REPEAT(x'0a0d095c00', {MIB // 5}), CONCAT('é', REPEAT('\\\\n', {MIB // 2})), "
    "REPEAT(x'00', 255), 'mixed')",
    "(4, '', '', '', 'empty')",
    "(5, NULL, NULL, NULL, NULL)",
    "(6, x'00ff5c0a', 'a\\tb\\nc\\\\d\\re', 'x\\ny\\\\z', 'small')",
    # 18 MiB in hex, past max_allowed_packet (16 MiB): its chunk is read as rows
    f"(7, REPEAT(x'5c00', {9 * MIB // 2}), 'hex past the limit', '', 'huge')")


def cells(db: Database, schema: str) -> list[tuple[object, ...]]:
    sums = ", ".join(f"LENGTH(`{name}`), SHA2(`{name}`, 256)" for name in COLUMNS)
    return db.rows(f"SELECT id, {sums} FROM `{schema}`.`long` ORDER BY id")


def statements(target: Database, name: str) -> int:
    return int(target.rows(f"SHOW GLOBAL STATUS LIKE 'Com_{name}'")[0][1])


def copied(cluster: Cluster, source: Database, target: Database, name: str, by: str) -> None:
    """The table filled on the source, copied by ``start: snapshot`` as lines, and equal;
    the lines loaded by ``by`` statements (load: LOAD DATA, replace: VALUES tuples)."""
    schema = make_schema(source, target,
                         "CREATE TABLE `{schema}`.`long` (id INT PRIMARY KEY, px MEDIUMBLOB, "
                         "body MEDIUMTEXT, short VARCHAR(255), name VARCHAR(20)) "
                         "DEFAULT CHARSET=utf8mb4")
    for row in ROWS:
        source.execute(f"INSERT INTO `{schema}`.`long` VALUES {row}")
    before = statements(target, by)
    cluster.apply([one_way(name, schema, ["long"], start="snapshot", snapshot_chunk_size=2)])
    cluster.set_status(name, "START")

    def done() -> bool:
        copies = list(cluster.pipeline_state(name).snapshots)
        return bool(copies) and all(copy.state == "done" for copy in copies)

    wait_for(done, 150, f"{name}: the copy done (the old escaping takes ~27 min a row)")
    assert cells(target, schema) == cells(source, schema)
    windows = [line for line in cluster.nodes[1].output().splitlines()
               if "event=snapshot_window " in line and f"pipeline={name}.forward " in line]
    assert sum(int(line.rsplit("as_lines=", 1)[1]) for line in windows) >= 2, windows
    assert statements(target, by) - before >= 2
    cluster.set_status(name, "STOP")


def test_long_dense_values_copy_as_load_data_lines(cluster: Cluster, source: Database,
                                                   target: Database) -> None:
    copied(cluster, source, target, "longlif", "load")


def test_long_dense_values_copy_as_values_tuples_without_local_infile(
        cluster: Cluster, source: Database, target: Database) -> None:
    with global_setting(target, "local_infile", 0):
        copied(cluster, source, target, "longtuples", "replace")
