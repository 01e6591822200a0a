"""Where a pipeline starts: ``start: latest`` is the moment of ``setl channel start``, fixed
by the manager before the command returns, so a row committed right after it is replicated
however long a node takes to get going (here: no node at all for a while)."""

from __future__ import annotations

from shared.devcluster import Cluster, Database, make_schema, one_way, wait_equal, wait_for
from shared.positions import Cursor
from shared.zk import ZkPaths


def test_rows_written_right_after_start_arrive_when_no_node_runs_yet(sandbox, tmp_path,
                                                                    zk_client):
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, "
                         "note VARBINARY(40))", "CREATE TABLE `{schema}`.kl (a INT, b TEXT)")
    cluster = Cluster(sandbox, tmp_path, "latest")
    t = f"`{schema}`"
    try:
        cluster.start_manager()
        source.execute(f"INSERT INTO {t}.items VALUES (0, 'before the start')")
        cluster.apply([one_way("latest", schema, ["items", "kl"])])
        before = source.rows("SHOW MASTER STATUS")[0][:2]
        cluster.set_status("latest", "START")
        for n in range(1, 201):  # at once, while no node runs
            source.execute("BEGIN")
            source.execute(f"INSERT INTO {t}.items VALUES ({n}, UNHEX(MD5({n})))")
            source.execute(f"INSERT INTO {t}.kl VALUES ({n % 3}, 'dup'), ({n % 3}, 'dup')")
            source.execute("COMMIT")
        stored = Cursor.from_json(zk_client.get(ZkPaths(cluster.root).cursor(
            "latest.forward"))[0])
        assert (stored.position.file, stored.position.pos) == (before[0], int(before[1]))
        node = cluster.start_node(1)
        cluster.wait_running("latest")
        target.execute(f"INSERT INTO {t}.items VALUES (0, 'before the start')")
        wait_equal(source, target, schema, ["items", "kl"])
        hexed = f"SELECT id, HEX(note) FROM {t}.items ORDER BY id"
        assert source.rows(hexed) == target.rows(hexed)
        assert "event=pipeline_start_fixed pipeline=latest.forward" in \
            cluster.manager.output() if cluster.manager else False
        wait_for(lambda: "event=pipeline_started pipeline=latest.forward" in node.output(), 10,
                 "the node's start line")
    finally:
        cluster.stop()
        source.close()
        target.close()
