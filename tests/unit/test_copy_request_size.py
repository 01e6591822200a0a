"""shared/catalog.py: the copies an apply asks for are stored in the transaction that stores
the definition; more than ZooKeeper takes in one request (jute.maxbuffer, 1 MiB) would have
left the definition unstored with a bare ZooKeeper error."""

from __future__ import annotations

import pytest

from shared.catalog import _fits
from shared.errors import ConfigError
from shared.snapshotctl import SnapshotControl


def asked(tables: int) -> list[tuple[str, bytes]]:
    control = SnapshotControl.__new__(SnapshotControl)
    control.requests_path = "/setl/pipelines/shop.forward/snapshot-requests"
    return [control.request("shop", f"table_{n:05d}", version=7) for n in range(tables)]


def test_the_copies_of_a_few_hundred_tables_go_with_the_definition() -> None:
    _fits("shop", asked(500))


def test_more_copies_than_one_transaction_holds_are_refused_saying_how_many_fit() -> None:
    with pytest.raises(ConfigError) as raised:
        _fits("shop", asked(6000))
    message = str(raised.value)
    assert message.startswith("channel shop: this apply asks for copies of 6,000 tables")
    assert "nothing was stored" in message and "Add the new tables in parts" in message
