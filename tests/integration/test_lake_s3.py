"""A lake in an object store: the Delta target writing to S3 (moto's S3 server on 127.0.0.1,
which keeps S3's conditional writes, so two writers never both commit a version), with
credentials by reference. The node killed mid-stream and restarted behind its tables; the
mirrors end equal to the source and the change log replays to its rows; verify and
``setl position show`` read the same store."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from manager import cli
from tests.devcluster import Cluster, Daemon, Database, serve
from tests.integration.lakes import (
    SHAPES,
    LakeWatcher,
    Store,
    ended,
    lake_channel,
    lake_sources,
    streamed_with_kills,
)
from tests.integration.shapes import Shapes

pytestmark = pytest.mark.integration
KEY, SECRET = "setl-test-key", "setl-test-secret"


@contextmanager
def s3_server(log: Path) -> Iterator[str]:
    """moto's S3 server on a free port of 127.0.0.1, a process of its own (in this one, a
    delta-rs read that holds the GIL would wait on a server that needs it) that dies with
    the test, with a bucket ``lake``; its endpoint."""
    import boto3

    def ready(port: int) -> object:
        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}",
                              aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                              region_name="us-east-1")
        return client.create_bucket(Bucket="lake")

    server, port = serve(lambda port: Daemon(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        log), ready, "moto's S3 server")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_a_lake_in_s3_takes_a_kill_9_verify_and_positions(sandbox, tmp_path, zk_client,
                                                           capsys: Any) -> None:
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    file, pos = source.rows("SHOW MASTER STATUS")[0][:2]
    shapes = Shapes(sandbox, source, target, targets=(), kinds=3, seed=21)
    cluster = Cluster(sandbox, tmp_path, "lake-s3", spark_start="boot",
                      env={"SETL_S3_KEY": KEY, "SETL_S3_SECRET": SECRET})
    rng = random.Random(4)
    with s3_server(tmp_path / "moto.log") as endpoint:
        options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true",
                   "AWS_REGION": "us-east-1"}
        store = Store("s3://lake/setl", {**options, "AWS_ACCESS_KEY_ID": KEY,
                                         "AWS_SECRET_ACCESS_KEY": SECRET})
        sources = lake_sources(cluster, tmp_path)
        sources[1] = {"name": "lake", "type": "delta", "location": store.url, "storage": {
            **options, "AWS_ACCESS_KEY_ID": "${SETL_S3_KEY}",
            "AWS_SECRET_ACCESS_KEY": "${SETL_S3_SECRET}"}}
        watcher = LakeWatcher(store, shapes.schema)
        try:
            streamed_with_kills(cluster, shapes, source, lake_channel(
                "l3", shapes.schema, SHAPES, batch_timeout_ms=20,
                start={"file": file, "pos": pos}), sources, watcher, zk_client, 2, rng,
                                versions=5)
            capsys.readouterr()
            manager = ["--manager", cluster.manager_address]
            code = cli.main([*manager, "-o", "json", "verify", "l3"])
            out = capsys.readouterr()
            # (exit 4: the keyless table is not verified, so nothing is proven equal)
            assert code == 4, out.out + out.err
            report = json.loads(out.out)["reports"][0]
            assert {skip["table"] for skip in report["skipped"]} == {f"{shapes.schema}.kl"}
            tables = {t["table"]: t["rows"] for t in report["tables"]}
            assert tables[f"{shapes.schema}.accounts"] > 0 and f"{shapes.schema}.sl" in tables
            assert cli.main([*manager, "-o", "json", "position", "show", "l3"]) == 0
            shown = capsys.readouterr().out
            assert "lake" in shown and "binlog" in shown, shown
        finally:
            ended(shapes, watcher, cluster, source, target)
