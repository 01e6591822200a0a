"""``setl verify``'s verdict: a key never compared in time is not passed as equal."""

from __future__ import annotations

from manager.verifycli import (
    EXIT_DIFFERENT,
    EXIT_EQUAL,
    EXIT_ERROR,
    EXIT_UNSETTLED,
    exit_code,
    human,
)
from shared.rpc import manager_pb2


def report(**table: int) -> manager_pb2.VerifyReport:
    return manager_pb2.VerifyReport(pipeline_id="c.p", tables=[manager_pb2.TableVerdict(
        table="s.t", remaining=table.pop("remaining", -1), **table)])


def test_unsettled_keys_are_not_proven_equal() -> None:
    assert exit_code([report(rows=10)]) == EXIT_EQUAL
    assert exit_code([report(rows=10, unsettled=1)]) == EXIT_UNSETTLED
    assert "not proven equal" in human([report(rows=10, unsettled=1)])
    # after a repair: nothing left, but a key was never compared
    assert exit_code([report(rows=10, repaired=2, remaining=0, unsettled=1)]) == EXIT_UNSETTLED
    assert exit_code([report(differing_keys=1, unsettled=1)]) == EXIT_DIFFERENT
    assert exit_code([]) == EXIT_ERROR
