"""A whole channel over verified TLS, on real servers: Select (binlog and table reads) and
Load reach a MariaDB whose user must use TLS, the certificates read only from the node's
secret directories."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pymysql
import pytest

from shared import confinement
from shared.endpoint import connect
from shared.errors import SourceError
from shared.model import DataSource, TlsOptions
from shared.sandbox import Sandbox, free_port
from shared.sandbox_servers import MariaDBKind, ServerSpec, launch
from shared.secrets import SecretRef
from tests.devcluster import (
    Cluster,
    make_certificates,
    wait_for,
)

TABLE = "CREATE TABLE `{schema}`.items (id INT PRIMARY KEY, name VARCHAR(20))"


def test_a_whole_channel_runs_over_tls_to_a_server_that_requires_it(
        sandbox: Sandbox, tmp_path: Path) -> None:
    """Select (binlog and table reads) and Load both reach a MariaDB whose user must use
    TLS; the rows arrive only if every connection verified the server's certificate."""
    certificates = make_certificates(tmp_path / "tls")
    kind, datadir = MariaDBKind(), tmp_path / "tlsdb"
    spec = ServerSpec("tlsdb", "mariadb", 41, extra_args=(
        f"--ssl-ca={certificates.ca}", f"--ssl-cert={certificates.server_cert}",
        f"--ssl-key={certificates.server_key}"))
    server, port = launch(kind, spec, datadir, sandbox.password(), "setl",
                          lambda attempt: free_port(), 60)
    # tls: files are read only from secret directories: the certificates' folder is one
    cluster = Cluster(sandbox, tmp_path, "tls", security={"secret_dirs": [
        str(sandbox.secret_file.parent), str(certificates.ca.parent)]})
    try:
        root = pymysql.connect(unix_socket=str(kind.socket_path(datadir)), user="root",
                               autocommit=True)
        with root, root.cursor() as cursor:
            for host in ("127.0.0.1", "localhost"):
                cursor.execute(f"ALTER USER 'setl'@'{host}' REQUIRE SSL")
            cursor.execute("CREATE DATABASE shop")
            cursor.execute("CREATE DATABASE shop_copy")
            cursor.execute(TABLE.format(schema="shop"))
            cursor.execute(TABLE.format(schema="shop_copy"))
        tls = {"ca": str(certificates.ca), "verify_identity": True}
        sources = [{"name": name, "host": "127.0.0.1", "port": port, "user": "setl",
                    "password": f"file:{sandbox.secret_file}", "tls": tls}
                   for name in ("source", "target")]
        channel = {"name": "tls", "pipelines": [{
            "name": "forward", "source": "source", "target": "target", "batch_timeout_ms": 50,
            "pairs": [{"source": "shop.items", "target": "shop_copy.items"}]}]}
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([channel], sources)
        cluster.set_status("tls", "START")
        cluster.wait_running("tls", 120)
        secured = pymysql.connect(host="127.0.0.1", port=port, user="setl",
                                  password=sandbox.password(), autocommit=True,
                                  ssl={"ca": str(certificates.ca)})
        with secured, secured.cursor() as cursor:
            cursor.execute("SHOW STATUS LIKE 'Ssl_cipher'")
            assert cursor.fetchone()[1]  # this session is TLS
            for n in range(1, 51):
                cursor.execute("INSERT INTO shop.items VALUES (%s, %s)", (n, f"item {n}"))
            cursor.execute("UPDATE shop.items SET name = 'changed' WHERE id <= 10")
            cursor.execute("DELETE FROM shop.items WHERE id > 45")

            def copied() -> bool:
                cursor.execute("SELECT * FROM shop.items ORDER BY id")
                wanted = cursor.fetchall()
                cursor.execute("SELECT * FROM shop_copy.items ORDER BY id")
                return cursor.fetchall() == wanted

            wait_for(copied, 120, "the rows to arrive over TLS")
            cursor.execute("SELECT COUNT(*) FROM shop_copy.items")
            assert cursor.fetchone()[0] == 45
            # without TLS the setl user is turned away: the copy above used TLS throughout
            with pytest.raises(pymysql.err.OperationalError):
                pymysql.connect(host="127.0.0.1", port=port, user="setl",
                                password=sandbox.password(), ssl_disabled=True)
        # and the server's certificate is checked: another CA's trust is not enough
        stranger = make_certificates(tmp_path / "other-ca")
        before = confinement.current()  # (its folder a secret directory, as an operator's)
        confinement.confine(dataclasses.replace(
            before, secret_dirs=(*before.secret_dirs, stranger.ca.parent)))
        try:
            with pytest.raises(SourceError) as caught:
                connect(DataSource("source", "127.0.0.1", port, "setl",
                                   SecretRef(f"file:{sandbox.secret_file}"),
                                   tls=TlsOptions(ca=str(stranger.ca))))
        finally:
            confinement.confine(before)
        assert "certificate verify failed" in str(caught.value)
    finally:
        cluster.stop()
        server.terminate()
        server.wait(60)
