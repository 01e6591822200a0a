"""The Redis example's exactly-once bookkeeping (conf/examples/redis_cache.py): which
transactions its stored position holds — by GTID state across servers, by file and
position on one — and that a source whose history lost what the cache applied stops it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from shared.rpc import subscription_pb2

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


@pytest.fixture(scope="module")
def example() -> Any:
    path = Path(__file__).resolve().parents[2] / "conf" / "examples" / "redis_cache.py"
    spec = importlib.util.spec_from_file_location("redis_cache", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def txn(gtid: str, file: str = "bin.000002", pos: int = 10) -> Any:
    return subscription_pb2.Transaction(id=f"{file}:{pos}",
                                        position={"file": file, "pos": pos, "gtid": gtid})


def through(example: Any, *gtids: str) -> dict[str, Any]:
    """The position after applying these transactions, stored and read back."""
    done: dict[str, Any] = {}
    for gtid in gtids:
        assert not example.applied(txn(gtid), done)
        done = example.load(example.dump(example.moved(done, txn(gtid))))
    return done


def test_the_position_holds_what_was_applied_by_gtid_or_file(example: Any) -> None:
    done = through(example, "0-1-7,1-2-3")
    assert example.dump(done) == '{"gtid": "0-1-7,1-2-3"}'
    assert example.applied(txn("0-1-7,1-2-3"), done)
    assert example.applied(txn("0-1-6,1-2-3"), done)
    assert not example.applied(txn("0-1-8,1-2-3"), done)
    # on a promoted replica the binlog coordinates start again; the GTIDs go on
    assert not example.applied(txn("0-1-8,1-2-3", "bin.000001", 4), done)
    by_file = example.moved({}, txn("", "bin.000002", 10))
    assert example.applied(txn("", "bin.000002", 10), by_file)
    assert not example.applied(txn("", "bin.000003", 4), by_file)


def test_a_clean_failover_goes_on_and_what_comes_again_is_skipped(example: Any) -> None:
    """Server 2, promoted with all of server 1's transactions, numbers on in domain 0; a
    batch sent again from before the switch is skipped, server by server."""
    done = through(example, "0-2-5", "0-1-6", "0-1-10", "0-2-11")
    assert example.dump(done) == '{"gtid": "0-1-10,0-2-11"}'
    assert all(example.applied(txn(gtid), done) for gtid in ("0-2-5", "0-1-10", "0-2-11"))
    assert not example.applied(txn("0-2-12"), done)


@pytest.mark.parametrize("gtid", [
    "0-2-9",   # the promoted replica had only 0-1-8: its own 9 and 10 are other transactions
    "0-2-10",  # the same number, another transaction
    "0-1-8,1-2-1"])  # it writes another domain: its state has domain 0 behind the cache's
def test_a_failover_that_lost_what_the_cache_applied_stops_it(example: Any, gtid: str
                                                               ) -> None:
    done = through(example, "0-1-8", "0-1-9", "0-1-10")
    with pytest.raises(example.Refused, match=r"in domain 0, not after the cache's 0-1-10: "
                       r"the source switched to a server that never had .* Rebuild the cache"):
        example.applied(txn(gtid), done)


def test_mysql_gtids_count_per_uuid(example: Any) -> None:
    done = through(example, f"{UUID.upper()}:22", f"{UUID}:23")
    assert example.dump(done) == f'{{"gtid": "{UUID}:1-23"}}'
    assert example.applied(txn(f"{UUID}:23"), done) and example.applied(txn(f"{UUID}:3"), done)
    assert not example.applied(txn(f"{UUID}:24"), done)
    other = "4e11fa47-71ca-11e1-9e33-c80aa9429562"
    assert not example.applied(txn(f"{other}:1"), done)
    assert example.gtids(f"{UUID}:1-5:7-9,{UUID}:tag:4") == {
        UUID: {"": 9}, f"{UUID}:tag": {"": 4}}


@pytest.mark.parametrize("gtid", ["0-1", "x:1", f"{UUID}:", f"{UUID}:a-1", "0-1-x"])
def test_what_is_not_a_gtid_is_refused_saying_what_is(example: Any, gtid: str) -> None:
    with pytest.raises(example.Refused, match="is not a GTID: MariaDB's"):
        example.applied(txn(gtid), {})


def test_a_position_without_server_ids_is_refused(example: Any) -> None:
    """Written by the example before it kept server ids: it cannot tell a new primary's
    transactions from the applied ones."""
    with pytest.raises(example.Refused, match=r'without its server id .* e\.g\. '
                       r'\{"gtid": "0-1-10"\}'):
        example.load('{"0": 10}')
    assert example.load(None) == {} and example.load('{"file": 3, "pos": 4}') == {
        "file": 3, "pos": 4}
