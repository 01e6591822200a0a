"""Scale out: a node whose SparkSession runs on a Spark standalone cluster (a master and two
workers started from the pyspark installation on 127.0.0.1) replicates a channel exactly;
Extract/Transform ran in the workers' executors, not in the node."""

from __future__ import annotations

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_equal
from tests.sparkstandalone import SparkStandalone

ITEMS = ("CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(40), "
         "qty DECIMAL(10,2), at DATETIME(6), note TEXT)")


def test_a_channel_runs_on_a_standalone_spark_cluster(sandbox, tmp_path):
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, ITEMS)
    with SparkStandalone(tmp_path / "spark", workers=2) as spark:
        cluster = Cluster(sandbox, tmp_path / "setl", "scaleout", spark_master=spark.master_url,
                          local_max_rows=0)  # every batch a Spark job, however small
        try:
            cluster.start_manager()
            cluster.start_node(1)
            cluster.apply([one_way("scaleout", schema, ["items"], batch_size=500)])
            cluster.set_status("scaleout", "START")
            cluster.wait_running("scaleout", timeout_s=120)
            rows = ", ".join(f"({n}, 'item {n}', {n}.25, '2026-11-24 01:02:03.{n:06d}', "
                             f"REPEAT('n{n % 10}', 200))" for n in range(1, 3001))
            # ~1.2 MB of rows events in one part: they reach the executor as a broadcast
            source.execute(f"INSERT INTO `{schema}`.items VALUES {rows}")
            source.execute(f"UPDATE `{schema}`.items SET qty = qty * 2 WHERE id % 3 = 0")
            source.execute(f"DELETE FROM `{schema}`.items WHERE id % 7 = 0")
            wait_equal(source, target, schema, ["items"], timeout_s=120)
            assert "master=spark://127.0.0.1:" in cluster.nodes[1].output()
            assert "task of very large size" not in cluster.nodes[1].output()
            # the executors on the workers ran Python tasks of this application
            executors = [path for path in (tmp_path / "spark").glob("worker-*/app-*/*/stderr")]
            assert len({path.parts[-4] for path in executors}) == 2, executors
            cluster.set_status("scaleout", "STOP")
        finally:
            cluster.stop()
            source.close()
            target.close()
