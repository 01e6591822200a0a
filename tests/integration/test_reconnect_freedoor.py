"""The central free door keeps one connection to its buffer for the pipeline's life: one
lost while it sat idle (the server's ``wait_timeout``, a proxy, a restart: here a KILL from
another session) failed the next poll (the snapshot loop's error) or the next delete of
served requests (the Load thread's: the pipeline failed and restarted). Each goes once
more on a new connection."""

from __future__ import annotations

import logging
import random

import pytest

from node.extract.freedoor import CentralDoor
from tests.devcluster import Database
from tests.integration.test_freedoor import request_rows
from tests.integration.test_load import target_endpoint


def kill(target: Database, door: CentralDoor) -> None:
    assert door._conn is not None
    target.execute(f"KILL CONNECTION {door._conn.thread_id()}")


def test_the_central_door_reads_and_deletes_again_on_a_new_connection(
        sandbox, target, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="setl")
    channel = f"lost{random.randrange(10**9)}"
    door = CentralDoor(target_endpoint(sandbox), channel, "forward", slice=40)
    try:
        assert door.take(10) == []  # (the retl schema where missing)
        request_rows(target, "s.t", [(i,) for i in range(5)], channel=channel,
                     pipeline="forward")
        kill(target, door)
        taken = [int(change.after["ID"]) for change in door.take(10)]
        assert len(taken) == 5
        assert f"event=free_door_reconnect channel={channel} pipeline=forward" in caplog.text
        kill(target, door)
        door.delete(taken)  # its rows are gone
        assert target.rows("SELECT COUNT(*) FROM retl.retl_buffer WHERE CHANNEL_ID = %s",
                           (channel,)) == [(0,)]
        request_rows(target, "s.t", [(9,)], channel=channel, pipeline="forward")
        kill(target, door)
        door._asked_at = 0.0
        assert door.waiting()
        assert caplog.text.count("event=free_door_reconnect") == 3
    finally:
        door.close()


def test_the_first_pipelines_central_door_reads_orphans_again_on_a_new_connection(
        sandbox, target) -> None:
    """The channel's first pipeline also takes rows naming no pipeline of it, to reject
    them: after a lost connection too (a read lost after its orphans were read takes them
    again: tests/unit/test_reconnect.py)."""
    channel = f"orphan{random.randrange(10**9)}"
    door = CentralDoor(target_endpoint(sandbox), channel, "forward", slice=40,
                       siblings=("forward",))
    try:
        assert door.take(10) == []
        request_rows(target, "s.t", [(1,)], channel=channel, pipeline="nobody")
        request_rows(target, "s.t", [(2,)], channel=channel, pipeline="forward")
        kill(target, door)
        rows = door.take(10)
        assert sorted(("reject" in change.after, change.after["PIPELINE_ID"])
                      for change in rows) == [(False, "forward"), (True, "nobody")]
    finally:
        door.close()
