"""A sandbox server, or a test's own server (``tests.devcluster.serve``), whose free port was
taken between the probe and its bind starts on another port, and is never taken for the
server that answers on the first one."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from shared.sandbox import Sandbox, free_port
from shared.sandbox_servers import MariaDBKind, ServerSpec, launch, listens
from tests.devcluster import Daemon, serve


@pytest.fixture
def imposter() -> Iterator[int]:
    """A listener on 127.0.0.1 that greets every client as a MySQL server does first."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def greet() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"\x0a\x00\x00\x00imposter")
    thread = threading.Thread(target=greet, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join()
    server.close()


def test_listens_tells_whose_socket_listens_on_a_port(imposter: int) -> None:
    assert listens(os.getpid(), imposter)
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert not listens(child.pid, imposter)
    finally:
        child.kill()
        child.wait()
    assert not listens(os.getpid(), free_port())


def test_a_taken_port_is_left_for_another_and_the_server_there_is_not_ours(
        sandbox: Sandbox, tmp_path: Path, imposter: int) -> None:
    ports = [imposter, free_port()]
    kind, datadir = MariaDBKind(), tmp_path / "db"
    server, port = launch(kind, ServerSpec("db", "mariadb", 51), datadir, sandbox.password(),
                          "setl", lambda attempt: ports[attempt], 60)
    try:
        assert port == ports[1]
        # the first try found the port taken, and said so
        assert "Address already in use" in kind.log_file(datadir).read_text()
        with pymysql.connect(host="127.0.0.1", port=port, user="setl",
                             password=sandbox.password()) as conn, conn.cursor() as cursor:
            cursor.execute("SELECT @@port")
            assert cursor.fetchone()[0] == port
    finally:
        server.terminate()
        server.wait(60)


def test_a_test_server_leaves_a_taken_port_though_something_answers_there(
        tmp_path: Path, imposter: int) -> None:
    """``ready`` passes for whatever answers on the port, as a manager's Status call passes
    on another test's manager: only the listening socket tells the servers apart."""
    ports = [imposter, free_port()]
    log = tmp_path / "redis.log"
    server, port = serve(lambda port: Daemon(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path)], log),
        lambda port: True, "redis-server", port_for=lambda attempt: ports[attempt])
    try:
        assert port == ports[1]
        assert "Address already in use" in log.read_text()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(b"PING\r\n")
            assert conn.recv(16) == b"+PONG\r\n"
    finally:
        server.stop()


def test_a_spark_master_on_a_taken_port_is_started_again_on_another(imposter: int,
                                                                     tmp_path: Path) -> None:
    """Spark binds the next port up when its own is taken, so workers given the first one
    would register with whatever holds it: the test cluster's master is started again on
    another port, the one its workers are then given."""
    from tests.sparkstandalone import SparkStandalone

    spark = SparkStandalone(tmp_path, workers=0)
    spark.port, spark.master_url = imposter, f"spark://127.0.0.1:{imposter}"
    try:
        spark.start(timeout_s=60)
        assert spark.port != imposter
        assert spark.master_url == f"spark://127.0.0.1:{spark.port}"
        started = re.findall(r"Starting Spark master at spark://127\.0\.0\.1:(\d+)",
                             (tmp_path / "master.log").read_text())
        # the first try moved up from the taken port, and was stopped; the last is ours
        assert len(started) >= 2 and int(started[0]) not in (imposter, spark.port)
        assert int(started[-1]) == spark.port
    finally:
        spark.stop()
