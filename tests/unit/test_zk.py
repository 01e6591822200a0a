"""The ZooKeeper client without a ZooKeeper: calls give up, a start waits or gives up as told."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from kazoo.exceptions import KazooException, OperationTimeoutError
from kazoo.protocol.states import KeeperState

from shared import zk
from shared.errors import CoordinationError
from shared.sandbox import free_port
from shared.settings import ZkSettings


def nowhere(**settings: float) -> ZkSettings:
    """Settings naming a port nothing listens on."""
    return ZkSettings(hosts=f"127.0.0.1:{free_port()}", **settings)  # type: ignore[arg-type]


def test_a_call_while_zookeeper_is_away_gives_up_after_the_call_timeout() -> None:
    client = zk.client(nowhere(call_timeout_s=1))
    client.start_async()  # connecting for ever: kazoo queues calls until it connects
    try:
        deadline = time.monotonic() + 10
        while client.client_state != KeeperState.CONNECTING and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(OperationTimeoutError, match="did not answer within 1s"):
            client.get("/setl")
        with pytest.raises(KazooException):  # what every caller already handles
            client.transaction().commit()
    finally:
        assert zk.close(client)


def test_a_start_without_zookeeper_waits_and_says_so_until_stopped(
        caplog: pytest.LogCaptureFixture) -> None:
    settings, stop = nowhere(connect_timeout_s=1), threading.Event()
    client = zk.client(settings)
    said = threading.Event()

    class Listener(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "event=zk_waiting" in record.getMessage():
                said.set()

    listener = Listener()
    logging.getLogger("setl.zk").addHandler(listener)
    try:
        waiter = threading.Thread(target=lambda: said.wait(30) and stop.set(), daemon=True)
        waiter.start()
        assert zk.start(client, settings, stop) is False  # stopped while waiting, no error
        waiter.join(5)
    finally:
        logging.getLogger("setl.zk").removeHandler(listener)
    assert said.is_set()


def test_a_start_gives_up_only_when_configured_to() -> None:
    settings = nowhere(give_up_after_s=1)
    with pytest.raises(CoordinationError) as raised:
        zk.connect(settings)
    assert str(raised.value) == (
        f"ZooKeeper at {settings.hosts} did not answer within 1s (zookeeper.give_up_after_s); "
        "check that it runs and that 'zookeeper.hosts' in the config names it")
