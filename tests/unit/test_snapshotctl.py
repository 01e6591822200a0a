"""shared/snapshotctl.py: ZooKeeper not answering is the project's error, which the copy loop
logs as one line and retries (kazoo's own went to its "a Python error" branch: a traceback
for every lost connection of an owner waking up, seen in the chaos soak)."""

from __future__ import annotations

import pytest
from kazoo.exceptions import ConnectionLoss, NoNodeError, OperationTimeoutError

from shared.errors import SetlError, ZooKeeperUnavailableError
from shared.snapshotctl import SnapshotControl
from shared.zk import ZkPaths


class Unanswered:
    def __init__(self, error: type[Exception]) -> None:
        self.error = error

    def get_children(self, path: str) -> list[str]:
        raise self.error()

    def get(self, path: str) -> tuple[bytes, object]:
        raise self.error()

    def delete(self, path: str) -> None:
        raise self.error()

    def create(self, path: str, data: bytes, **options: object) -> str:
        raise self.error()


@pytest.mark.parametrize("error", [ConnectionLoss, OperationTimeoutError])
def test_zookeeper_not_answering_is_a_setl_error(error: type[Exception]) -> None:
    control = SnapshotControl(Unanswered(error), ZkPaths("/t"), "c.p")  # type: ignore[arg-type]
    for call in (control.requests, control.control, lambda: control.taken("/t/x")):
        with pytest.raises(ZooKeeperUnavailableError, match="ZooKeeper did not answer") as got:
            call()
        assert isinstance(got.value, SetlError)


def test_an_ask_zookeeper_did_not_answer_says_it_may_have_been_asked() -> None:
    """``setl snapshot`` during a ZooKeeper blip: the manager answered INTERNAL "failed
    unexpectedly" with a traceback in its log; the create may have landed, so asking again
    blindly could copy the table twice."""
    control = SnapshotControl(Unanswered(ConnectionLoss), ZkPaths("/t"), "c.p")  # type: ignore[arg-type]
    with pytest.raises(ZooKeeperUnavailableError) as got:
        control.ask("shop", "orders")
    said = str(got.value)
    assert "ask for a copy of shop.orders" in said and "setl snapshot c status" in said, said
    assert "(ConnectionLoss)" in said, said  # its name, no empty text after it


def test_nothing_there_is_still_nothing() -> None:
    control = SnapshotControl(Unanswered(NoNodeError), ZkPaths("/t"), "c.p")  # type: ignore[arg-type]
    assert control.requests() == [] and control.control() == {}
    control.taken("/t/x")
