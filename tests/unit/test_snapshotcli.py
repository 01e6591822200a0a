"""``setl snapshot … --wait`` (manager/snapshotcli.py): its exit status, with no manager."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import pytest

from manager import snapshotcli
from shared.rpc import manager_pb2

RENAMED = ("pipeline shop.forward: shop.t was renamed to shop.t_old …; copy it again under "
           "that name: setl snapshot shop --table shop.t_old")


class Client:
    """Answers Snapshot calls with the copies listed (in the order they started): the start's
    answer lists ``before`` (the node has not taken the request yet), and each poll the next
    of ``polls`` (the last one again once they are all told)."""

    def __init__(self, *copies: manager_pb2.TableCopy,
                 before: Sequence[manager_pb2.TableCopy] = (),
                 polls: Sequence[Sequence[manager_pb2.TableCopy]] = ()) -> None:
        self.answers = [list(before), *(list(p) for p in polls), list(copies or polls[-1])]
        self.calls = 0

    def call(self, method: str, request: manager_pb2.SnapshotRequest
             ) -> manager_pb2.SnapshotResponse:
        copies = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        return manager_pb2.SnapshotResponse(pipeline_id="shop.forward", copies=copies)


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshotcli, "WAIT_POLL_S", 0)


def run(client: Client, table: str) -> int:
    args = argparse.Namespace(what=["shop"], table=table, where="", pipeline="", wait=True)
    return snapshotcli.snapshot(args, client, "table")  # type: ignore[arg-type]


def test_a_copy_asked_again_after_a_rename_failed_the_old_one_exits_0_and_lists_both(
        capsys: pytest.CaptureFixture[str]) -> None:
    failed = manager_pb2.TableCopy(table="shop.t", state="failed", error=RENAMED)
    client = Client(failed, manager_pb2.TableCopy(table="shop.t_old", state="done",
                                                  chunks_done=2, chunks=2), before=[failed])
    assert run(client, "shop.t_old") == 0
    shown = capsys.readouterr().out
    assert shown.count("shop.t") >= 2  # both listed


def test_the_copy_asked_for_failing_exits_1() -> None:
    done = manager_pb2.TableCopy(table="shop.a", state="done")
    client = Client(done, manager_pb2.TableCopy(table="shop.t_old", state="failed",
                                                error="no key"), before=[done])
    assert run(client, "shop.t_old") == 1


def test_a_table_copied_again_is_judged_by_its_newest_copy() -> None:
    """A replaced table's failed copy says to copy the same name again."""
    failed = manager_pb2.TableCopy(table="shop.t", state="failed")
    done = manager_pb2.TableCopy(table="shop.t", state="done")
    assert run(Client(failed, done, before=[failed]), "shop.t") == 0
    assert run(Client(done, failed, before=[done]), "shop.t") == 1


OLD_FAILED = manager_pb2.TableCopy(table="shop.t", state="failed", error="shop.t was replaced")
OLD_DONE = manager_pb2.TableCopy(table="shop.t", state="done", chunks_done=3, chunks=3)
COPYING = manager_pb2.TableCopy(table="shop.t", state="copying", chunks_done=1, chunks=4)


def test_wait_outlasts_an_earlier_failed_copy_until_the_new_one_is_taken_and_done() -> None:
    """The request shows only once the node has taken it: polls listing only the earlier
    copy (failed: the one that says to copy the table again) are not the copy asked for."""
    client = Client(before=[OLD_FAILED], polls=[
        [OLD_FAILED], [OLD_FAILED],  # not taken yet
        [OLD_FAILED, COPYING],
        [OLD_FAILED, manager_pb2.TableCopy(table="shop.t", state="done", chunks=4)]])
    assert run(client, "shop.t") == 0
    assert client.calls == 5  # the start, then polls until the new copy was done


def test_wait_outlasts_an_earlier_done_copy_and_judges_the_new_failing_one() -> None:
    client = Client(before=[OLD_DONE], polls=[
        [OLD_DONE], [OLD_DONE, COPYING],
        [OLD_DONE, manager_pb2.TableCopy(table="shop.t", state="failed", error="no key")]])
    assert run(client, "shop.t") == 1
    assert client.calls == 4


def test_an_earlier_copy_dropped_from_the_list_meanwhile_is_not_the_new_one() -> None:
    """A finished copy is listed only so long (KEPT_S, KEPT_FINISHED): one dropped while
    waiting leaves as many copies of the table listed as before, the new one among them."""
    other = manager_pb2.TableCopy(table="shop.t", state="failed", error="other")
    client = Client(before=[other, OLD_DONE], polls=[
        [other, OLD_DONE], [OLD_DONE], [OLD_DONE, COPYING],
        [OLD_DONE, manager_pb2.TableCopy(table="shop.t", state="failed", error="no key")]])
    assert run(client, "shop.t") == 1
    assert client.calls == 5


def test_status_wait_still_exits_1_for_any_failed_copy() -> None:
    args = argparse.Namespace(what=["status", "shop"], table="", where="", pipeline="",
                              wait=True)
    client = Client(manager_pb2.TableCopy(table="shop.t", state="failed"),
                    manager_pb2.TableCopy(table="shop.u", state="done"))
    assert snapshotcli.snapshot(args, client, "table") == 1  # type: ignore[arg-type]
