"""``setl verify``'s verdict: a key never compared in time is not passed as equal."""

from __future__ import annotations

from manager.verifycli import (
    EXIT_DIFFERENT,
    EXIT_EQUAL,
    EXIT_ERROR,
    EXIT_INCOMPLETE,
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


def test_tables_not_verified_are_not_passed_as_equal() -> None:
    """A table left out (no key, only processor pairs) was "not verified: …" above an
    "equal" verdict and exit 0, which automation reads as green."""
    incomplete = report(rows=10)
    incomplete.skipped.add(table="s.nokey", reason="no primary key …")
    assert exit_code([incomplete]) == EXIT_INCOMPLETE
    out = human([incomplete])
    assert out.splitlines()[-1] == ("no difference found in the tables verified, but not "
                                    "proven equal: 1 table(s) not verified")
    assert "not verified: s.nokey: no primary key" in out
    # differences, or unsettled keys, say more than the tables left out
    different = report(differing_keys=2)
    different.skipped.add(table="s.nokey", reason="…")
    assert exit_code([different]) == EXIT_DIFFERENT
    assert exit_code([report(rows=1), incomplete]) == EXIT_INCOMPLETE
    # a missing target table: every row counted missing, no key listed
    missing = report(rows=5, missing=5, differing_keys=5)
    assert exit_code([missing]) == EXIT_DIFFERENT
    assert "differing key(s)" not in human([missing])
