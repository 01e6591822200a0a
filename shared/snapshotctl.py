"""Asking a pipeline for table copies, and pausing or cancelling them: the ZooKeeper side
shared by the manager (``setl snapshot``) and the node that runs the pipeline.

- ``pipelines/{pid}/snapshot-requests/request-N``: a table to copy (JSON: schema, table,
  where, asked, version — the channel's definition version it is for), kept until the
  pipeline's runner of that version (or a later one) took it and saved its copy;
- ``pipelines/{pid}/snapshot-control``: ``{"paused": bool, "cancelled": {"schema.table":
  when}}`` — copies of the table started before ``when`` stop (``*``: every table).
"""

from __future__ import annotations

import json
import time
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from shared import zk
from shared.catalog import call
from shared.zk import ZkPaths


class SnapshotControl:
    def __init__(self, client: KazooClient, paths: ZkPaths, pipeline_id: str) -> None:
        self.client, self.pipeline_id = client, pipeline_id
        self.requests_path = paths.snapshot_requests(pipeline_id)
        self.control_path = paths.snapshot_control(pipeline_id)

    def ask(self, schema: str, table: str, where: str = "", version: int = 0) -> None:
        """Ask for a table to be copied; ``version``: the channel's definition version the
        request is for (a runner of an older one leaves it to the runner of this one)."""
        path, data = self.request(schema, table, where, version)
        call(f"ask for a copy of {schema}.{table} (it may have been asked before the "
             f"connection dropped: look with setl snapshot {self.pipeline_id.partition('.')[0]} "
             "status before asking again)", self.client.create, path, data, sequence=True,
             makepath=True)

    def request(self, schema: str, table: str, where: str = "", version: int = 0
                ) -> tuple[str, bytes]:
        """(path prefix of a sequential znode, data) of :meth:`ask`'s request: for a caller
        that creates it in its own transaction."""
        return f"{self.requests_path}/request-", json.dumps(
            {"schema": schema, "table": table, "where": where, "asked": time.time(),
             "version": version}).encode()

    def requests(self) -> list[tuple[str, dict[str, Any]]]:
        """(znode, request) of the tables asked for, oldest first."""
        try:
            names = sorted(call("list the copies asked for", self.client.get_children,
                                self.requests_path))
        except NoNodeError:
            return []
        found = []
        for name in names:
            try:
                data, _ = call("read a copy asked for", self.client.get,
                               f"{self.requests_path}/{name}")
            except NoNodeError:
                continue
            found.append((f"{self.requests_path}/{name}", json.loads(data)))
        return found

    def taken(self, znode: str) -> None:
        try:
            call("take a copy asked for", self.client.delete, znode)
        except NoNodeError:
            pass

    def control(self) -> dict[str, Any]:
        try:
            data, _ = call("read the copies' control", self.client.get, self.control_path)
        except NoNodeError:
            return {}
        return dict(json.loads(data or b"{}"))

    def paused(self) -> bool:
        return bool(self.control().get("paused"))

    def cancelled(self) -> dict[str, float]:
        """When each table's copies were cancelled (copies started before stop)."""
        return {str(k): float(v) for k, v in (self.control().get("cancelled") or {}).items()}

    def set_paused(self, paused: bool) -> None:
        self._write({**self.control(), "paused": paused})

    def cancel(self, table: str) -> None:
        """Cancel the copies of ``schema.table`` started until now (``*``: every table)."""
        control = self.control()
        self._write({**control, "cancelled": {**(control.get("cancelled") or {}),
                                              table: time.time()}})

    def _write(self, control: dict[str, Any]) -> None:
        zk.put(self.client, self.control_path, json.dumps(control).encode())
